"""The served environment's speed, beside `docker exec`: reset latency, step round trip and
environment steps per second with N concurrent OpenEnv sessions held for a sustained run.

An `endless serve` process serves a few procedural tasks (a fresh data directory, images built
first); OpenEnv's own async client (GenericEnvClient, one WebSocket per session, all in one event
loop) holds `--sessions` sessions, each running episodes of `--steps` commands then `done`, until
`--seconds` have passed. A step's round trip is the client's: the message to the server, the
command in the episode's persistent shell, the answer back. The first command of an episode
starts its shell (one `docker exec`) and is reported apart. Then the same command goes through
the Docker SDK's `exec_run` (a `docker exec` per step, as sandbox layers without a persistent
shell do) into containers of the same image, as many at once as there were sessions. At the end
the server is stopped and its containers counted (none may be left). `--think` makes each
session wait before each command, as a policy generating it would (0: as fast as it can, which
saturates the machine and measures queueing more than the round trip).

    .venv/bin/python bench/serve_steps.py [--sessions 32] [--seconds 120] [--steps 20] [--think 0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cpu import CpuMeter
from openenv.core.generic_client import GenericEnvClient

from endless_assets.sandbox.engine.client import OWNER_LABEL, PROJECT_LABEL
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.kept_lake import procedural_tasks, write_kept


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def row(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"{name:<44} {len(ms):>7} {statistics.median(ms):>9.2f} {percentile(ms, 0.9):>8.2f} "
        f"{percentile(ms, 0.99):>8.2f}"
    )


class Figures:
    def __init__(self) -> None:
        self.resets: list[float] = []
        self.first_steps: list[float] = []
        self.steps: list[float] = []
        self.dones: list[float] = []
        self.rewards: list[float | None] = []
        self.infra = 0
        self.steps_done = 0


async def session(url: str, task_ids: list[str], index: int, args, deadline: float, out: Figures):
    client = GenericEnvClient(base_url=url, message_timeout_s=600)
    async with client as env:
        episode = 0
        while time.monotonic() < deadline:
            started = time.perf_counter()
            first = await env.reset(task_id=task_ids[(index + episode) % len(task_ids)])
            out.resets.append(time.perf_counter() - started)
            if first.done:
                out.infra += 1
                continue
            for step in range(args.steps):
                if args.think:  # the policy's own time (a model generating the command)
                    await asyncio.sleep(args.think)
                started = time.perf_counter()
                result = await env.step({"command": args.command})
                took = time.perf_counter() - started
                (out.first_steps if step == 0 else out.steps).append(took)
                out.steps_done += 1
                if result.observation.get("infra_error"):
                    out.infra += 1
            started = time.perf_counter()
            final = await env.step({"done": True})
            out.dones.append(time.perf_counter() - started)
            out.rewards.append(final.reward)
            episode += 1


async def drive(url: str, task_ids: list[str], args) -> tuple[Figures, float]:
    out = Figures()
    started = time.monotonic()
    deadline = started + args.seconds
    await asyncio.gather(
        *(session(url, task_ids, i, args, deadline, out) for i in range(args.sessions))
    )
    return out, time.monotonic() - started


def docker_exec(sandbox: Sandbox, images: list[str], args, runs: int) -> list[float]:
    """`runs` commands per container through exec_run, `--sessions` containers at once."""
    times: list[float] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        with sandbox.container(images[index % len(images)], labels={"role": "bench"}) as box:
            command = ["bash", "-c", args.command]
            box.container.exec_run(command, user="1000", workdir="/home/user")  # warm
            mine = []
            for _ in range(runs):
                if args.think:
                    time.sleep(args.think)
                started = time.perf_counter()
                box.container.exec_run(command, user="1000", workdir="/home/user")
                mine.append(time.perf_counter() - started)
        with lock:
            times.extend(mine)

    with ThreadPoolExecutor(args.sessions) as pool:
        list(pool.map(one, range(args.sessions)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--steps", type=int, default=20, help="commands per episode")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--command", default="echo ok")
    parser.add_argument("--exec-runs", type=int, default=20, help="docker exec per container")
    parser.add_argument(
        "--think", type=float, default=0.0, help="seconds a session waits before each command"
    )
    args = parser.parse_args()
    sandbox = Sandbox()
    work = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    lake = Lake(work / "data")
    tasks = write_kept(lake, procedural_tasks(sandbox.base.tag, "serve-bench", args.tasks))
    images = [sandbox.build(t.dockerfile or "", t.context_files, network=False).tag for t in tasks]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    env["ENDLESS_DATA_DIR"] = str(lake.data_dir)
    limits = [f"--max-sessions={args.sessions}", f"--max-turns={args.steps + 1}"]
    server = subprocess.Popen(
        [sys.executable, "-m", "endless_assets.cli", "serve", "--port", "0", *limits],
        stdout=subprocess.PIPE,
        stderr=open(work / "serve.log", "w"),  # noqa: SIM115 (the server's, closed at exit)
        text=True,
        env=env,
        cwd=work,
    )
    line = server.stdout.readline()
    if "serving" not in line:
        raise SystemExit(f"endless serve did not start: {(work / 'serve.log').read_text()}")
    url = line.split(" at ", 1)[1].split()[0]
    print(
        f"{args.sessions} sessions, {args.steps} x {args.command!r} + done per episode, "
        f"{args.think:g} s before each command, {args.seconds:g} s; server pid {server.pid}"
    )
    with CpuMeter(others={"endless serve": server.pid}) as meter:
        figures, wall = asyncio.run(drive(url, [t.task_id for t in tasks], args))
    server.send_signal(signal.SIGINT)
    server.wait(timeout=300)
    owner = f"{socket.gethostname()}:{server.pid}"
    left = sandbox.client.containers.list(
        all=True, filters={"label": [f"{PROJECT_LABEL}=endless", f"{OWNER_LABEL}={owner}"]}
    )
    exec_times = docker_exec(sandbox, images, args, args.exec_runs)
    served = query(lake, "select termination, count(*) n from served_episodes group by 1")
    print(f"{'what':<44} {'count':>7} {'p50 ms':>9} {'p90 ms':>8} {'p99 ms':>8}")
    print(row("reset (container start + grader)", figures.resets))
    print(row("step, first of an episode (starts the shell)", figures.first_steps))
    print(row("step round trip (OpenEnv client, WebSocket)", figures.steps))
    print(row("done (grading)", figures.dones))
    print(row(f"docker exec (SDK exec_run, {args.sessions} at once)", exec_times))
    ratio = statistics.median(exec_times) / statistics.median(figures.steps)
    episodes = len(figures.rewards)
    print(
        f"{figures.steps_done / wall:.1f} environment steps/s, {episodes / wall * 60:.0f} "
        f"episodes/min over {wall:.0f} s; step p50 {ratio:.1f}x faster than docker exec; "
        f"rewards {sorted({r for r in figures.rewards}, key=str)}, infra errors {figures.infra}"
    )
    print(meter.report(per=max(1, figures.steps_done), unit="step"))
    print(f"served_episodes: {dict(served.iter_rows())}; containers left: {len(left)}")


if __name__ == "__main__":
    main()
