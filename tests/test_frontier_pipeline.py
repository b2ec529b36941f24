"""Consecutive daily batches drawn by the frontier sampler, through real Dagster runs, real Docker
and a chat solver over real HTTP whose skill per family and level the platform never sees: the
learnable share of kept tasks rises from the uniform draw's to at least a half while every cell
is still drawn; a batch drawn again reproduces its draw; the oracle degrades it, said once."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import Counter

import dagster as dg
import polars as pl
import pytest

import endless_assets.definitions as definitions
import endless_assets.generation.procedural as procedural
from endless_assets.agent.policies import solution_command
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.resources import PipelineSettings
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.sampling.measures import learnable_share
from endless_assets.store.lake import Lake
from endless_assets.testing.scripted_server import Reply, ScriptedServer

DAYS = ["2026-07-01", "2026-07-02", "2026-07-03", "2026-07-04", "2026-07-05"]
TASKS = 8
K = 4
FLOOR = 0.2  # the default exploration floor: ceil(0.2 x 8) = 2 draws a batch for the least drawn
# The solver's hidden frontier per family: below it every attempt passes, at it and a level
# above half of them, higher none. A uniform draw's kept tasks are then about 40% learnable.
FRONTIER = {"json_filter": 3, "text_replace": 4, "csv_aggregate": 4}
FAMILIES = [f for f in ALL_FAMILIES if f.name in FRONTIER]
ASSETS = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
    "filtered_dataset",
]
DONE = "<action>done</action>"


def skill(family: str, level: int) -> float:
    edge = FRONTIER[family]
    return 1.0 if level < edge else 0.5 if level <= edge + 1 else 0.0


class HiddenSkill:
    """A model that knows every task's reference solution and uses it on a share of its attempts
    set by the task's family and level; otherwise it says it is done at once. Attempt n of a
    task succeeds when a hash of (task, n) falls below the skill: the same outcomes every run."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.starts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _task(self, prompt: str) -> dict:
        rows = self.lake.read_all("task_descriptions").filter(pl.col("status") == "ok")
        return next(r for r in rows.to_dicts() if r["instruction"] and r["instruction"] in prompt)

    def __call__(self, request: dict) -> Reply:
        messages = request["messages"]
        if len(messages) > 2:
            return Reply(DONE)
        with self._lock:
            task = self._task(messages[1]["content"])
            attempt = self.starts[task["task_id"]]
            self.starts[task["task_id"]] += 1
        level = json.loads(task["truth"])["level"]
        digest = hashlib.sha256(f"{task['task_id']}:{attempt}".encode()).digest()
        if int.from_bytes(digest[:4], "big") / 2**32 < skill(task["family"], level):
            return Reply(f"<command>{solution_command(task['reference_solution'])}</command>")
        return Reply("I give up.\n" + DONE)


def materialize(
    data_dir, day: str, instance, selection=None, **config
) -> dg.ExecuteInProcessResult:
    settings = {
        "data_dir": str(data_dir),
        "tasks": TASKS,
        "workers": 2,
        "sampler": "frontier",
        "soundness": "off",
        **config,
    }
    return dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        selection=selection,
        partition_key=day,
        instance=instance,
        resources={
            "pipeline": PipelineSettings(**settings),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(data_dir)),
        },
    )


def chat(server: ScriptedServer) -> dict:
    return {
        "solver": "chat",
        "solver_model": "hidden-skill",
        "solver_base_url": server.base_url,
        "llm_retries": 0,
        "k": K,
        "rollout_workers": 4,
        "max_turns": 3,
    }


@pytest.fixture(scope="module")
def families():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(procedural, "ALL_FAMILIES", FAMILIES)
        yield


@pytest.fixture(scope="module")
def frontier_lake(tmp_path_factory, sandbox, families) -> Lake:
    data_dir = tmp_path_factory.mktemp("frontier")
    lake = Lake(data_dir)
    with ScriptedServer(HiddenSkill(lake)) as server, dg.DagsterInstance.ephemeral() as instance:
        for day in DAYS:
            assert materialize(data_dir, day, instance, **chat(server)).success
    return lake


def test_the_learnable_share_rises_to_half_while_every_cell_is_still_drawn(frontier_lake):
    lake = frontier_lake
    shares = learnable_share(lake.read_all("filtered_dataset"))
    print("learnable share per batch:", shares.select("batch", "kept", "learnable_share").rows())
    draws = lake.read_all("task_draws")
    modes = draws.group_by("batch").agg(pl.col("mode").first()).sort("batch")["mode"].to_list()
    assert modes == ["cold_start"] + ["targeting"] * (len(DAYS) - 1)
    first, later = shares.row(0, named=True), shares.filter(pl.col("batch") >= DAYS[-2])
    pooled = later["learnable"].sum() / later["kept"].sum()
    assert pooled >= 0.5 and pooled > first["learnable_share"]
    cells = [f"family:{f}:{level}" for f in FRONTIER for level in range(1, 7)]
    floor_draws = math.ceil(FLOOR * TASKS)
    for day in DAYS[1:]:  # each batch's floor goes to the cells drawn least before it
        before = Counter(draws.filter(pl.col("batch") < day)["cell"].to_list())
        floor = draws.filter((pl.col("batch") == day) & (pl.col("source") == "floor"))
        assert floor.height == floor_draws
        least = sorted(before[c] for c in cells)[:floor_draws]
        assert sorted(before[c] for c in floor["cell"]) == least
    assert draws["cell"].n_unique() >= min(len(cells), TASKS + floor_draws * (len(DAYS) - 1))


def test_every_described_task_is_the_cell_its_draw_chose(frontier_lake):
    draws = frontier_lake.read_all("task_draws")
    described = frontier_lake.read_all("task_descriptions")
    joined = described.join(draws, on=["batch", "index"], suffix="_drawn")
    assert joined.height == described.height == TASKS * len(DAYS)
    levels = joined["truth"].map_elements(lambda t: json.loads(t)["level"], return_dtype=pl.Int64)
    assert (joined["family"] == joined["family_drawn"]).all()
    assert (levels == joined["level"]).all()
    assert (joined["parent_task_id"] == joined["parent_task_id_drawn"]).all()


def test_each_batch_records_the_history_window_its_draw_read(frontier_lake):
    kept = frontier_lake.read_all("filtered_dataset").filter(pl.col("kept"))
    for i, day in enumerate(DAYS):
        window = frontier_lake.read("cell_history", day)
        assert window["generated"].sum() == TASKS * i
        assert set(window["solver"]) <= {"chat/hidden-skill"} and set(window["as_of"]) <= {day}
        assert window["kept"].sum() == kept.filter(pl.col("batch") < day).height


def test_a_batch_drawn_again_later_reproduces_its_draw(frontier_lake, families):
    lake = frontier_lake
    day = DAYS[2]
    before = lake.read("task_draws", day)
    tasks = lake.read("task_descriptions", day)["task_id"].to_list()
    with dg.DagsterInstance.ephemeral() as instance:
        solver = {"solver": "chat", "solver_model": "hidden-skill", "k": K}  # no request made
        again = materialize(lake.data_dir, day, instance, selection=["task_descriptions"], **solver)
    assert again.success
    assert lake.read("task_draws", day).equals(before)
    assert lake.read("task_descriptions", day)["task_id"].to_list() == tasks


def test_the_oracle_degrades_the_draw_to_uniform_and_says_so_once(tmp_path, sandbox, families):
    with dg.DagsterInstance.ephemeral() as instance:
        for day in DAYS[:2]:
            result = materialize(tmp_path, day, instance, tasks=4)
            assert result.success
        logs = [e.user_message for e in instance.all_logs(result.run_id)]
    said = [m for m in logs if m.startswith("sampler:")]
    assert len(said) == 1 and "degraded to the uniform draw" in said[0]
    meta = result.asset_materializations_for_node("task_descriptions")[0].metadata
    assert meta["draw_mode"].value == "degraded"
    assert meta["sampler_note"].value == said[0].removeprefix("sampler: ")
    draws = Lake(tmp_path).read("task_draws", DAYS[1])
    assert set(draws["source"]) == {"uniform"} and draws["cell"].n_unique() == 4
