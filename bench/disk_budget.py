"""What the per-container disk budget costs: container start + removal with and without it.

Starts and removes containers of the base image one at a time, alternating `disk=0` (no budget)
and `disk=2g` (a loop-mounted ext4 under the container's layer, see sandbox/engine/disk.py), and
prints the median wall time of each and the machine's CPU time per container (all processes:
dockerd, runc, mkfs, mount; from /proc/stat, so run it on an otherwise idle machine). Then how fast
an agent can write inside a container with and without it (dd of 512 MiB).

    .venv/bin/python bench/disk_budget.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig


def cpu_seconds() -> float:
    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:]
    busy = sum(int(x) for i, x in enumerate(fields[:8]) if i not in (3, 4))  # not idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    sandboxes = {disk: Sandbox(SandboxConfig(limits=Limits(disk=disk))) for disk in ("0", "2g")}
    image = sandboxes["0"].base.tag
    walls: dict[str, list[float]] = {d: [] for d in sandboxes}
    cpus: dict[str, list[float]] = {d: [] for d in sandboxes}
    for _ in range(args.runs):
        for disk, sandbox in sandboxes.items():
            cpu0, wall0 = cpu_seconds(), time.perf_counter()
            with sandbox.container(image, labels={"role": "bench"}):
                pass
            walls[disk].append(time.perf_counter() - wall0)
            cpus[disk].append(cpu_seconds() - cpu0)
    print(f"{'disk':<6} {'runs':>5} {'start+remove ms':>16} {'CPU-s':>7}")
    for disk in sandboxes:
        print(
            f"{disk:<6} {args.runs:>5} {statistics.median(walls[disk]) * 1000:>16.0f} "
            f"{statistics.mean(cpus[disk]):>7.3f}"
        )
    write = "dd if=/dev/zero of=/home/user/f bs=1M count=512 conv=fsync 2>&1 | tail -1"
    for disk, sandbox in sandboxes.items():
        with sandbox.container(image, labels={"role": "bench"}) as box:
            out = box.exec_root(["sh", "-c", write], user="1000").output.strip()
        print(f"write 512 MiB, disk={disk}: {out}")


if __name__ == "__main__":
    main()
