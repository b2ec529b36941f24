"""Multi-service tasks written by hand (compose_tasks.py: Harbor compose files with a Redis service
from Debian's packages and an `image:` service mapped to our base image, a Terminal-Bench task with
a `server` beside `client`, a Harbor task whose service takes the task's files through a bind mount,
an env_file and a build argument) imported as one batch through Dagster (real Docker, the imported
builds given the network for Debian's packages): each comes in with its services, is validated with
them running and is kept; exported again, it is a compose task."""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml
from compose_tasks import IMAGE_MAP, source_tasks

from endless_assets.defs.imports import IMPORT_OP, IMPORTED_ASSETS
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.partitions import imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.soundness import imported_task_soundness
from endless_assets.interop import export_dataset
from endless_assets.store.lake import Lake

BATCH = "compose-1"


@pytest.fixture(scope="module")
def imported(tmp_path_factory, sandbox):
    work = tmp_path_factory.mktemp("compose-import")
    names = source_tasks(work / "tasks")
    data_dir = work / "lake"
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(imported_batches.name, [BATCH])
    config = {"source_dir": str(work / "tasks"), "format": "auto", "base_image_map": IMAGE_MAP}
    result = dg.materialize(
        [*IMPORTED_ASSETS, imported_task_soundness],
        partition_key=BATCH,
        instance=instance,
        resources={
            "pipeline": PipelineSettings(
                data_dir=str(data_dir), workers=2, build_network=True, soundness_repeats=1
            ),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
        run_config={"ops": {IMPORT_OP: {"config": config}}},
        raise_on_error=False,
    )
    assert result.success
    return work, Lake(data_dir), names


def by_source(lake: Lake, table: str) -> dict[str, dict]:
    drafts = {r["task_id"]: r["draft"] for r in lake.read("task_descriptions", BATCH).to_dicts()}
    found = {}
    for row in lake.read(table, BATCH).to_dicts():
        draft = json.loads(drafts.get(row["task_id"]) or "{}")
        found[draft.get("source_name", "?").rsplit("/", 1)[-1]] = row | {"draft": draft}
    return found


def test_every_compose_task_imports_with_its_services(imported):
    _, lake, names = imported
    rows = by_source(lake, "task_descriptions")
    services = {name: [s["name"] for s in rows[name]["draft"]["services"]] for name in names}
    assert services == {
        "harbor_redis": ["cache"],
        "harbor_http": ["files-api"],
        "tb_server": ["server"],
        "harbor_mounts": ["web"],
    }


def test_every_compose_task_is_validated_with_its_services_and_kept(imported):
    _, lake, names = imported
    tests = by_source(lake, "completion_tests")
    for name in names:
        row = tests[name]
        assert row["status"] == "ok", (name, row["reject_reason"])
        assert (row["fails_with_noop"], row["passes_with_reference"]) == (True, True)
    kept = by_source(lake, "filtered_dataset")
    assert {name for name in names if kept[name]["kept"]} == set(names)


def test_kept_compose_tasks_export_back_as_compose_tasks(imported):
    work, lake, _ = imported
    out = work / "harbor"
    export_dataset(lake, "harbor", out, batches=[BATCH])
    found = {}
    for compose in out.glob("*/environment/docker-compose.yaml"):
        services = yaml.safe_load(compose.read_text())["services"]
        found[tuple(sorted(services))] = services
    assert set(found) == {
        ("cache", "main"),
        ("files-api", "main"),
        ("main", "server"),
        ("main", "web"),
    }
    assert found[("cache", "main")]["cache"]["healthcheck"]["test"] == [
        "CMD-SHELL",
        "redis-cli ping",
    ]
