"""What one verdict costs: the grader's first start and a warm verdict, in CPU-seconds.

A container of the base image gets a small completion test (three tests reading a file) graded over
and over by its resident grader. For each verdict it records the wall time and the CPU the container
spent (its cgroup's usage, from the engine's stats: the grader, pytest and whatever the test runs),
and prints medians. "First" is the grader's start-up plus one verdict (paid once per container);
"warm" is every verdict after it (the validation stage's later checks, an episode's verdict).

    .venv/bin/python bench/verdict_cost.py [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.sandbox import Sandbox

TEST = """\
import os


def test_exists():
    assert os.path.isfile("/home/user/out.txt")


def test_content():
    assert open("/home/user/out.txt").read().strip() == "HELLO"


def test_mode():
    assert os.stat("/home/user/out.txt").st_mode & 0o777 == 0o644
"""


def cpu_seconds(container) -> float:
    stats = container.container.stats(stream=False)
    return stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    sandbox = Sandbox()
    first: tuple[float, float] | None = None
    walls, cpus = [], []
    with sandbox.container(sandbox.base.tag, labels={"role": "bench"}) as box:
        box.exec_root(
            ["sh", "-c", "echo HELLO > /home/user/out.txt && chmod 644 /home/user/out.txt"]
        )
        for n in range(args.runs + 1):
            cpu0, wall0 = cpu_seconds(box), time.perf_counter()
            verdict = run_pytest(box, TEST)
            wall, cpu = time.perf_counter() - wall0, cpu_seconds(box) - cpu0
            assert verdict.passed, verdict.summary() + verdict.output
            if n == 0:
                first = (wall, cpu)
            else:
                walls.append(wall)
                cpus.append(cpu)
    assert first is not None
    print(f"{'verdict':<34} {'runs':>5} {'wall ms':>9} {'CPU-s':>7}")
    print(f"{'first (grader start + verdict)':<34} {1:>5} {first[0] * 1000:>9.1f} {first[1]:>7.3f}")
    print(
        f"{'warm (median)':<34} {len(walls):>5} {statistics.median(walls) * 1000:>9.1f} "
        f"{statistics.median(cpus):>7.3f}"
    )


if __name__ == "__main__":
    main()
