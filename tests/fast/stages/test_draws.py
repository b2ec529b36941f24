"""The describe stage's draw outside Dagster: when a batch is the generator's own deal, what a cold
start draws, variants of past tasks from a real lake (procedural, and an LLM shown the parent over
real HTTP), and the cells each generator offers."""

from __future__ import annotations

import json

import polars as pl

from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.llm import LLMGenerator
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.models import Task
from endless_assets.sampling.cells import Cell
from endless_assets.sampling.evolve import child_seed
from endless_assets.settings import Settings
from endless_assets.stages.draws import (
    describe_slot,
    draw_history,
    draws_frame,
    history_frame,
    parent_tasks,
    plan_draw,
    sampler_label,
    slot_seed,
    solver_name,
    why_uniform,
)
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import TABLES
from endless_assets.taxonomy import Taxonomy
from endless_assets.testing.scripted_model import ScriptedTaskModel
from endless_assets.testing.scripted_server import ScriptedServer

SOLVER = {"solver": "chat", "solver_model": "m", "k": 4}
FAMILIES = ("json_filter", "text_replace")


def generator() -> ProceduralGenerator:
    from endless_assets.generation.procedural.families import ALL_FAMILIES

    return ProceduralGenerator("base", [f for f in ALL_FAMILIES if f.name in FAMILIES])


def settings(tmp_path, **values) -> Settings:
    return Settings.resolve(data_dir=str(tmp_path), sampler="frontier", tasks=6, **values)


def test_the_uniform_sampler_a_carried_generator_and_a_named_batch_keep_the_generators_deal(
    tmp_path,
):
    lake = Lake(tmp_path)
    uniform = Settings.resolve(data_dir=str(tmp_path), sampler="uniform")
    assert plan_draw(lake, uniform, generator(), "2026-05-01") is None
    assert why_uniform(uniform, generator(), "2026-05-01") == ""
    frontier = settings(tmp_path)
    assert plan_draw(lake, frontier, CarriedGenerator(), "2026-05-01") is None
    assert "cannot be drawn by cell" in why_uniform(frontier, CarriedGenerator(), "2026-05-01")
    assert plan_draw(lake, frontier, generator(), "imported-set") is None
    assert "not a day" in why_uniform(frontier, generator(), "imported-set")
    TABLES["task_draws"].validate(draws_frame(None))
    TABLES["cell_history"].validate(history_frame(None))


def test_by_default_a_chat_solver_draws_by_the_frontier_and_the_oracle_keeps_the_deal(tmp_path):
    lake = Lake(tmp_path)
    oracle = Settings.resolve(data_dir=str(tmp_path), tasks=6)
    assert oracle.sampling.sampler == "auto" and sampler_label(oracle) == "auto (uniform)"
    assert plan_draw(lake, oracle, generator(), "2026-05-01") is None
    assert "the oracle solver gives no pass rates" in why_uniform(oracle, generator(), "2026-05-01")
    chat = Settings.resolve(data_dir=str(tmp_path), tasks=6, solver="chat", solver_model="m")
    assert sampler_label(chat) == "auto (frontier)"
    plan = plan_draw(lake, chat, generator(), "2026-05-01")
    assert plan is not None and plan.mode == "cold_start"
    assert why_uniform(chat, generator(), "2026-05-01") == ""


def test_a_cold_start_spreads_the_batch_over_the_cells_and_describes_each_drawn_cell(tmp_path):
    plan = plan_draw(Lake(tmp_path), settings(tmp_path), generator(), "2026-05-01")
    assert plan is not None and plan.mode == "cold_start"
    assert len(set(plan.counts())) == 6 and plan.reason == ""
    TABLES["task_draws"].validate(plan.frame())
    for slot in plan.slots:
        seed = slot_seed(plan, "2026-05-01", slot.index, 0)
        draft, _ = describe_slot(generator(), plan, "2026-05-01", slot.index, seed)
        assert (draft.family, draft.truth["level"]) == slot.cell.key
        assert draft.parent_task_id == ""


def test_the_solver_is_named_as_filtered_dataset_names_it(tmp_path):
    assert solver_name(Settings.resolve(data_dir=str(tmp_path))) == "oracle/reference-solution"
    assert solver_name(Settings.resolve(data_dir=str(tmp_path), **SOLVER)) == "chat/m"


def past_batch(lake: Lake, batch: str, outcomes: list[tuple[str, int, int]]) -> dict[str, int]:
    """A batch the chat solver scored: (family, level, successes of 4) per task; the seeds."""
    described, rollouts, filtered, seeds = [], [], [], {}
    for i, (family, level, successes) in enumerate(outcomes):
        task_id = f"et-{batch}-{i}"
        seeds[task_id] = 1000 + i
        described.append(
            {
                "task_id": task_id,
                "batch": batch,
                "status": "ok",
                "generator": "procedural",
                "category": "c",
                "complexity": "x",
                "family": family,
                "truth": json.dumps({"level": level}),
                "seed": seeds[task_id],
                "tokens_in": 0,
                "tokens_out": 0,
                "draft": generator()
                .describe_cell(batch, i, seeds[task_id], family, level)[0]
                .model_copy(update={"instruction": f"task {task_id}"})
                .stored_json(),
            }
        )
        rollouts += [
            {
                "task_id": task_id,
                "batch": batch,
                "policy": "chat",
                "model": "m",
                "reward": r,
                "tokens_in": 900,
                "tokens_out": 100,
            }
            for r in [1] * successes + [0] * (4 - successes)
        ]
        filtered.append(
            {
                "task_id": task_id,
                "batch": batch,
                "solver_model": "chat/m",
                "successes": successes,
                "scored_attempts": 4,
                "kept": successes > 0,
            }
        )
    lake.write("task_descriptions", batch, pl.DataFrame(described))
    lake.write("solver_rollouts", batch, pl.DataFrame(rollouts))
    lake.write("filtered_dataset", batch, pl.DataFrame(filtered))
    return seeds


def test_a_task_solved_every_time_yields_a_harder_variant_of_its_lineage(tmp_path):
    lake = Lake(tmp_path)
    seeds = past_batch(
        lake,
        "2026-05-01",
        [("json_filter", 2, 4), ("json_filter", 3, 2), ("text_replace", 6, 0)],
    )
    config = settings(tmp_path, evolve_budget=0.34, **SOLVER)
    plan = plan_draw(lake, config, generator(), "2026-05-02")
    assert plan is not None and plan.mode == "targeting"
    evolved = [s for s in plan.slots if s.source == "evolve"]
    assert len(evolved) == 2 and [s.index for s in evolved] == [4, 5]
    by_parent = {s.parent_task_id: s for s in evolved}
    harder = by_parent["et-2026-05-01-0"]
    assert harder.cell == Cell.family("json_filter", 3)
    assert harder.seed == child_seed(seeds["et-2026-05-01-0"], harder.cell)
    assert by_parent["et-2026-05-01-2"].cell == Cell.family("text_replace", 5)
    history = draw_history(lake, config, generator(), "2026-05-02")
    window = history_frame(history)
    TABLES["cell_history"].validate(window)
    assert window["cell"].to_list() == [
        "family:json_filter:2",
        "family:json_filter:3",
        "family:text_replace:6",
    ]
    assert window["outcomes"].to_list() == ["[[4, 4, 1]]", "[[2, 4, 1]]", "[[0, 4, 1]]"]
    assert window["rollout_tokens"].to_list() == [4000] * 3  # what each cell's attempts cost
    assert set(window["as_of"]) == {"2026-05-02"} and set(window["solver"]) == {"chat/m"}
    parents = parent_tasks(lake, plan)
    assert {p.instruction for p in parents.values()} == {f"task {t}" for t in by_parent}
    draft, _ = describe_slot(generator(), plan, "2026-05-02", 4, harder.seed, parents)
    assert draft.parent_task_id == "et-2026-05-01-0" and draft.truth["level"] == 3
    # Recorded, the parents are not proposed again the next day.
    lake.write("task_draws", "2026-05-02", plan.frame())
    again = plan_draw(lake, config, generator(), "2026-05-03")
    assert not [s for s in again.slots if s.parent_task_id in by_parent]
    # And the batch drawn again, after later batches exist, draws the same.
    assert plan_draw(lake, config, generator(), "2026-05-02").frame().equals(plan.frame())


def test_a_task_stores_its_parent_only_when_it_has_one():
    task = Task(
        batch="2026-05-01",
        index=0,
        seed=1,
        category="c",
        complexity="x",
        scenario="s",
        instruction="do it",
        generator="procedural",
    )
    assert "parent_task_id" not in json.loads(task.stored_json())
    child = task.model_copy(update={"parent_task_id": "et-0"})
    assert Task.model_validate_json(child.stored_json()).parent_task_id == "et-0"


def test_the_taxonomy_places_a_seeded_task_in_a_chosen_cell():
    taxonomy = Taxonomy.load()
    drawn = taxonomy.draw(7)
    category, complexity = taxonomy.categories[3].name, taxonomy.complexities[4].name
    placed = taxonomy.draw_cell(7, category, complexity)
    assert (placed.category, placed.complexity, placed.level) == (category, complexity, 5)
    assert placed.scenario == drawn.scenario and placed.levels == len(taxonomy.complexities)


def test_the_llm_generator_writes_a_variant_from_its_parents_request(sandbox):
    model = ScriptedTaskModel(sandbox.base.tag)
    with ScriptedServer(model) as server:
        client = ChatClient(Endpoint(model="writer", base_url=server.base_url, retries=0))
        llm = LLMGenerator(client, sandbox.base.tag)
        category, complexity = llm.cells()[7]
        parent, _ = llm.describe_cell("2026-05-01", 0, 11, category, complexity)
        assert (parent.category, parent.complexity) == (category, complexity)
        harder = llm.taxonomy.complexities[llm.taxonomy.level_of(complexity)].name
        child, usage = llm.describe_variant("2026-05-02", 3, 12, category, harder, parent)
    assert child.parent_task_id == parent.task_id and child.complexity == harder
    assert usage.requests == 1
    request = server.requests[-1]["messages"][-1]["content"]
    assert "a harder variant" in request and "solved in every attempt" in request
    assert parent.instruction.strip() in request


def test_the_draw_follows_the_solver_it_is_pointed_at(tmp_path):
    lake = Lake(tmp_path)
    past_batch(lake, "2026-05-01", [("json_filter", 2, 4), ("json_filter", 3, 2)])
    trained = plan_draw(lake, settings(tmp_path, **SOLVER), generator(), "2026-05-02")
    assert trained.mode == "targeting" and trained.solver == "chat/m"
    other = {**SOLVER, "solver_model": "next-checkpoint"}
    fresh = plan_draw(lake, settings(tmp_path, **other), generator(), "2026-05-02")
    assert fresh.mode == "cold_start" and fresh.solver == "chat/next-checkpoint"
