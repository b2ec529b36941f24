"""What one episode's container costs in engine time, phase by phase, one episode at a time.

For `--runs` episodes of a small task (one after another, so nothing else competes for the
engine), it times: starting the container (with the run's limits: the disk budget's filesystem
included), starting its resident grader, opening the agent's shell, one command, the verdict,
and removing the container; and prints the median of each phase (wall time, and the machine's CPU
while it ran: where each CPU-second of an episode goes, on an otherwise idle machine) and of start
+ grader + verdict + removal, the lifecycle we keep under 0.5 s. `--warm` takes containers started
ahead instead (sandbox/containers/warm.py): the start and the grader's start leave the episode's
clock. `--user root` (or another user of the base image) runs the agent as that user, the way an
imported task's is (identity.py): a root agent's verdict is a verifier container's. The machine's
CPU per episode is printed too (cpu.py).

    .venv/bin/python bench/episode_lifecycle.py [--runs 15] [--disk 2g] [--warm] [--user root]
"""

from __future__ import annotations

import argparse
import statistics
import time

from cpu import CpuMeter, machine_busy

from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.grading.verdict import start_grader
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig

TEST = 'def test_upper():\n    assert open("/home/user/out.txt").read() == "HELLO\\n"\n'
SOLVE = "tr a-z A-Z < /home/user/in.txt > /home/user/out.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--disk", default="2g")
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("--user", default="", help="the agent's user (default: ours, uid 1000)")
    args = parser.parse_args()
    sandbox = Sandbox(SandboxConfig(limits=Limits(disk=args.disk), warm=2 if args.warm else 0))
    dockerfile = f"FROM {sandbox.base.tag}\nRUN echo hello > /home/user/in.txt\n"
    if args.user:
        dockerfile = identity_dockerfile(dockerfile, args.user, "/home/user")
    build = sandbox.build(dockerfile, {})
    assert build.ok, build.log
    phases: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def record(name: str, since: tuple[float, float]) -> tuple[float, float]:
        now = (time.monotonic(), machine_busy())
        phases.setdefault(name, []).append(now[0] - since[0])
        cpu.setdefault(name, []).append(now[1] - since[1])
        return now

    meter = CpuMeter()
    try:
        with meter:
            run(args, sandbox, build.tag, record)
    finally:
        sandbox.close()
    medians = {name: statistics.median(values[1:]) for name, values in phases.items()}
    for name, value in medians.items():
        used = statistics.median(cpu[name][1:])
        print(f"{name:>13}: {value * 1000:6.0f} ms, machine CPU {used * 1000:5.0f} ms")
    lifecycle = sum(medians[n] for n in ("start", "grader start", "verdict", "removal"))
    print(
        f"start + grader start + verdict + removal: {lifecycle * 1000:.0f} ms "
        f"(disk budget {args.disk}, {'warm' if args.warm else 'cold'} start, {args.runs} runs, "
        f"agent {args.user or 'ours'})"
    )
    print(meter.report(per=args.runs + 1, unit="episode"))


def run(args: argparse.Namespace, sandbox: Sandbox, tag: str, record) -> None:
    for _ in range(args.runs + 1):  # the first one warms the caches, and is left out
        if args.warm:
            sandbox.expect(tag)
            sandbox.warm.ready(tag, 1)
        t = (time.monotonic(), machine_busy())
        with sandbox.container(tag, warm=args.warm) as box:
            t = record("start", t)
            start_grader(box)
            t = record("grader start", t)
            with ShellSession(box) as shell:
                t = record("shell open", t)
                shell.run(SOLVE, timeout=30)
                t = record("command", t)
            verdict = run_pytest(box, TEST, timeout=60)
            assert verdict.passed, verdict.output
            t = record("verdict", t)
        record("removal", t)


if __name__ == "__main__":
    main()
