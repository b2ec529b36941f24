"""Episodes per minute on a pool of 1, 2 and 3 sandbox engines of this machine.

Starts extra `dockerd` processes (endless_assets/testing/engines.py), copies the base image to
them once (timed: what `endless setup` does for a new engine), then for each pool size runs the
same oracle episodes the way the solver stage does (build the task image, start a container, run the
reference, grade, remove), `--parallel` at once, and prints episodes/min, the median episode and
where the work was placed. On one machine the engines share its cores, so the figure shows what
the pool costs, not what more machines would add: each extra engine brings its own cores there.

It also measures the machine's CPU per episode (bench/cpu.py), split into this process (the
harness: placement, the Docker API client, the episode loop) and everything else (the engine's
daemons and each container's processes), and from those two figures models N remote engines of
this machine's size driven by one harness of this size: episodes/min = min(N x engine cores /
engine CPU per episode, harness cores / harness CPU per episode).

    .venv/bin/python bench/scale_out.py [--episodes 24] [--parallel 6] [--engines 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from cpu import CpuMeter

from endless_assets.agent.episode import EpisodeLimits, run_episode
from endless_assets.agent.policies import EpisodeTask, OraclePolicy
from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.engine.engines import EngineSpec
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.testing.engines import ExtraEngine

TEST = """\
def test_upper():
    assert open("/home/user/out.txt").read() == "HELLO\\n"
"""
SOLUTION = "tr a-z A-Z < /home/user/in.txt > /home/user/out.txt"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--parallel", type=int, default=6)
    parser.add_argument("--engines", type=int, default=3)
    args = parser.parse_args()
    local = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp, ExitStack() as stack:
        extra = [
            stack.enter_context(ExtraEngine(Path(tmp) / f"e{i}"))
            for i in range(2, args.engines + 1)
        ]
        urls = [local, *(e.url for e in extra)]
        started = time.monotonic()
        Sandbox(SandboxConfig(engines=tuple(EngineSpec(u, 1) for u in urls))).ensure_base()
        print(f"base image on {len(urls)} engines in {time.monotonic() - started:.1f} s")
        costs = []
        for size in range(1, len(urls) + 1):
            slots = max(1, args.parallel // size)
            specs = tuple(EngineSpec(u, slots) for u in urls[:size])
            costs.append(
                measure(Sandbox(SandboxConfig(engines=specs, limits=Limits(disk="0"))), args)
            )
        model(*costs[0])


def model(harness: float, engine: float) -> None:
    """N remote engines with this machine's cores, one harness machine with this one's."""
    cores = os.cpu_count() or 1
    print(
        f"per episode (1 engine): harness {harness * 1000:.0f} CPU-ms, engine and containers "
        f"{engine * 1000:.0f} CPU-ms; model of N remote {cores}-core engines:"
    )
    for n in (1, 2, 4, 8, 16, 32):
        engines, harness_cap = n * cores / engine * 60, cores / harness * 60
        bound = "engines" if engines < harness_cap else "harness"
        print(f"  N={n:>2}: {min(engines, harness_cap):7.0f} episodes/min ({bound}-bound)")


def measure(sandbox: Sandbox, args: argparse.Namespace) -> tuple[float, float]:
    """Run the episodes; return (harness, engine) CPU-s per episode."""
    dockerfile = (
        f"FROM {sandbox.base.tag}\n"
        f"RUN echo hello > /home/user/in.txt && echo {time.time_ns()} > /home/user/.nonce\n"
    )
    build = sandbox.build(dockerfile, {})
    assert build.ok, build.log
    task = EpisodeTask("bench", "Upper-case in.txt into out.txt", SOLUTION)

    def episode(_: int) -> float:
        rollout = run_episode(sandbox, build.tag, task, OraclePolicy(), TEST, EpisodeLimits())
        assert rollout.reward == 1, rollout.error
        return rollout.seconds

    started = time.monotonic()
    with CpuMeter() as meter, ThreadPoolExecutor(args.parallel) as pool:
        seconds = list(pool.map(episode, range(args.episodes)))
    wall = time.monotonic() - started
    placed = ", ".join(
        f"{r['engine'].rsplit('/', 2)[-2]}: {r['placed']}" for r in sandbox.pool.report()
    )
    print(
        f"{len(sandbox.pool.engines)} engine(s): {args.episodes / wall * 60:.1f} episodes/min, "
        f"median episode {statistics.median(seconds):.2f} s, placed {placed}"
    )
    print("  " + meter.report(per=args.episodes, unit="episode"))
    harness = meter.spent["this process"]
    return harness / args.episodes, (meter.spent["machine"] - harness) / args.episodes


if __name__ == "__main__":
    main()
