"""What a task's services cost an episode: the time to start and grade a two-service task (a
PostgreSQL and a Redis beside the agent's container) against a one-container task.

For `--runs` episodes of each (one after another), it times starting the episode (the network,
the services started in parallel and ready, the agent's container), the verdict (a test that
asks both services, or reads a file), and removing everything; and prints the median of each
phase and of the whole, per kind of task. The first episode of each kind warms the caches and is
left out. The images are built first (the services' from Debian's packages, through the build
network: a minute or two the first time, cached afterwards).

    .venv/bin/python bench/services_episode.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from endless_assets.generation.procedural.base import apt_install
from endless_assets.generation.procedural.families.service_kit import (
    AGENT_PACKAGES,
    postgres,
    redis,
)
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.grading.verdict import start_grader
from endless_assets.sandbox.sandbox import Sandbox

ONE_TEST = 'def test_file():\n    assert open("/home/user/in.txt").read() == "hello\\n"\n'
TWO_TEST = """import subprocess


def test_both_services_answer():
    env = {"PATH": "/usr/bin:/bin", "PGPASSWORD": "bench"}
    sql = ["psql", "-X", "-At", "-h", "db", "-U", "postgres", "-c", "SELECT 1"]
    assert subprocess.run(sql, env=env, capture_output=True, text=True).stdout == "1\\n"
    ping = ["redis-cli", "-h", "queue", "ping"]
    assert subprocess.run(ping, capture_output=True, text=True).stdout == "PONG\\n"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sandbox = Sandbox()
    base = sandbox.base.tag
    agent = f"FROM {base}\n{apt_install(AGENT_PACKAGES)}\nRUN echo hello > /home/user/in.txt\n"
    services = [
        postgres("ALTER ROLE postgres PASSWORD 'bench';\n"),
        redis([["RPUSH", "jobs", "one", "two"]]),
    ]
    services = [
        s.model_copy(update={"dockerfile": f"FROM {base}\n{s.dockerfile}"}) for s in services
    ]
    t = time.monotonic()
    one = sandbox.build(agent, {})
    two = sandbox.build(agent, {}, services=services)
    assert one.ok and two.ok, (one.log, two.log)
    print(f"images ready in {time.monotonic() - t:.1f} s")
    rows = {}
    for name, tag, test in (
        ("one container", one.tag, ONE_TEST),
        ("two services", two.tag, TWO_TEST),
    ):
        rows[name] = measure(sandbox, tag, test, args.runs)
    print(f"{'task':>14} {'start':>9} {'verdict':>9} {'removal':>9} {'episode':>9}")
    for name, medians in rows.items():
        cells = " ".join(
            f"{medians[p] * 1000:7.0f}ms" for p in ("start", "verdict", "removal", "total")
        )
        print(f"{name:>14} {cells}")
    ratio = rows["two services"]["total"] / rows["one container"]["total"]
    print(f"a two-service episode costs {ratio:.1f}x a one-container one ({args.runs} runs each)")


def measure(sandbox: Sandbox, tag: str, test: str, runs: int) -> dict[str, float]:
    phases: dict[str, list[float]] = {"start": [], "verdict": [], "removal": [], "total": []}
    for _ in range(runs + 1):  # the first one warms the caches, and is left out
        t0 = time.monotonic()
        with sandbox.container(tag) as box:
            t1 = time.monotonic()
            start_grader(box, test)
            verdict = run_pytest(box, test, timeout=120, stop_agent=False)
            assert verdict.passed, verdict.output
            t2 = time.monotonic()
        t3 = time.monotonic()
        for name, value in (("start", t1 - t0), ("verdict", t2 - t1), ("removal", t3 - t2)):
            phases[name].append(value)
        phases["total"].append(t3 - t0)
    return {name: statistics.median(values[1:]) for name, values in phases.items()}


if __name__ == "__main__":
    main()
