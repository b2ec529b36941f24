"""How long each stats view takes over a large lake (design target: < 1 s per view).

Builds a synthetic lake of at least a million `solver_rollouts` rows
(tests/support/synthetic_lake.py:
every table, every batch, seeded; two solvers, k=16) as real Parquet partitions, rebuilds the
DuckDB catalog, then times `select * from <view>` for every stats view (all rows fetched into a
polars frame, as `endless sql` does), best of --repeat runs, and the `endless stats` summaries
over every batch.

    .venv/bin/python bench/sql_stats.py [--rollouts 1000000] [--batches 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from synthetic_lake import Spec, write_synthetic_lake  # noqa: E402

from endless_assets.report.tables import TABLES, stats_query  # noqa: E402
from endless_assets.store.catalog import query, rebuild_catalog  # noqa: E402
from endless_assets.store.lake import Lake  # noqa: E402
from endless_assets.store.stats_views import STATS_VIEWS  # noqa: E402

# Rollouts per sampled task in the synthetic lake: about 74% of tasks reach the solver stage, times
# k=16 attempts, times two solvers.
ROLLOUTS_PER_TASK = 0.74 * 16 * 2


def best_of(repeat: int, run) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        rows = run()
        times.append(time.perf_counter() - started)
    return min(times), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temporary dir")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="endless-sql-bench-") as tmp:
        lake = Lake(args.data_dir or tmp)
        per_batch = math.ceil(args.rollouts / ROLLOUTS_PER_TASK / args.batches)
        spec = Spec(
            batches=args.batches,
            tasks_per_batch=per_batch,
            k=16,
            solvers=(("chat", "model-a", 0.7), ("chat", "model-b", 0.3)),
        )
        started = time.perf_counter()
        counts = write_synthetic_lake(lake, spec)
        written = time.perf_counter() - started
        rebuild_catalog(lake)
        size = sum(p.stat().st_size for p in lake.root.rglob("*.parquet"))
        print(
            f"synthetic lake: {counts['solver_rollouts']:,} rollout rows, "
            f"{counts['task_descriptions']:,} tasks in {args.batches} batches, "
            f"{size / 2**20:.0f} MiB of Parquet (written in {written:.1f} s)"
        )
        print(f"\n{'stats view':<22} {'rows':>9} {'best of ' + str(args.repeat):>12}")
        worst = 0.0
        for name in STATS_VIEWS:
            seconds, rows = best_of(
                args.repeat, lambda n=name: query(lake, f"select * from {n}").height
            )
            worst = max(worst, seconds)
            print(f"{name:<22} {rows:>9,} {seconds * 1000:>9.0f} ms")
        print(f"\n{'endless stats table':<22} {'rows':>9} {'best of ' + str(args.repeat):>12}")
        for name in TABLES:
            seconds, rows = best_of(args.repeat, lambda n=name: stats_query(lake, n).height)
            worst = max(worst, seconds)
            print(f"{name:<22} {rows:>9,} {seconds * 1000:>9.0f} ms")
        print(f"\nslowest: {worst * 1000:.0f} ms (design target: < 1000 ms per view)")


if __name__ == "__main__":
    main()
