"""What every table model shares: the status vocabularies, strictness, and `col`, a field with its
description (the one the catalog, the UI's column list and `endless sql` users read)."""

from __future__ import annotations

from typing import Any

import pandera.polars as pa
from pandera.api.polars.model_config import BaseConfig

from endless_assets.store.failure_modes import FAILURE_MODES

STATUSES = ["ok", "rejected", "harness_error"]
TERMINATIONS = ["done", "turn_limit", "time_limit", "context_limit", "harness_error"]
DRIFT_STATUSES = ["valid", "drifted", "harness_error"]
FAILURES = list(FAILURE_MODES)


class Strict(BaseConfig):
    strict = True  # no undeclared columns
    coerce = False


def col(description: str, **checks: Any) -> Any:
    """A column: what it holds, in a phrase, and its checks (pandera Field arguments)."""
    return pa.Field(description=description, **checks)


# Columns several tables share, said once.
TASK_ID = "the task's id: et- and a hash of its batch, index, instruction and truth"
BATCH = "the batch (partition key): a day YYYY-MM-DD, or an imported batch's name"
STATUS = "ok, rejected (with reject_reason) or harness_error (our failure, not the task's)"
SECONDS = "wall-clock seconds this task spent in the stage"
REQUESTS = "model requests made for this task in the stage (0 for procedural work)"
TOKENS_IN = "prompt tokens sent to the model"
TOKENS_OUT = "completion tokens received from the model"
CREATED_AT = "when the row was written (UTC)"
PARENT_TASK_ID = "the task this one is a variant of (a level harder or easier), '' otherwise"
ATTEMPT_LOG = "JSON list: each round's stage and error"
SERVICES = (
    "JSON list: the services beside the agent's container (name, dockerfile, command, "
    "environment, ready, limits); [] for a one-container task"
)
