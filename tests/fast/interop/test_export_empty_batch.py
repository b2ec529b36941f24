"""An export of a batch that kept no task says so, instead of listing the batch as both missing
and materialized."""

from __future__ import annotations

import polars as pl
import pytest
from synthetic_lake import _complete

from endless_assets.interop.tasks import ExportError, load_tasks
from endless_assets.store.lake import Lake


def test_an_export_of_a_batch_with_no_kept_task_says_so_and_why(tmp_path):
    lake = Lake(tmp_path)
    rows = pl.DataFrame(
        {
            "task_id": ["et-0000000000000001", "et-0000000000000002"],
            "batch": ["b1", "b1"],
            "kept": [False, False],
            "drop_reason": ["unsolved: 0 of 1 attempts", "unsolved: 0 of 1 attempts"],
        }
    )
    lake.write("filtered_dataset", "b1", _complete("filtered_dataset", rows))
    lake.write("filtered_dataset", "b2", _complete("filtered_dataset", rows.head(0)))
    with pytest.raises(ExportError) as raised:
        load_tasks(lake, ["b1", "b2"])
    message = str(raised.value)
    assert message == (
        "nothing to export: batch b1 has no kept task (2 filtered, none kept: unsolved 2); "
        "batch b2 has no kept task (no task reached the solver filter)"
    )
    assert "no filtered_dataset partition" not in message
    with pytest.raises(ExportError, match="no filtered_dataset partition for batch"):
        load_tasks(lake, ["b3"])
