"""The tables of decontamination: a task checked against the benchmarks of the reference sets,
in the pipeline (right after the describe stage) and after the fact (kept tasks, every field)."""

from __future__ import annotations

import pandera.polars as pa
import polars as pl

from endless_assets.store.schemas.base import (
    BATCH,
    CREATED_AT,
    SECONDS,
    STATUS,
    STATUSES,
    TASK_ID,
    Strict,
    col,
)

HITS = (
    "JSON list of hits, strongest first: reference_set, reference_task, field, measure "
    "(ngram13, ngram8, fuzzy), value (the share of the field's n-grams found there, or the "
    "ratio); the `contamination` view has one row per hit"
)


class TaskDecontamination(pa.DataFrameModel):
    """One row per task checked: each described task in the pipeline (a contaminated one never
    reaches the build stage), or each kept task of a batch checked again later."""

    task_id: pl.Utf8 = col(TASK_ID, unique=True)
    batch: pl.Utf8 = col(BATCH)
    status: pl.Utf8 = col(STATUS + "; rejected: contaminated", isin=STATUSES)
    reject_reason: pl.Utf8 = col(
        "contaminated: SET/TASK (FIELD, MEASURE VALUE), naming the strongest hit"
    )
    reference_sets: pl.Utf8 = col(
        "the reference sets checked against, as name:tasks, comma-separated ('': none was set)"
    )
    thresholds: pl.Utf8 = col("the n-gram sizes and fuzzy ratio the check used")
    fields: pl.Utf8 = col("the task's fields that were compared, comma-separated")
    hits: pl.Utf8 = col(HITS)
    seconds: pl.Float64 = col(SECONDS, ge=0)
    created_at: pl.Datetime(time_zone="UTC") = col(CREATED_AT)

    class Config(Strict):
        name = "task_decontamination"


class ContaminationRecheck(TaskDecontamination):
    """The kept tasks of a batch checked again, every field, against the references set when
    this partition was materialized (no task is rebuilt or run again)."""

    class Config(Strict):
        name = "contamination_recheck"
