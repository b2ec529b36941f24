"""A 16-attempt chat-solver run against a real server that computes one reply at a time.

The server is `transformers serve` on CPU over a tiny model built on the spot
(endless_assets/testing/tiny_model.py; no weights downloaded) whose replies never end early, so
every reply costs `turn_tokens` tokens. Like the issue's run (replies of about 3 s, a 20 s request
budget), `turn_tokens` is sized so that one reply takes `--reply-seconds` (3) on this machine at the
time of the run, measured with solo requests first: the shared 2-core machine's speed varies tenfold
with the load of the other jobs, and the default 4096 tokens takes 10-80 s here. The run is what the
solver stage does (defs/rollouts.py): the chat policy from the settings, k attempts of one
procedural task, `episode_workers` episodes in parallel, container starts and grading behind
`workers` slots, the episode limits from the settings. Settings are the defaults except the request
budget (`--timeout`, the 20 s of the issue), the reply length (as above) and `--context-tokens` (the
tiny model's context is smaller than the default 32768); `--max-turns` only scales the run's length.

Prints, per client: requests sent, requests the server received (abandoned ones included),
timeouts, retries, wall time, terminations, and the concurrency the client settled on.
`--old-client FILE` runs the chat client of an earlier version instead (e.g.
`git show HEAD~1:endless_assets/llm/client.py > /tmp/old_client.py`). Each run gets a fresh
server, so no abandoned work carries over.

    .venv/bin/python bench/llm_serial.py [--old-client /tmp/old_client.py] [--timeout 20]
        [--attempts 16] [--max-turns 8] [--reply-seconds 3] [--context-tokens 8192]
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

import endless_assets.agent.chat as chat
from endless_assets.agent.episode import EpisodeLimits, Rollout, run_episode
from endless_assets.agent.factory import policy_factory
from endless_assets.agent.policies import EpisodeTask
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.sandbox.sandbox import CpuSlot, Sandbox
from endless_assets.settings import Settings
from endless_assets.testing.model_server import ModelServer
from endless_assets.testing.tiny_model import TinyModel, build


class Counts(logging.Handler):
    """Requests and timeouts at the SDK, retries from the client's own warnings."""

    def __init__(self) -> None:
        super().__init__()
        self.guard = threading.Lock()
        self.requests = 0
        self.timeouts = 0
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "; retry " in record.getMessage():
            with self.guard:
                self.retries += 1

    def wrap(self) -> None:
        create = openai.resources.chat.completions.Completions.create
        counts = self

        def counted(self, *args, **kwargs):
            with counts.guard:
                counts.requests += 1
            try:
                return create(self, *args, **kwargs)
            except openai.APITimeoutError:
                with counts.guard:
                    counts.timeouts += 1
                raise

        openai.resources.chat.completions.Completions.create = counted


def load_client(path: str) -> None:
    """Make the chat policy use the client (and its exceptions) of an earlier version."""
    spec = importlib.util.spec_from_file_location("old_llm_client", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    chat.ChatClient = module.ChatClient  # the factory builds this one
    chat.LLMUnavailable, chat.LLMRequestError = module.LLMUnavailable, module.LLMRequestError


def reply_tokens(server: ModelServer, seconds: float) -> int:
    """Tokens one solo reply generates in `seconds` now (a warm-up request, then two timed)."""
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "hello"}]
    client.chat.completions.create(model=server.model, messages=messages, max_tokens=64)
    rates = []
    for _ in range(2):
        started = time.monotonic()
        client.chat.completions.create(model=server.model, messages=messages, max_tokens=512)
        rates.append(512 / (time.monotonic() - started))
    return max(64, min(4096, round(seconds * sorted(rates)[0])))


def run(args: argparse.Namespace, sandbox: Sandbox, task, image: str, root: Path) -> None:
    if args.old_client:
        load_client(args.old_client)
    counts = Counts()
    logging.getLogger("endless_assets.llm.client").addHandler(counts)
    logging.getLogger("old_llm_client").addHandler(counts)
    counts.wrap()
    spec = TinyModel(name="serial", stops=False)
    with ModelServer(build(spec, root / "model"), root / "server.log") as server:
        turn_tokens = args.turn_tokens or reply_tokens(server, args.reply_seconds)
        calibration = counts.requests  # not part of the run
        settings = Settings.resolve(
            solver="chat",
            solver_model=server.model,
            solver_base_url=server.base_url,
            llm_timeout=args.timeout,
            context_tokens=args.context_tokens,
            max_turns=args.max_turns,
            turn_tokens=turn_tokens,
            k=args.attempts,
        )
        make_policy = policy_factory(settings)
        limits = EpisodeLimits(
            max_turns=settings.solver.max_turns,
            command_timeout=settings.solver.command_timeout,
            episode_seconds=settings.solver.episode_seconds,
            output_cap=settings.solver.output_cap,
        )
        sandbox.cpu = CpuSlot(max(1, settings.run.workers))
        probe = make_policy()

        def attempt(idx: int) -> Rollout:
            return run_episode(
                sandbox,
                image,
                EpisodeTask(task.task_id, task.instruction),
                make_policy(),
                task.completion_test,
                limits,
                labels={"role": f"bench-{idx}"},
            )

        started = time.monotonic()
        with ThreadPoolExecutor(settings.episode_workers) as pool:
            rollouts = list(pool.map(attempt, range(settings.solver.attempts)))
        wall = time.monotonic() - started
        received = server.log_tail(10**9).count("[Request received]") - calibration
    name = f"old client ({args.old_client})" if args.old_client else "new client"
    print(f"== {name}: {settings.solver.attempts} attempts, {settings.episode_workers} in parallel")
    print(
        f"settings: llm_concurrency={settings.llm.concurrency} llm_timeout={settings.llm.timeout:g}"
        f" llm_retries={settings.llm.retries} episode_seconds={settings.solver.episode_seconds:g}"
        f" max_turns={settings.solver.max_turns} turn_tokens={settings.solver.turn_tokens}"
        f" context_tokens={settings.solver.context_tokens}"
    )
    print(f"requests sent      {counts.requests - calibration}")
    print(f"received by server {received}")
    print(f"timeouts           {counts.timeouts}")
    print(f"retries            {counts.retries}")
    print(f"wall time          {wall:.0f} s")
    print(f"terminations       {dict(Counter(r.termination for r in rollouts))}")
    print(f"turns              {sum(r.n_turns for r in rollouts)}")
    print(f"queue seconds      {sum(r.queue_seconds for r in rollouts):.0f} (client-side, summed)")
    report = getattr(probe.client, "report", None)  # the old client has none
    if report is not None:
        print(f"client report      {report()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old-client", default="", help="a client.py of an earlier version")
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--attempts", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--reply-seconds", type=float, default=3.0)
    parser.add_argument("--turn-tokens", type=int, default=0, help="instead of --reply-seconds")
    parser.add_argument("--context-tokens", type=int, default=8192)
    args = parser.parse_args()
    sandbox = Sandbox()
    task, _ = ProceduralGenerator(sandbox.base.tag).describe("2026-05-01", 0, 7)
    build_result = sandbox.build(task.dockerfile, task.context_files)
    assert build_result.ok, build_result.log[-2000:]
    with tempfile.TemporaryDirectory(prefix="llm_serial_") as tmp:
        run(args, sandbox, task, build_result.tag, Path(tmp))


if __name__ == "__main__":
    main()
