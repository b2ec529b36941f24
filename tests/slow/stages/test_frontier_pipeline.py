"""Consecutive daily batches drawn by the frontier sampler over the LLM generator's whole taxonomy
(the paper's 62 categories and 3 with services x 6 complexities, 390 cells), through real Dagster
runs, real Docker, a scripted model writing the tasks and a chat solver over real HTTP whose skill
per category and complexity the platform never sees: the learnable share of kept tasks rises above
the uniform draw's by the second batch, each batch records what its draw expected next to what was
measured, every drawn cell is the one described; a batch drawn again reproduces its draw; the oracle
degrades a procedural draw, said once."""

from __future__ import annotations

import hashlib
import math
import threading
from collections import Counter

import dagster as dg
import polars as pl
import pytest
from batches import materialize_batch

import endless_assets.generation.procedural as procedural
from endless_assets.agent.policies import solution_command
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.report import stats_tables
from endless_assets.sampling.measures import learnable_share
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.taxonomy import Taxonomy
from endless_assets.testing.scripted_model import ScriptedTaskModel
from endless_assets.testing.scripted_server import Reply, ScriptedServer

DAYS = ["2026-07-01", "2026-07-02", "2026-07-03"]
TASKS = 16
K = 4
TAXONOMY = Taxonomy.load()
LEVELS = {entry.name: level for level, entry in enumerate(TAXONOMY.complexities, start=1)}
FAMILIES = [f for f in ALL_FAMILIES if f.name in ("json_filter", "text_replace")]
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


def _fraction(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") / 2**32


def skill(category: str, complexity: str) -> float:
    """The solver's hidden pass probability: each complexity level 3 logits harder than the one
    below (level 3 even), each category easier or harder by up to 0.75 logits."""
    logit = 3.0 * (3 - LEVELS[complexity]) + 1.5 * (_fraction(category) - 0.5)
    return 1 / (1 + math.exp(-logit))


def uniform_share() -> float:
    """The learnable share of kept tasks a uniform draw over the taxonomy gets from this solver."""
    kept = learnable = 0.0
    for category in TAXONOMY.categories:
        for complexity in TAXONOMY.complexities:
            p = skill(category.name, complexity.name)
            kept += 1 - (1 - p) ** K
            learnable += 1 - (1 - p) ** K - p**K
    return learnable / kept


class HiddenSkill:
    """A model that knows every task's reference solution and uses it on a share of its attempts
    set by the task's category and complexity; otherwise it gives up at once. Attempt n of a
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
        if _fraction(f"{task['task_id']}:{attempt}") < skill(task["category"], task["complexity"]):
            return Reply(f"<command>{solution_command(task['reference_solution'])}</command>")
        return Reply("I give up.\n" + DONE)


def materialize(
    data_dir, day: str, instance, selection=None, **config
) -> dg.ExecuteInProcessResult:
    settings = {"tasks": TASKS, "workers": 4, "soundness": "off", **config}
    return materialize_batch(
        data_dir, ASSETS, day, selection=selection, instance=instance, **settings
    )


def writer(server: ScriptedServer) -> dict:
    return {
        "generator": "llm",
        "generator_model": "scripted",
        "generator_base_url": server.base_url,
        "llm_concurrency": 8,
        "llm_retries": 0,
    }


def chat(server: ScriptedServer) -> dict:
    return {
        "solver": "chat",
        "solver_model": "hidden-skill",
        "solver_base_url": server.base_url,
        "k": K,
        "rollout_workers": 4,
        "max_turns": 3,
    }


@pytest.fixture(scope="module")
def frontier_lake(tmp_path_factory, sandbox) -> Lake:
    """Three daily batches with the default sampler (auto: the frontier, with the chat solver)."""
    data_dir = tmp_path_factory.mktemp("frontier")
    lake = Lake(data_dir)
    with (
        ScriptedServer(ScriptedTaskModel(sandbox.base.tag)) as model,
        ScriptedServer(HiddenSkill(lake)) as solver,
        dg.DagsterInstance.ephemeral() as instance,
    ):
        for day in DAYS:
            assert materialize(data_dir, day, instance, **writer(model), **chat(solver)).success
    return lake


def test_the_learnable_share_rises_above_the_uniform_draws_by_the_second_batch(frontier_lake):
    lake = frontier_lake
    shares = learnable_share(lake.read_all("filtered_dataset"))
    print("learnable share per batch:", shares.select("batch", "kept", "learnable_share").rows())
    draws = lake.read_all("task_draws")
    modes = draws.group_by("batch").agg(pl.col("mode").first()).sort("batch")["mode"].to_list()
    assert modes == ["cold_start", "targeting", "targeting"]
    assert set(draws["kind"]) == {"taxonomy"} and set(draws["model"]) == {"pooled"}
    baseline = uniform_share()
    assert 0.3 < baseline < 0.5
    second = shares.filter(pl.col("batch") == DAYS[1])["learnable_share"][0]
    later = shares.filter(pl.col("batch") >= DAYS[1])
    assert second > baseline + 0.1
    assert later["learnable"].sum() / later["kept"].sum() >= 0.6
    # The floor goes to cells no batch before drew, from the whole taxonomy's 390.
    cells = {(c.name, x.name) for c in TAXONOMY.categories for x in TAXONOMY.complexities}
    assert set(draws.select("category", "complexity").rows()) <= cells and len(cells) == 390
    for day in DAYS[1:]:
        before = set(draws.filter(pl.col("batch") < day)["cell"])
        drawn = draws.filter(pl.col("batch") == day)
        floor = drawn.filter(pl.col("source") == "floor")
        variants = drawn.filter(pl.col("source") == "evolve").height  # the draw's own: the rest
        assert floor.height == math.ceil(0.2 * (TASKS - variants))
        assert not set(floor["cell"]) & before


def test_each_batch_says_what_its_draw_expected_next_to_what_was_measured(frontier_lake):
    view = query(frontier_lake, "select * from frontier_batches order by batch")
    print(view.select("batch", "mode", "scored", "kept", "expected_learnable_share").rows())
    assert view["batch"].to_list() == DAYS
    measured = learnable_share(frontier_lake.read_all("filtered_dataset"))
    assert view["learnable_share"].to_list() == measured["learnable_share"].to_list()
    first, later = view.row(0, named=True), view.filter(pl.col("batch") > DAYS[0])
    assert first["expected_learnable_share"] is None and first["uniform"] == TASKS
    assert later["expected_learnable_share"].is_between(0.3, 1.0).all()
    assert later["explored_uncertainty"].null_count() == 0
    assert (later["floor"] + later["explore"] + later["exploit"] + later["evolve"] == TASKS).all()
    table = next(t for t in stats_tables(frontier_lake) if t.name == "frontier_batches")
    assert table.frame["batch"].to_list() == DAYS


def test_every_described_task_is_the_cell_its_draw_chose(frontier_lake):
    draws = frontier_lake.read_all("task_draws")
    described = frontier_lake.read_all("task_descriptions")
    joined = described.join(draws, on=["batch", "index"], suffix="_drawn")
    assert joined.height == described.height == TASKS * len(DAYS)
    assert (joined["category"] == joined["category_drawn"]).all()
    assert (joined["complexity"] == joined["complexity_drawn"]).all()
    assert (joined["parent_task_id"] == joined["parent_task_id_drawn"]).all()


def test_each_batch_records_the_history_window_its_draw_read(frontier_lake):
    kept = frontier_lake.read_all("filtered_dataset").filter(pl.col("kept"))
    for i, day in enumerate(DAYS):
        window = frontier_lake.read("cell_history", day)
        assert window["generated"].sum() == TASKS * i
        assert set(window["solver"]) <= {"chat/hidden-skill"} and set(window["as_of"]) <= {day}
        assert window["kept"].sum() == kept.filter(pl.col("batch") < day).height
        if i:  # what making the tasks and the solver's attempts at them cost, per cell
            assert window["tokens"].sum() > 0 and window["rollout_tokens"].sum() > 0


def test_a_batch_drawn_again_later_reproduces_its_draw(frontier_lake, sandbox):
    lake = frontier_lake
    day = DAYS[1]
    before = lake.read("task_draws", day)
    tasks = lake.read("task_descriptions", day)["task_id"].to_list()
    solver = {"solver": "chat", "solver_model": "hidden-skill", "k": K}  # no request made
    with (
        ScriptedServer(ScriptedTaskModel(sandbox.base.tag)) as model,
        dg.DagsterInstance.ephemeral() as instance,
    ):
        again = materialize(
            lake.data_dir, day, instance, ["task_descriptions"], **writer(model), **solver
        )
    assert again.success
    assert lake.read("task_draws", day).equals(before)
    assert lake.read("task_descriptions", day)["task_id"].to_list() == tasks


@pytest.fixture
def families():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(procedural, "ALL_FAMILIES", FAMILIES)
        yield


def test_the_oracle_degrades_the_draw_to_uniform_and_says_so_once(tmp_path, sandbox, families):
    with dg.DagsterInstance.ephemeral() as instance:
        for day in DAYS[:2]:
            result = materialize(tmp_path, day, instance, tasks=4, sampler="frontier")
            assert result.success
        logs = [e.user_message for e in instance.all_logs(result.run_id)]
    said = [m for m in logs if m.startswith("sampler:")]
    assert len(said) == 1 and "degraded to the uniform draw" in said[0]
    meta = result.asset_materializations_for_node("task_descriptions")[0].metadata
    assert meta["draw_mode"].value == "degraded"
    assert meta["sampler_note"].value == said[0].removeprefix("sampler: ")
    draws = Lake(tmp_path).read("task_draws", DAYS[1])
    assert set(draws["source"]) == {"uniform"} and draws["cell"].n_unique() == 4
