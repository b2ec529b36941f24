"""The estimate `endless run --plan` prints, over a history of `batch_costs` rows made here (real
Parquet partitions in a lake): what it scales with, which history it reads, and when it falls
back to the prior and says so."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from endless_assets.store.cost_record import Measured, comparison, cost_frame
from endless_assets.store.costs import Profile, estimate, read_history
from endless_assets.store.lake import Lake

CHAT = Profile(
    generator="llm",
    generator_model="writer",
    solver="chat",
    solver_model="agent",
    k=2,
    soundness="full",
    soundness_repeats=1,
    auditor_model="",
    workers=2,
    tasks=4,
)
T0 = datetime(2026, 3, 1, tzinfo=UTC)
# Per task entering each stage (rollouts: per attempt): requests, tokens in, tokens out.
SPEND = {
    "describe": (1, 900, 400),
    "environment": (2, 1300, 500),
    "completion test": (1, 800, 300),
    "soundness": (0, 0, 0),
    "solver rollouts": (3, 1700, 90),
}
CONTAINERS = {"environment": 1, "completion test": 1, "soundness": 1, "solver rollouts": 1}
UNIT_WALL, FIXED = 1.5, 0.7  # each unit's wall seconds, and each step's that do not grow


def made(
    batch: str,
    profile: Profile = CHAT,
    *,
    day: int = 0,
    entering: float = 1.0,
    reused: int = 0,
    runs: int = 1,
) -> pl.DataFrame:
    """A batch's batch_costs rows as the filtered_dataset step writes them."""
    tasks = profile.tasks
    units = {stage: tasks if stage == "describe" else int(tasks * entering) for stage in SPEND}
    units["solver rollouts"] *= profile.k
    used = {
        stage: {
            "units": units[stage],
            "requests": units[stage] * spend[0],
            "tokens_in": units[stage] * spend[1],
            "tokens_out": units[stage] * spend[2],
        }
        for stage, spend in SPEND.items()
    }
    measured = {}
    for stage in SPEND:
        done = units[stage] - reused
        step = Measured(made=done, wall_seconds=FIXED * runs + UNIT_WALL * done)
        step.add(0, CONTAINERS.get(stage, 0) * done, 0.5 * done, UNIT_WALL * done)
        measured[stage] = step
    planned = estimate(pl.DataFrame(), profile)
    stage_wall = sum(m.wall_seconds for m in measured.values())
    return cost_frame(
        batch,
        profile,
        planned,
        used,
        measured,
        runs=[f"run-{batch}-{i}" for i in range(runs)],
        run_seconds=stage_wall + 2.0 * runs,
        now=T0 + timedelta(days=day),
    )


@pytest.fixture
def lake(tmp_path):
    return Lake(tmp_path)


def history_of(lake: Lake, *frames: pl.DataFrame) -> pl.DataFrame:
    for frame in frames:
        lake.write("batch_costs", frame["batch"][0], frame)
    return read_history(lake)


def stages(plan) -> dict:
    return {s.stage: s for s in plan.stages}


def test_with_no_history_every_stage_is_the_prior_and_says_why():
    plan = estimate(read_history(Lake("/nonexistent-lake")), CHAT)
    assert not plan.from_history and plan.history_batches == []
    for stage in plan.stages:
        assert stage.basis.startswith("prior") and "no earlier batch" in stage.basis
    by = stages(plan)
    assert by["describe"].figures.requests == CHAT.tasks  # the generator's one request a task
    assert by["solver rollouts"].figures.requests > 0  # a chat solver asks its model
    oracle = stages(
        estimate(pl.DataFrame(), replace(CHAT, solver="oracle", generator="procedural"))
    )
    assert oracle["solver rollouts"].figures.requests == 0
    assert oracle["environment"].figures.tokens_in == 0


def test_per_task_figures_scale_with_the_tasks_asked(lake):
    history = history_of(lake, made("2026-03-01"))
    small, large = estimate(history, CHAT), estimate(history, replace(CHAT, tasks=12))
    for stage in ("describe", "environment", "completion test", "soundness", "solver rollouts"):
        a, b = stages(small)[stage].figures, stages(large)[stage].figures
        assert b.tokens_in == pytest.approx(3 * a.tokens_in)
        assert b.containers == pytest.approx(3 * a.containers)
        # Only the wall time that grows with the units triples; each step's set-up does not.
        assert b.wall_seconds - FIXED == pytest.approx(3 * (a.wall_seconds - FIXED))
    assert stages(small)["environment"].figures.tokens_in == pytest.approx(4 * 1300)
    assert small.total("containers") == pytest.approx(4 * 3 + 8)


def test_rollout_figures_are_per_attempt_and_scale_with_k(lake):
    history = history_of(lake, made("2026-03-01"))
    two, eight = estimate(history, CHAT), estimate(history, replace(CHAT, k=8))
    rollouts = stages(eight)["solver rollouts"]
    assert rollouts.units == pytest.approx(4 * stages(two)["solver rollouts"].units)
    assert rollouts.figures.requests == pytest.approx(4 * 8 * 3)
    assert stages(eight)["environment"].figures == stages(two)["environment"].figures
    assert "made with k 2" in rollouts.basis  # history of another k, scaled per attempt


def test_the_share_of_tasks_reaching_a_stage_comes_from_the_history(lake):
    history = history_of(lake, made("2026-03-01", entering=0.5))
    by = stages(estimate(history, replace(CHAT, tasks=10)))
    assert by["describe"].units == 10
    assert by["environment"].units == pytest.approx(5)
    assert by["solver rollouts"].units == pytest.approx(5 * CHAT.k)


def test_another_solver_falls_back_to_the_prior_for_its_rollouts_alone_and_says_so(lake):
    history = history_of(lake, made("2026-03-01"))
    by = stages(estimate(history, replace(CHAT, solver="oracle", solver_model="reference")))
    assert by["environment"].basis.startswith("history: 1 batch (2026-03-01)")
    rollouts = by["solver rollouts"]
    assert rollouts.basis.startswith("prior") and not rollouts.from_history
    assert "solver oracle, solver_model reference" in rollouts.basis
    assert rollouts.figures.requests == 0  # the oracle's prior asks no model


def test_soundness_history_is_read_only_for_the_same_soundness_settings(lake):
    history = history_of(lake, made("2026-03-01"))
    off = replace(CHAT, soundness="off", soundness_repeats=0)
    by = stages(estimate(history, off))
    assert by["soundness"].basis.startswith("prior") and "soundness off" in by["soundness"].basis
    assert by["soundness"].figures.containers == 0
    assert by["completion test"].from_history
    # The solver stage's share is read from batches with the same soundness: none here, so the
    # prior's.
    assert "the prior's" in by["solver rollouts"].basis


def test_the_history_is_the_latest_batches_before_the_run_and_never_the_batch_itself(lake):
    frames = [made(f"2026-03-{d:02d}", day=d) for d in range(1, 9)]
    history = history_of(lake, *frames)
    plan = estimate(history, CHAT, batch="2026-03-08", before=T0 + timedelta(days=7, hours=1))
    assert plan.history_batches == [f"2026-03-{d:02d}" for d in range(3, 8)]
    assert "5 batches (2026-03-03, 2026-03-04, 2026-03-05 and 2 more)" in plan.stages[1].basis


def test_units_reused_from_a_journal_count_for_tokens_but_not_for_docker_figures(lake):
    history = history_of(lake, made("2026-03-01", reused=2))
    by = stages(estimate(history, CHAT))
    env = by["environment"].figures
    assert env.tokens_in == pytest.approx(4 * 1300)  # the rows carry what they cost when made
    assert env.containers == pytest.approx(4)  # 2 containers for the 2 tasks made: 1 a task
    assert env.wall_seconds == pytest.approx(FIXED + 4 * UNIT_WALL)


def test_a_sharded_batch_pays_each_steps_set_up_once_per_run(lake):
    history = history_of(lake, made("2026-03-01", runs=3))
    one, three = estimate(history, CHAT), estimate(history, CHAT, runs=3)
    a, b = stages(one)["environment"].figures, stages(three)["environment"].figures
    assert b.wall_seconds - a.wall_seconds == pytest.approx(2 * FIXED)
    assert stages(three)["other"].figures.wall_seconds == pytest.approx(3 * 2.0)


def test_the_comparison_puts_the_estimate_beside_the_cost_and_how_far_off_it_was(lake):
    first = made("2026-03-01")
    history = history_of(lake, first)
    second = made("2026-03-02", day=1)
    compared = comparison(second).filter(pl.col("stage") == "total").row(0, named=True)
    assert compared["tokens_off"] is not None  # the prior's guess, held against the tokens
    planned = estimate(history, CHAT)
    assert planned.total("containers") == pytest.approx(compared["containers"])
    assert planned.total("tokens_in") + planned.total("tokens_out") == pytest.approx(
        compared["tokens"]
    )
