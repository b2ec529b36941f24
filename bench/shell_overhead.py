"""Per-command overhead of the persistent shell next to `docker exec`, on the same container.

Runs a no-op command (`:`) many times through each path and prints the median and 90th
percentile round trip. The no-op's own work is nil, so the figure is the harness overhead.

    .venv/bin/python bench/shell_overhead.py [--runs 1000]
"""

from __future__ import annotations

import argparse
import statistics
import time

from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.sandbox import Sandbox


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    sandbox = Sandbox()
    with sandbox.container(sandbox.base.tag, labels={"role": "bench"}) as container:
        with ShellSession(container) as shell:
            for _ in range(20):
                shell.run(":")
            shell_times = []
            for _ in range(args.runs):
                started = time.perf_counter()
                shell.run(":")
                shell_times.append(time.perf_counter() - started)
        exec_runs = max(50, args.runs // 10)
        exec_times = []
        for _ in range(exec_runs):
            started = time.perf_counter()
            container.container.exec_run(["true"], user="user")
            exec_times.append(time.perf_counter() - started)
    print(f"{'path':<28} {'runs':>6} {'median ms':>10} {'p90 ms':>8}")
    for name, times in (
        ("persistent shell", shell_times),
        ("docker exec (SDK exec_run)", exec_times),
    ):
        print(
            f"{name:<28} {len(times):>6} {statistics.median(times) * 1000:>10.3f} "
            f"{percentile(times, 0.9) * 1000:>8.3f}"
        )
    ratio = statistics.median(exec_times) / statistics.median(shell_times)
    print(f"the persistent shell is {ratio:.0f}x cheaper per command than docker exec")


if __name__ == "__main__":
    main()
