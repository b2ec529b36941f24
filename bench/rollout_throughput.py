"""Chat-solver rollouts per second against a local model with a fixed reply latency.

Many short episodes run the way the solver stage runs them (`run_episode` with the chat policy,
episodes in parallel, container starts and verdicts bounded by a semaphore), against a
ScriptedServer that waits `--latency` seconds before each reply. Every command is the no-op `:`, so
all time not spent waiting for the model is the harness's own: HTTP and parsing, the shell, starting
the container, grading, removing it.

Prints environment steps (commands run) per second next to the ideal for this latency and
concurrency (a free harness: one step per latency per episode in flight), and the harness's own
overhead per step: the CPU this process spends per step (the scripted model runs in another
process), and the wall time per step not spent waiting for the model, broken down.

    .venv/bin/python bench/rollout_throughput.py [--episodes 48] [--turns 8] [--latency 0.25]
        [--jitter 0.5]
        [--parallel 16] [--docker-slots 6] [--warm 4]

`--warm N` starts containers ahead as the solver stage does (`warm_containers`): each episode asks
for the container of the episode that will take its place, so its start and grader start overlap
other episodes' model waits.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from cpu import CpuMeter

from endless_assets.agent.chat import ChatConfig, ChatPolicy
from endless_assets.agent.episode import EpisodeLimits, Rollout, run_episode
from endless_assets.agent.policies import EpisodeTask
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.testing.scripted_server import Reply, ScriptedServer

TEST = "def test_nothing_was_asked():\n    assert True\n"


def serve(turns: int, latency: float, jitter: float, urls: multiprocessing.Queue, stop) -> None:
    """The scripted model, in its own process so its CPU is not counted as the harness's.
    `jitter`: each reply waits `latency` times a uniform factor in [1 - jitter, 1 + jitter]
    (seeded): the same mean, but episodes drift apart as real ones do."""
    rng = random.Random(7)

    def responder(request: dict) -> Reply:
        done = sum(m["role"] == "assistant" for m in request["messages"]) >= turns
        text = "<action>done</action>" if done else "Nothing to do.\n<command>:</command>"
        return Reply(text, delay=latency * rng.uniform(1 - jitter, 1 + jitter))

    with ScriptedServer(responder) as server:
        urls.put(server.base_url)
        stop.wait()
        urls.put(server.max_in_flight)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--turns", type=int, default=8, help="commands per episode")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per model reply")
    parser.add_argument(
        "--jitter", type=float, default=0.0, help="each reply's latency varies by up to this share"
    )
    parser.add_argument("--parallel", type=int, default=16, help="episodes in flight")
    parser.add_argument("--docker-slots", type=int, default=6, help="container starts/verdicts")
    parser.add_argument(
        "--warm",
        type=int,
        default=0,
        help="containers started ahead, as the solver stage does (warm_containers; 0: none)",
    )
    args = parser.parse_args()

    fork = multiprocessing.get_context("fork")  # before any thread of ours exists
    urls, stop = fork.Queue(), fork.Event()
    server = fork.Process(
        target=serve, args=(args.turns, args.latency, args.jitter, urls, stop), daemon=True
    )
    server.start()
    sandbox = Sandbox(SandboxConfig(warm=args.warm, cpu_slots=args.docker_slots))
    image = sandbox.base.tag
    slots = sandbox.cpu  # (it adds up how long episodes waited for it)
    limits = EpisodeLimits(max_turns=args.turns + 1, command_timeout=30)
    try:
        base_url = urls.get(timeout=30)
        client = ChatClient(Endpoint(model="bench", base_url=base_url, retries=0, concurrency=256))
        config = ChatConfig(model="bench", max_turns=args.turns + 1)

        def episode(i: int) -> Rollout:
            if args.warm and 0 <= i + args.parallel < args.episodes:
                sandbox.expect(image)  # for the episode that takes this one's place
            return run_episode(
                sandbox,
                image,
                EpisodeTask(f"bench-{i}", "Do nothing, then say done."),
                ChatPolicy(client, config),
                TEST,
                limits,
                labels={"role": "bench"},
                warm=bool(args.warm),
            )

        episode(-1)  # warm up: imports, the first container
        slots.waited = 0.0
        started, cpu = time.monotonic(), time.process_time()
        with (
            CpuMeter(others={"model server": server.pid}) as meter,
            ThreadPoolExecutor(max_workers=args.parallel) as pool,
        ):
            rollouts = list(pool.map(episode, range(args.episodes)))
        wall, cpu = time.monotonic() - started, time.process_time() - cpu
    finally:
        stop.set()
        sandbox.close()
    in_flight = urls.get(timeout=30)
    server.join(timeout=30)

    failed = [r for r in rollouts if r.termination != "done" or r.reward != 1]
    if failed:
        raise SystemExit(f"{len(failed)} episodes did not finish cleanly: {failed[0].error}")
    turns = [t for r in rollouts for t in r.turns]
    steps = sum(1 for t in turns if t.kind == "command")
    requests = len(turns)
    model_wait = sum(t.policy_seconds for t in turns)
    shell = [t.seconds for t in turns if t.kind == "command"]
    client_overhead = (model_wait - requests * args.latency) / requests
    fixed = [r.seconds - sum(t.policy_seconds + t.seconds for t in r.turns) for r in rollouts]
    harness_total = sum(r.seconds for r in rollouts) - requests * args.latency
    ideal = min(args.parallel, args.episodes) / args.latency * steps / requests

    print(
        f"{args.episodes} episodes x {args.turns} commands (+ done), model latency "
        f"{args.latency * 1000:.0f} ms (±{args.jitter:.0%}), {args.parallel} episodes in flight, "
        f"{args.docker_slots} docker slots, {args.warm} warm containers; {in_flight} requests "
        "in flight at most"
    )
    print(f"wall {wall:.1f} s, {steps} environment steps, {requests} model replies")
    pacer = client.pacer.stats()
    print(
        f"the client's pacer: limit {pacer.limit:g}, peak {pacer.peak_in_flight} in flight, "
        f"{pacer.decreases} decreases, {pacer.queue_seconds:.1f} s queued for a slot"
    )
    print(
        f"environment steps per second: {steps / wall:.1f} "
        f"(ideal with a free harness: {ideal:.1f}; {steps / wall / ideal:.0%} of it)"
    )
    print(
        f"harness CPU of this process per step: {cpu / steps * 1000:.2f} ms "
        f"({cpu:.1f} CPU-s; Docker's own work is not in it)"
    )
    print(
        f"harness wall time per step, all time not spent in the model: "
        f"{harness_total / steps * 1000:.1f} ms, of which queueing for a docker slot "
        f"{slots.waited / steps * 1000:.1f} ms"
    )
    print(f"  client, HTTP and reply parsing per model call: {client_overhead * 1000:.2f} ms")
    print(
        f"  persistent shell per command (median / p90):  {statistics.median(shell) * 1000:.2f}"
        f" / {sorted(shell)[int(0.9 * len(shell))] * 1000:.2f} ms"
    )
    if args.warm:
        warm = sandbox.warm
        print(f"warm containers: {warm.taken} taken, {warm.started} started, {warm.wasted} unused")
    print(meter.report(per=len(rollouts), unit="episode"))
    queued = slots.waited / len(rollouts)
    print(
        f"  container start + verdict + removal per episode (median): "
        f"{statistics.median(fixed) * 1000:.0f} ms, {queued * 1000:.0f} ms of it queued "
        f"for a slot on average"
    )


if __name__ == "__main__":
    main()
