"""The table of episodes trainers ran on served tasks (`endless serve`, serve/record.py)."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import CREATED_AT, TASK_ID, Strict, col

SERVED_TERMINATIONS = ["done", "turn_limit", "time_limit", "infra_error", "abandoned"]
N = {"ge": 0}


class ServedEpisodes(pa.DataFrameModel):
    """One row per served episode, in the partition of its task's batch, beside the dataset it
    came from (join filtered_dataset using task_id, batch)."""

    episode_id: pl.Utf8 = col("the episode's id (the client's episode_id, else ours)", unique=True)
    session_id: pl.Utf8 = col("the environment session (one client connection) that ran it")
    task_id: pl.Utf8 = col(TASK_ID)
    batch: pl.Utf8 = col("the task's batch (partition key)")
    model: pl.Utf8 = col("what the client said its model is at reset ('' when it did not)")
    seed: pl.Int64 = col("the reset's seed, when the client gave one", nullable=True)
    reward: pl.Int64 = col("1 or 0 when graded; null when not (never 0 for it)", nullable=True)
    termination: pl.Utf8 = col(
        "done, turn_limit, time_limit (graded); infra_error (the engine or the harness failed: "
        "no reward); abandoned (the client left, was reaped, or the server stopped first)",
        isin=SERVED_TERMINATIONS,
    )
    infra_error: pl.Utf8 = col("why, for an infra_error ('' otherwise)")
    verdict: pl.Utf8 = col("the grader's verdict summary ('' when not graded)")
    steps: pl.Int64 = col("commands run", **N)
    n_turns: pl.Int64 = col("actions taken: the commands and the final one", **N)
    trajectory: pl.Utf8 = col("JSON list of turns, as solver_rollouts.trajectory")
    reset_seconds: pl.Float64 = col("seconds from reset to the first observation", **N)
    seconds: pl.Float64 = col("seconds from reset to the episode's end", **N)
    server: pl.Utf8 = col("host:pid of the server that ran it")
    started_at: pl.Datetime(time_zone="UTC") = col("when the reset came (UTC)")
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "served_episodes"
