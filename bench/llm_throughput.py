"""LLM generator throughput: requests in flight and tasks per minute against a slow model.

A scripted OpenAI-compatible server on 127.0.0.1 (`testing/scripted_server.py`) answers every
request after a fixed latency, like a model that takes that long per reply; the generator
reaches it through the real `openai` client over HTTP, inside real Dagster runs (in-process),
with the reply cache off so every request is sent.

1. The describe stage alone over `--tasks` tasks: shows how many requests the step keeps in flight
   (the cap is `--concurrency`, ENDLESS_LLM_CONCURRENCY) and the tasks described per minute.
2. The describe, build and validation stages over `--full-tasks` tasks, with real Docker builds and
   containers: the LLM waits overlap while Docker work stays bounded by `--workers`.

Each phase uses a fresh seed salt, so its tasks (and their images) are new.

    .venv/bin/python bench/llm_throughput.py [--tasks 256] [--latency 2] [--concurrency 32]
                                             [--full-tasks 24] [--workers 6]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import endless_assets.definitions as definitions  # noqa: E402
from endless_assets.defs.io_manager import ParquetLakeIOManager  # noqa: E402
from endless_assets.defs.resources import PipelineSettings  # noqa: E402
from endless_assets.sandbox.sandbox import Sandbox  # noqa: E402
from endless_assets.store.catalog import query  # noqa: E402
from endless_assets.store.lake import Lake  # noqa: E402
from endless_assets.testing.scripted_model import ScriptedTaskModel  # noqa: E402
from endless_assets.testing.scripted_server import ScriptedServer  # noqa: E402


class InFlightSampler:
    """Samples the server's requests in flight every 20 ms while a phase runs."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.samples.append(self.server.in_flight)

    def __enter__(self) -> InFlightSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def busy_mean(self) -> float:
        busy = [s for s in self.samples if s > 0]
        return statistics.fmean(busy) if busy else 0.0


def run_phase(
    label: str, assets: list[str], tasks: int, args: argparse.Namespace, base_image: str
) -> None:
    data_dir = tempfile.mkdtemp(prefix="endless-llm-bench-")
    model = ScriptedTaskModel(base_image, latency=args.latency)
    with ScriptedServer(model) as server, InFlightSampler(server) as sampler:
        started = time.monotonic()
        result = dg.materialize(
            [getattr(definitions, name) for name in assets],
            partition_key=args.date,
            instance=dg.DagsterInstance.ephemeral(),
            resources={
                "pipeline": PipelineSettings(
                    data_dir=data_dir,
                    tasks=tasks,
                    seed=random.randrange(1 << 30),  # fresh tasks: no image is reused
                    workers=args.workers,
                    generator="llm",
                    generator_model="scripted",
                    generator_base_url=server.base_url,
                    llm_concurrency=args.concurrency,
                    llm_cache=False,
                ),
                "lake_io_manager": ParquetLakeIOManager(data_dir=data_dir),
            },
            raise_on_error=False,
        )
        wall = time.monotonic() - started
    if not result.success:
        sys.exit(f"{label}: the run failed")
    lake = Lake(data_dir)
    last = assets[-1]
    survived = int(query(lake, f"select count(*) n from {last} where status = 'ok'")["n"][0])
    print(f"\n{label}: {tasks} tasks, reply latency {args.latency:g} s")
    print(f"  requests sent            {len(server.requests)}")
    print(
        f"  requests in flight       max {server.max_in_flight}, mean while busy "
        f"{sampler.busy_mean():.1f} (cap {args.concurrency})"
    )
    print(f"  wall                     {wall:.1f} s")
    print(f"  tasks per minute         {survived / wall * 60:.1f} ({survived} through {last})")
    for asset in assets[1:]:
        meta = result.asset_materializations_for_node(asset)[0].metadata
        print(
            f"  {asset:<24} {meta['wall_seconds'].value:>6.1f} s, "
            f"{meta['llm_requests_sent'].value} requests"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=256, help="tasks in the describe stage phase")
    parser.add_argument(
        "--full-tasks", type=int, default=24, help="tasks in the describe-to-validation phase"
    )
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per model reply")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=6, help="Docker work in parallel")
    parser.add_argument("--date", default="2026-07-01")
    args = parser.parse_args()

    base_image = Sandbox().base.tag
    ideal = args.concurrency / args.latency * 60
    print(
        f"one request per task in the describe stage: at most {ideal:.0f} tasks/min at this "
        "latency and cap"
    )
    run_phase(
        "the describe stage", ["base_image", "task_descriptions"], args.tasks, args, base_image
    )
    if args.full_tasks:
        run_phase(
            "the describe, build and validation stages",
            [
                "base_image",
                "task_descriptions",
                "task_decontamination",
                "task_environments",
                "completion_tests",
            ],
            args.full_tasks,
            args,
            base_image,
        )


if __name__ == "__main__":
    main()
