"""Drift re-validation through Dagster: a kept task whose Dockerfile downloads its input at build
time is marked `drifted` once the download changes, because its image is really rebuilt (the
content-addressed image, and Docker's layer cache, would still hold the old input); a task that
did not change stays valid. The asset is not in the daily job; its schedule starts stopped and
asks for one run per batch with a filtered dataset.

The download is a small HTTP server on 127.0.0.1 in this process, reached by the build's RUN
step through the build network (LLM-written Dockerfiles build with one), which allows it as a
mirror on this host (`build_network_allow`); the tasks are written by the scripted model server,
real Docker builds and grades them.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest
from batches import materialize_batch

import endless_assets.definitions as definitions
from endless_assets.defs.drift import imported_drift_revalidation
from endless_assets.defs.imports import IMPORT_OP, IMPORTED_ASSETS
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.partitions import imported_batches
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.revisits import (
    drift_revalidation_schedule,
    imported_drift_revalidation_schedule,
)
from endless_assets.defs.soundness import imported_task_soundness
from endless_assets.models import task_seed
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.scripted_model import ScriptedTask, ScriptedTaskModel
from endless_assets.testing.scripted_server import ScriptedServer

BATCH = "2026-05-11"
PIPELINE = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
    "filtered_dataset",
]


class Upstream:
    """A file on an HTTP server that can change under the tasks that download it."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.downloads = 0
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = upstream.content.encode()
                upstream.downloads += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def authority(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{host}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.authority}/input.txt"

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def materialize(data_dir, server, selection, upstream):
    return materialize_batch(
        data_dir,
        [*PIPELINE, "drift_revalidation"],
        BATCH,
        selection=selection,
        tasks=2,
        workers=2,
        generator="llm",
        generator_model="scripted",
        generator_base_url=server.base_url,
        soundness="controls",
        llm_retries=1,
        llm_backoff=0.01,
        build_network_allow=upstream.authority,
    )


@pytest.fixture(scope="module")
def drift(tmp_path_factory, sandbox):
    data_dir = tmp_path_factory.mktemp("drift-lake")
    seed = task_seed(BATCH, 0) % 2**31
    lines = ScriptedTask.from_seed(seed).lines
    with Upstream("\n".join(lines) + "\n") as upstream:
        model = ScriptedTaskModel(sandbox.base.tag, {seed: {f"fetch_input:{upstream.url}"}})
        with ScriptedServer(model) as server:
            kept = materialize(data_dir, server, PIPELINE, upstream)
            downloads = upstream.downloads
            upstream.content = "\n".join(f"{line}x" for line in lines) + "\n"  # upstream moved on
            checked = materialize(data_dir, server, ["drift_revalidation"], upstream)
    lake = Lake(data_dir)
    again = upstream.downloads - downloads
    return {"kept": kept, "checked": checked, "lake": lake, "downloads": downloads, "again": again}


def test_a_kept_task_whose_download_changed_is_marked_drifted(drift, sandbox):
    lake = drift["lake"]
    assert drift["kept"].success and drift["checked"].success
    ids = lake.read("task_descriptions", BATCH).sort("index")["task_id"].to_list()
    kept = {r["task_id"]: r for r in lake.read("filtered_dataset", BATCH).to_dicts()}
    assert [kept[task_id]["kept"] for task_id in ids] == [True, True]
    rows = {r["task_id"]: r for r in lake.read("drift_revalidation", BATCH).to_dicts()}
    moved, steady = (rows[task_id] for task_id in ids)
    assert moved["status"] == "drifted"
    assert moved["reason"] == "reference_fails: the reference passed 0 of 3 runs"
    assert moved["reference_required"] and moved["rebuilt_image_id"]
    assert (steady["status"], steady["reason"], steady["reference_passes"]) == ("valid", "", 3)
    assert drift["downloads"] == 1 and drift["again"] == 1  # the RUN step really ran again
    # Rebuilt by its content address, the stored image would have been reused as it was.
    first = kept[ids[0]]
    cached = sandbox.build(first["dockerfile"], json.loads(first["context_files"]))
    assert cached.cached and cached.tag == first["image_tag"]


def test_drift_is_queryable_by_batch(drift):
    view = query(
        drift["lake"],
        f"select kept, checked, still_valid, drifted from drift where batch = '{BATCH}'",
    )
    assert view.rows() == [(2, 2, 1, 1)]
    meta = drift["checked"].asset_materializations_for_node("drift_revalidation")[0].metadata
    assert meta["drifted"].value == 1 and "reference_fails" in meta["drifted_tasks"].value


def test_drift_revalidation_has_its_own_job_and_a_schedule_that_starts_stopped(drift):
    daily = definitions.defs.resolve_job_def("daily_batch")
    job = definitions.defs.resolve_job_def("revalidate_kept_tasks")
    assert job.asset_layer.executable_asset_keys == {dg.AssetKey("drift_revalidation")}
    assert dg.AssetKey("drift_revalidation") not in daily.asset_layer.executable_asset_keys
    assert drift_revalidation_schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    with dg.build_schedule_context(
        resources={"pipeline": PipelineSettings(data_dir=str(drift["lake"].data_dir))},
        scheduled_execution_time=dt.datetime(2026, 6, 7, 4, tzinfo=dt.UTC),
    ) as context:
        requests = drift_revalidation_schedule(context)
    assert [r.partition_key for r in requests] == [BATCH]
    assert requests[0].run_key == f"drift-{BATCH}-2026-06-07"


IMPORTED_BATCH = "drift-imported"


def test_an_imported_batchs_kept_tasks_are_revalidated_by_their_own_job(tmp_path, sandbox):
    task = tmp_path / "tasks" / "write-ok"
    files = {
        "instruction.md": "Write ok to /home/user/out.txt\n",
        "environment/Dockerfile": "FROM ubuntu:22.04\nRUN echo seed > /home/user/seed.txt\n",
        "tests/test_outputs.py": "def test_ok():\n"
        "    assert open('/home/user/out.txt').read() == 'ok\\n'\n",
        "solution/solve.sh": "echo ok > /home/user/out.txt\n",
    }
    for rel, text in files.items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(text)
    # A persistent instance (the schedule reads its dynamic partitions) that changes nothing
    # process-wide: instance_for_test would point DAGSTER_HOME at a directory it then deletes,
    # under the definitions load context Dagster keeps for the process.
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster"))
    instance.add_dynamic_partitions(imported_batches.name, [IMPORTED_BATCH])
    revalidate_imported(tmp_path, instance)


def revalidate_imported(tmp_path, instance: dg.DagsterInstance) -> None:
    data_dir = tmp_path / "lake"
    keys = [*IMPORTED_ASSETS, imported_task_soundness, imported_drift_revalidation]
    resources = {
        "pipeline": PipelineSettings(
            data_dir=str(data_dir), workers=2, soundness="off", soundness_repeats=1
        ),
        "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
    }
    config = {
        "source_dir": str(tmp_path / "tasks"),
        "format": "auto",
        "base_image_map": {"ubuntu:22.04": "endless-base"},
    }
    imported = dg.materialize(
        keys,
        selection=[*(a.key for a in IMPORTED_ASSETS), imported_task_soundness.key],
        partition_key=IMPORTED_BATCH,
        instance=instance,
        resources=resources,
        run_config={"ops": {IMPORT_OP: {"config": config}}},
    )
    assert imported.success
    checked = dg.materialize(
        keys,
        selection=[imported_drift_revalidation.key],
        partition_key=IMPORTED_BATCH,
        instance=instance,
        resources=resources,
    )
    assert checked.success
    view = query(
        Lake(data_dir),
        f"select kept, checked, still_valid from drift where batch = '{IMPORTED_BATCH}'",
    )
    assert view.rows() == [(1, 1, 1)]

    job = definitions.defs.resolve_job_def("revalidate_imported_tasks")
    assert job.asset_layer.executable_asset_keys == {imported_drift_revalidation.key}
    schedule = imported_drift_revalidation_schedule
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    # As a context manager: the context opens the instance, which holds Dagster's
    # process-wide definitions state until it is closed.
    with dg.build_schedule_context(
        instance=instance,
        resources={"pipeline": PipelineSettings(data_dir=str(data_dir))},
        scheduled_execution_time=dt.datetime(2026, 6, 7, 4, 30, tzinfo=dt.UTC),
    ) as context:
        assert [r.partition_key for r in schedule(context)] == [IMPORTED_BATCH]
