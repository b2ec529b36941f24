"""A synthetic lake: every table of the contract, filled with plausible, seeded rows, written
as real Parquet partitions through `Lake.write`. For the stats tests (known figures: token cost,
several solvers) and for `bench/sql_stats.py` (a million rollout rows).

Columns are filled by name where the stats read them and by type otherwise, so the lake follows
the current table schemas whatever columns they gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from endless_assets.store.lake import Lake
from endless_assets.store.schemas import polars_schema

CATEGORIES = [
    "log analysis",
    "file and directory management",
    "CSV/JSON data manipulation",
    "awk and sed text processing",
    "backup and archiving",
    "checksum verification",
    "complex permissions management",
    "SQLite database operations via CLI",
    "INI configuration parsing",
    "scheduled tasks and cron jobs",
    "git repository operations",
    "shell scripting automation",
]
COMPLEXITIES = ["easy", "medium", "hard"]
TRAJECTORY = '[{"command": "ls -la /home/user", "output": "total 8", "exit_code": 0}]' * 4


@dataclass(frozen=True)
class Spec:
    batches: int = 2
    tasks_per_batch: int = 40
    k: int = 4
    solvers: tuple[tuple[str, str, float], ...] = (
        ("chat", "model-a", 0.7),
        ("chat", "model-b", 0.3),
    )
    tokens_per_request: tuple[int, int] = (1000, 200)  # in, out
    seed: int = 7


def _uniform(n: int, salt: int) -> pl.Expr:
    """n pseudo-random numbers in [0, 1), reproducible per salt."""
    return (pl.int_range(n, dtype=pl.UInt64).hash(salt) % 1_000_003).cast(pl.Float64) / 1_000_003


def _complete(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Add every schema column the frame lacks (by type) and order and cast as the schema."""
    schema = polars_schema(table)
    now = datetime(2026, 11, 1, tzinfo=UTC)
    n = frame.height
    columns = []
    for name, dtype in schema.items():
        if name in frame.columns:
            columns.append(frame[name].cast(dtype))
        elif dtype == pl.Int64:
            columns.append(pl.Series(name, [0] * n, dtype=dtype))
        elif dtype == pl.Float64:
            columns.append(pl.Series(name, [0.0] * n, dtype=dtype))
        elif dtype == pl.Boolean:
            columns.append(pl.Series(name, [False] * n, dtype=dtype))
        elif isinstance(dtype, pl.Datetime):
            columns.append(pl.Series(name, [now] * n, dtype=dtype))
        else:
            columns.append(pl.Series(name, [""] * n, dtype=pl.String))
    return pl.DataFrame(columns)


def _batch_frames(spec: Spec, b: int) -> dict[str, pl.DataFrame]:
    batch = f"2026-10-{b + 1:02d}" if b < 31 else f"synthetic-{b:04d}"
    n = spec.tasks_per_batch
    salt = spec.seed * 1000 + b
    tin, tout = spec.tokens_per_request
    base = (
        pl.DataFrame({"index": pl.int_range(n, eager=True)})
        .with_columns(
            task_id=pl.format(
                "et-{}", (pl.col("index") + b * 1_000_000).cast(pl.String).str.zfill(16)
            ),
            batch=pl.lit(batch),
            u_desc=_uniform(n, salt + 1),
            u_env=_uniform(n, salt + 2),
            u_test=_uniform(n, salt + 3),
            u_diff=_uniform(n, salt + 4),
        )
        .with_columns(
            category=pl.col("index").map_elements(
                lambda i: CATEGORIES[i % len(CATEGORIES)], return_dtype=pl.String
            ),
            complexity=pl.col("index").map_elements(
                lambda i: COMPLEXITIES[(i // len(CATEGORIES)) % 3], return_dtype=pl.String
            ),
            generator=pl.when(pl.col("index") % 2 == 0)
            .then(pl.lit("llm"))
            .otherwise(pl.lit("procedural")),
        )
        .with_columns(
            generator_model=pl.when(pl.col("generator") == "llm")
            .then(pl.lit("gen-model"))
            .otherwise(pl.lit("")),
            requests=pl.when(pl.col("generator") == "llm").then(1).otherwise(0),
        )
    )
    desc = base.with_columns(
        status=pl.when(pl.col("u_desc") < 0.03)
        .then(pl.lit("rejected"))
        .when(pl.col("u_desc") < 0.05)
        .then(pl.lit("harness_error"))
        .otherwise(pl.lit("ok")),
        scenario=pl.lit("an operator on call"),
        family=pl.lit(""),
        instruction=pl.format("Do task {} carefully in /home/user.", pl.col("index")),
        truth=pl.lit("{}"),
        reference_solution=pl.lit("echo done"),
        tokens_in=pl.col("requests") * tin,
        tokens_out=pl.col("requests") * tout,
    ).with_columns(
        reject_reason=pl.when(pl.col("status") == "rejected")
        .then(pl.lit("duplicate: near-duplicate of an earlier task"))
        .when(pl.col("status") == "harness_error")
        .then(pl.lit("harness: endpoint down"))
        .otherwise(pl.lit(""))
    )
    described = desc.filter(pl.col("status") == "ok")
    env = described.with_columns(
        status=pl.when(pl.col("u_env") < 0.10).then(pl.lit("rejected")).otherwise(pl.lit("ok")),
        reject_reason=pl.when(pl.col("u_env") < 0.06)
        .then(pl.lit("build_failed: E: Unable to locate package"))
        .when(pl.col("u_env") < 0.10)
        .then(pl.lit("initial_test_failed: failed: exit 1"))
        .otherwise(pl.lit("")),
        dockerfile=pl.lit("FROM endless-base:synthetic\n"),
        context_files=pl.lit("{}"),
        initial_test=pl.lit("def test_home():\n    assert True\n"),
    )
    built = env.filter(pl.col("status") == "ok")
    tests = built.with_columns(
        status=pl.when(pl.col("u_test") < 0.12).then(pl.lit("rejected")).otherwise(pl.lit("ok")),
        reject_reason=pl.when(pl.col("u_test") < 0.08)
        .then(pl.lit("passes_on_initial: passes before any work"))
        .when(pl.col("u_test") < 0.12)
        .then(pl.lit("reference_fails: failed: exit 1"))
        .otherwise(pl.lit("")),
        completion_test=pl.lit("def test_done():\n    assert open('/home/user/out').read()\n"),
    )
    valid = tests.filter(pl.col("status") == "ok").select(
        "task_id",
        "batch",
        "u_diff",
        "category",
        "complexity",
        "generator",
        "generator_model",
        "instruction",
        "dockerfile",
        "context_files",
        "initial_test",
        "completion_test",
    )
    rollouts = []
    for s, (policy, model, strength) in enumerate(spec.solvers):
        grid = valid.join(
            pl.DataFrame({"rollout_idx": pl.int_range(spec.k, eager=True)}), how="cross"
        )
        m = grid.height
        grid = grid.with_columns(
            policy=pl.lit(policy),
            model=pl.lit(model),
            u_r=_uniform(m, salt * 7 + s),
            u_t=_uniform(m, salt * 11 + s),
        ).with_columns(
            harness=pl.col("u_t") < 0.01,
            solved=pl.col("u_r") < (strength * (1.2 - pl.col("u_diff"))).clip(0, 1),
        )
        grid = (
            grid.with_columns(
                reward=pl.when(pl.col("harness"))
                .then(None)
                .otherwise(pl.col("solved").cast(pl.Int64)),
                termination=pl.when(pl.col("harness"))
                .then(pl.lit("harness_error"))
                .when(pl.col("solved"))
                .then(pl.lit("done"))
                .when(pl.col("u_t") < 0.45)
                .then(pl.lit("turn_limit"))
                .when(pl.col("u_t") < 0.50)
                .then(pl.lit("time_limit"))
                .when(pl.col("u_t") < 0.53)
                .then(pl.lit("context_limit"))
                .otherwise(pl.lit("done")),
                n_turns=(pl.col("u_t") * 16).floor().cast(pl.Int64) + 1,
                loop_detected=~pl.col("solved") & (pl.col("u_t") < 0.30),
                command_diversity=pl.when(pl.col("solved"))
                .then(0.5)
                .otherwise(pl.col("u_t") * 0.4),
                trajectory=pl.concat_str(
                    pl.lit('[{"turn": '),
                    pl.col("rollout_idx").cast(pl.String),
                    pl.lit(', "command": "grep -c ERROR /home/user/'),
                    pl.col("task_id"),
                    pl.lit('.log", "u": '),
                    pl.col("u_r").cast(pl.String),
                    pl.lit("}]"),
                    pl.lit(TRAJECTORY),
                ),
                messages=pl.lit("[]"),
            )
            .with_columns(
                n_turns=pl.when(pl.col("termination") == "turn_limit")
                .then(16)
                .otherwise(pl.col("n_turns")),
                tokens_in=pl.col("n_turns") * tin,
                tokens_out=pl.col("n_turns") * tout,
                turn_exhausted=pl.col("termination") == "turn_limit",
                commands=pl.col("n_turns"),
            )
            .with_columns(
                failure_mode=pl.when(pl.col("harness"))
                .then(pl.lit("harness_error"))
                .when(pl.col("solved"))
                .then(pl.lit("solved"))
                .when(pl.col("loop_detected"))
                .then(pl.lit("loop"))
                .when(pl.col("termination") == "turn_limit")
                .then(pl.lit("turn_exhaustion"))
                .when(pl.col("termination").is_in(["time_limit", "context_limit"]))
                .then(pl.col("termination"))
                .otherwise(pl.lit("wrong_done"))
            )
        )
        rollouts.append(grid)
    rollout_frame = pl.concat(rollouts)
    first = spec.solvers[0]
    scored = (
        rollout_frame.filter((pl.col("policy") == first[0]) & (pl.col("model") == first[1]))
        .group_by("task_id")
        .agg(
            scored_attempts=pl.col("reward").count(),
            successes=(pl.col("reward") == 1).sum(),
        )
    )
    filtered = (
        valid.join(scored, on="task_id", how="left")
        .with_columns(
            scored_attempts=pl.col("scored_attempts").fill_null(0),
            successes=pl.col("successes").fill_null(0),
            solver_model=pl.lit(f"{first[0]}/{first[1]}"),
            solver_policy=pl.lit(first[0]),
        )
        .with_columns(
            pass_rate=pl.when(pl.col("scored_attempts") > 0)
            .then(pl.col("successes") / pl.col("scored_attempts"))
            .otherwise(0.0),
            pass_at_n=(pl.col("successes") > 0).cast(pl.Float64),
            kept=pl.col("successes") > 0,
            attempts=pl.lit(spec.k),
            reference_solution=pl.lit("echo done"),
            truth=pl.lit("{}"),
            scenario=pl.lit("an operator on call"),
        )
        .with_columns(
            drop_reason=pl.when(pl.col("kept"))
            .then(pl.lit(""))
            .otherwise(pl.lit("unsolved: 0 of k"))
        )
    )
    return {
        "task_descriptions": desc,
        "task_environments": env,
        "completion_tests": tests,
        "solver_rollouts": rollout_frame,
        "filtered_dataset": filtered,
    }


def write_synthetic_lake(lake: Lake, spec: Spec = Spec()) -> dict[str, int]:
    """Write every table for every batch; returns rows written per table."""
    counts: dict[str, int] = {}
    for b in range(spec.batches):
        frames = _batch_frames(spec, b)
        batch = frames["task_descriptions"]["batch"][0]
        for table, frame in frames.items():
            full = _complete(table, frame)
            lake.write(table, batch, full)
            counts[table] = counts.get(table, 0) + full.height
    return counts
