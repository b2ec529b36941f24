"""What the engine's lock (sandbox/engine/lock.py) costs: on the normal path (the base image is
there: no lock is taken, one image lookup as before) and when it is taken (the first build of
the base image on an engine, a copy onto an engine): a container created, then removed.

Prints the median and 90th percentile wall time of each, on the engine of DOCKER_HOST (or the
local socket), which must hold the base image (`endless setup`):

    .venv/bin/python bench/engine_lock.py [--runs 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from endless_assets.sandbox.engine import lock
from endless_assets.sandbox.engine.client import docker_client
from endless_assets.sandbox.image.base_image import ensure_base_image, image_id_of


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(runs: int, call: Callable[[], object]) -> list[float]:
    for _ in range(5):
        call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    client = docker_client()
    base = ensure_base_image(client)
    name = f"bench-{os.getpid()}"
    rows = {
        "base present: ensure_base_image": timed(args.runs, lambda: ensure_base_image(client)),
        "base present: one lookup (before)": timed(
            args.runs, lambda: image_id_of(client, base.tag)
        ),
        "lock taken and released": timed(
            args.runs, lambda: lock.release(client, lock.acquire(client, name))
        ),
    }
    print(f"{'path':<36} {'runs':>6} {'median ms':>10} {'p90 ms':>8}")
    for label, times in rows.items():
        print(
            f"{label:<36} {len(times):>6} {statistics.median(times) * 1000:>10.2f} "
            f"{percentile(times, 0.9) * 1000:>8.2f}"
        )


if __name__ == "__main__":
    main()
