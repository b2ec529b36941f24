"""The schema check is a real check result: a frame that breaks its table's pandera model fails
the step, writes nothing, and is recorded as a failed `matches_schema` check with the errors;
a valid frame is written and recorded as passed (a real Dagster run, a real lake)."""

from __future__ import annotations

import dagster as dg
import polars as pl
from synthetic_lake import Spec, _batch_frames, _complete

from endless_assets.defs.common import schema_check_spec, validate
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.store.lake import Lake

TABLE = "task_descriptions"


def run(frame: pl.DataFrame, data_dir) -> tuple[dg.ExecuteInProcessResult, dg.DagsterInstance]:
    @dg.asset(
        name=TABLE,
        partitions_def=dg.StaticPartitionsDefinition(["b1"]),
        io_manager_key="lake_io_manager",
        check_specs=[schema_check_spec(TABLE)],
    )
    def table(context):
        check = validate(TABLE, frame, context=context)
        return dg.MaterializeResult(value=frame, check_results=[check])

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [table],
        partition_key="b1",
        instance=instance,
        resources={"lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir))},
        raise_on_error=False,
    )
    return result, instance


def check_status(instance: dg.DagsterInstance) -> tuple[str, dict]:
    key = dg.AssetCheckKey(dg.AssetKey(TABLE), "matches_schema")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    evaluation = record.event.dagster_event.event_specific_data
    return record.status.value, evaluation.metadata


def valid_frame() -> pl.DataFrame:
    return _complete(TABLE, _batch_frames(Spec(tasks_per_batch=3), 0)[TABLE])


def test_a_frame_that_breaks_the_schema_fails_the_check_and_writes_nothing(tmp_path):
    bad = valid_frame().with_columns(status=pl.lit("maybe"))
    result, instance = run(bad, tmp_path)
    assert not result.success
    status, metadata = check_status(instance)
    assert status == "FAILED"
    assert "status" in metadata["errors"].value and "maybe" in metadata["errors"].value
    assert not Lake(tmp_path).has_data(TABLE)


def test_a_valid_frame_is_written_and_passes_the_check(tmp_path):
    result, instance = run(valid_frame(), tmp_path)
    assert result.success
    assert check_status(instance)[0] == "SUCCEEDED"
    assert Lake(tmp_path).read(TABLE, "b1").height == 3
