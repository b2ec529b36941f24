"""What the Dagster catalog shows before anything is materialized: every table asset's columns
with their descriptions and readable types, owners, tags, code versions and a link to the
source; the internal sharding jobs say what they are; the resource shows the values a run would
use."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dagster as dg
import pytest

from endless_assets.definitions import defs
from endless_assets.defs.partitions import imported_batches
from endless_assets.stages.describe import generator_version
from endless_assets.stages.rollouts import solver_version
from endless_assets.store.schemas import TABLES
from endless_assets.store.schemas.readable import readable_type

GRAPH = defs.resolve_asset_graph()
TABLE_ASSETS = sorted(  # (sorted: every xdist worker must collect the same tests, in order)
    (
        key
        for key in GRAPH.get_all_asset_keys()
        if key.path[-1] in TABLES and GRAPH.get(key).is_materializable
    ),
    key=lambda key: key.to_user_string(),
)
READABLE = {"string", "int64", "float64", "bool", "timestamp[UTC]"}


def spec(key: dg.AssetKey) -> dg.AssetSpec:
    return next(s for s in defs.resolve_all_asset_specs() if s.key == key)


def test_there_are_table_assets_of_both_families():
    assert len(TABLE_ASSETS) == 20  # nine tables, each generated and imported; the draw's two
    assert dg.AssetKey(["imported", "filtered_dataset"]) in TABLE_ASSETS


@pytest.mark.parametrize("key", TABLE_ASSETS, ids=lambda k: k.to_user_string())
def test_every_table_asset_declares_its_described_columns_with_readable_types(key):
    schema = spec(key).metadata["dagster/column_schema"]
    model = TABLES[key.path[-1]].to_schema().columns
    assert [c.name for c in schema.columns] == list(model)
    assert all(c.description for c in schema.columns)
    assert not [c.name for c in schema.columns if "<" in c.description]  # (the UI reads HTML)
    assert {c.type for c in schema.columns} <= READABLE
    assert not [c.type for c in schema.columns if "Datetime" in c.type or "Utf8" in c.type]


def test_column_constraints_come_from_the_table_contract():
    schema = spec(dg.AssetKey("solver_rollouts")).metadata["dagster/column_schema"]
    reward = next(c for c in schema.columns if c.name == "reward")
    assert reward.constraints.nullable and reward.constraints.other == ["one of 0, 1"]
    task_id = spec(dg.AssetKey("task_descriptions")).metadata["dagster/column_schema"].columns[0]
    assert task_id.constraints.unique and not task_id.constraints.nullable


def test_readable_types_cover_nested_polars_types():
    import polars as pl

    assert readable_type(pl.List(pl.String)) == "list<string>"
    assert readable_type(pl.Struct({"a": pl.Int64, "b": pl.Boolean})) == "struct<a: int64, b: bool>"
    assert readable_type(pl.Datetime(time_zone="UTC")) == "timestamp[UTC]"


@pytest.mark.parametrize("key", TABLE_ASSETS, ids=lambda k: k.to_user_string())
def test_every_table_asset_has_owners_tags_and_a_link_to_its_source(key):
    asset = spec(key)
    assert asset.owners == ["team:endless"]
    assert asset.tags["endless/table"] == key.path[-1] and asset.tags["endless/stage"]
    [reference] = asset.metadata["dagster/code_references"].code_references
    assert reference.file_path.endswith(".py") and os.path.exists(reference.file_path)


def test_code_versions_say_what_made_the_rows():
    assert spec(dg.AssetKey("task_descriptions")).code_version == generator_version()
    assert generator_version().startswith("procedural-") and "+llm-" in generator_version()
    assert spec(dg.AssetKey("solver_rollouts")).code_version == solver_version()
    assert spec(dg.AssetKey("base_image")).code_version


def test_the_sharding_jobs_say_they_are_internal_and_the_daily_batch_job_is_not():
    for name in ("batch_stage_one", "batch_shard", "batch_finish"):
        job = defs.resolve_job_def(name)
        assert job.description.startswith("Internal step of a sharded batch")
        assert "launch daily_batch" in job.description
        assert job.tags == {"endless/role": "sharded-batch-step"}
    assert not defs.resolve_job_def("daily_batch").tags


def test_the_pipeline_resource_holds_the_values_a_run_would_use():
    script = (
        "import json\n"
        "from endless_assets.definitions import defs\n"
        "pipeline = defs.resources['pipeline']\n"
        "print(json.dumps({k: getattr(pipeline, k) for k in ('tasks', 'workers', 'solver', "
        "'data_dir')}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    env |= {"ENDLESS_TASKS": "7", "ENDLESS_WORKERS": "0"}  # workers: a bad value
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    # The environment's value, the default, and unset where the variable holds a bad value (a
    # run reports it then, as before).
    assert json.loads(out) == {"tasks": 7, "workers": None, "solver": "oracle", "data_dir": "data"}


def test_imported_batches_are_named_partitions():
    assert isinstance(imported_batches, dg.DynamicPartitionsDefinition)
