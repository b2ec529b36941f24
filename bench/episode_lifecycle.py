"""What one episode's container costs in engine time, phase by phase, one episode at a time.

For `--runs` episodes of a small task (one after another, so nothing else competes for the
engine), it times: starting the container (with the run's limits: the disk budget's filesystem
included), starting its resident grader, opening the agent's shell, one command, the verdict,
and removing the container; and prints the median of each phase and of start + grader + verdict
+ removal, the lifecycle issue 13 asks to keep under 0.5 s. `--warm` takes containers started
ahead instead (sandbox/warm.py): the start and the grader's start leave the episode's clock.

    .venv/bin/python bench/episode_lifecycle.py [--runs 15] [--disk 2g] [--warm]
"""

from __future__ import annotations

import argparse
import statistics
import time

from endless_assets.sandbox.container import Limits
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.sandbox.shell import ShellSession
from endless_assets.sandbox.verdict import run_pytest, start_grader

TEST = 'def test_upper():\n    assert open("/home/user/out.txt").read() == "HELLO\\n"\n'
SOLVE = "tr a-z A-Z < /home/user/in.txt > /home/user/out.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--disk", default="2g")
    parser.add_argument("--warm", action="store_true")
    args = parser.parse_args()
    sandbox = Sandbox(SandboxConfig(limits=Limits(disk=args.disk), warm=2 if args.warm else 0))
    build = sandbox.build(f"FROM {sandbox.base.tag}\nRUN echo hello > /home/user/in.txt\n", {})
    assert build.ok, build.log
    phases: dict[str, list[float]] = {}

    def record(name: str, since: float) -> float:
        now = time.monotonic()
        phases.setdefault(name, []).append(now - since)
        return now

    try:
        for _ in range(args.runs + 1):  # the first one warms the caches, and is left out
            if args.warm:
                sandbox.expect(build.tag)
                sandbox.warm.ready(build.tag, 1)
            t = time.monotonic()
            with sandbox.container(build.tag, warm=args.warm) as box:
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
    finally:
        sandbox.close()
    medians = {name: statistics.median(values[1:]) for name, values in phases.items()}
    for name, value in medians.items():
        print(f"{name:>13}: {value * 1000:6.0f} ms")
    lifecycle = sum(medians[n] for n in ("start", "grader start", "verdict", "removal"))
    print(
        f"start + grader start + verdict + removal: {lifecycle * 1000:.0f} ms "
        f"(disk budget {args.disk}, {'warm' if args.warm else 'cold'} start, {args.runs} runs)"
    )


if __name__ == "__main__":
    main()
