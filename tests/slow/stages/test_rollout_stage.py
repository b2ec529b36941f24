"""The solver stage through Dagster with a chat solver: an endpoint that fails mid-batch, a rerun
that completes only what is missing, a second model evaluated on the same batch, and the keep band.

Real Dagster runs (`dg.materialize`), real Docker, a real lake and catalog; the solver is the real
`openai` client talking HTTP to a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading

import broken_families as bf
import dagster as dg
import pytest
from batches import materialize_batch
from conftest import own_containers

import endless_assets.generation.procedural as procedural
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.scripted_server import Reply, ScriptedServer

BATCH = "2026-04-20"
TASKS = 2
SOLVE = "<command>tr a-z A-Z < /home/user/in.txt > /home/user/out.txt</command>"
DONE = "<action>done</action>"
ALL = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
    "solver_rollouts",
    "filtered_dataset",
]


class Endpoint:
    """A model that solves the test task in two turns; it can fail from the n-th request on, and
    can be told to give up on some attempts of a task."""

    def __init__(self, healthy_requests: int | None = None) -> None:
        self.healthy_requests = healthy_requests
        self.served = 0
        self.give_up: dict[str, list[bool]] = {}  # word in the instruction -> per attempt
        self._starts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Reply:
        with self._lock:
            if self.healthy_requests is not None and self.served >= self.healthy_requests:
                return Reply(status=503)
            self.served += 1
            messages = request["messages"]
            if len(messages) > 2:
                return Reply(DONE)
            for word, plan in self.give_up.items():
                if word in messages[1]["content"]:
                    attempt = self._starts.get(word, 0)
                    self._starts[word] = attempt + 1
                    if plan[min(attempt, len(plan) - 1)]:
                        return Reply("I cannot do this.\n" + DONE)
            return Reply(SOLVE)


def materialize(data_dir, server, selection=None, **config) -> dg.ExecuteInProcessResult:
    settings = {
        "tasks": TASKS,
        "workers": 2,
        "solver": "chat",
        "sampler": "uniform",  # the generator's deal, as the scripted replies expect
        "solver_model": "model-a",
        "solver_base_url": server.base_url,
        "llm_retries": 0,
        "k": 3,
        "rollout_workers": 2,
        "soundness_repeats": 1,
        **config,
    }
    return materialize_batch(data_dir, ALL, BATCH, selection=selection, **settings)


def meta(result, node: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(node)[0].metadata.items()}


def test_stage_four_with_a_chat_solver(tmp_path_factory, sandbox):
    """One test, so parallel test workers do not each materialize the batches again."""
    runs = materialize_three_times(tmp_path_factory, sandbox)
    check_an_endpoint_that_fails_mid_batch_leaves_harness_errors_not_zero_rewards(runs)
    check_a_rerun_runs_only_the_missing_attempts(runs)
    check_a_second_model_on_the_same_batch_compares_in_one_query(runs)
    check_pass_at_k_difficulty_and_the_keep_band(runs)
    data_dir = runs[0]
    with ScriptedServer(lambda r: Reply(status=503)) as server:
        smaller_k = materialize(
            data_dir, server, selection=["solver_rollouts", "filtered_dataset"], k=2
        )
        smaller_k_requests = len(server.requests)
    check_a_smaller_k_reuses_and_keeps_every_stored_attempt(data_dir, smaller_k, smaller_k_requests)


def materialize_three_times(tmp_path_factory, sandbox):
    """A batch with an endpoint failing mid-batch, a rerun, and a second model on it."""
    data_dir = tmp_path_factory.mktemp("lake")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(procedural, "ALL_FAMILIES", [bf.Good])
        failing = Endpoint(healthy_requests=5)
        with ScriptedServer(failing) as server:
            first = materialize(data_dir, server)
        first_rollouts = query(Lake(data_dir), "select * from solver_rollouts")
        healthy = Endpoint()
        with ScriptedServer(healthy) as server:
            rerun = materialize(data_dir, server, selection=["solver_rollouts", "filtered_dataset"])
            rerun_requests = len(server.requests)
        words = [
            json.loads(t)["word"]
            for t in query(Lake(data_dir), "select truth from task_descriptions order by task_id")[
                "truth"
            ]
        ]
        other = Endpoint()
        other.give_up = {words[1]: [False, True]}  # solves the second task once in two attempts
        with ScriptedServer(other) as server:
            second_model = materialize(
                data_dir,
                server,
                selection=["solver_rollouts", "filtered_dataset"],
                solver_model="model-b",
                k=2,
                max_pass_rate=0.9,
            )
    assert not own_containers(sandbox)
    return data_dir, first, first_rollouts, rerun, rerun_requests, second_model, words


def check_an_endpoint_that_fails_mid_batch_leaves_harness_errors_not_zero_rewards(runs):
    _, first, rollouts, *_ = runs
    assert first.success
    assert len(rollouts) == TASKS * 3
    errors = rollouts.filter(rollouts["termination"] == "harness_error")
    scored = rollouts.filter(rollouts["termination"] != "harness_error")
    assert len(errors) >= 1 and len(scored) >= 1
    assert errors["reward"].null_count() == len(errors)
    assert all(e.startswith("PolicyUnavailable") for e in errors["error"])
    assert set(errors["failure_mode"]) == {"harness_error"}
    assert set(scored["reward"]) == {1}
    assert meta(first, "solver_rollouts")["harness_errors"] == len(errors)


def check_a_rerun_runs_only_the_missing_attempts(runs):
    data_dir, _, first_rollouts, rerun, rerun_requests, *_ = runs
    assert rerun.success
    missing = first_rollouts.filter(first_rollouts["termination"] == "harness_error")
    info = meta(rerun, "solver_rollouts")
    assert info["ran_now"] == len(missing)
    assert info["reused"] == TASKS * 3 - len(missing)
    assert rerun_requests == 2 * len(missing)  # two turns per attempt, nothing else re-asked
    after = query(
        Lake(data_dir),
        "select task_id, rollout_idx, reward, created_at from solver_rollouts "
        "where model = 'model-a' order by all",
    )
    assert after["reward"].to_list() == [1] * (TASKS * 3)
    kept_before = {
        (r["task_id"], r["rollout_idx"]): r["created_at"]
        for r in first_rollouts.filter(first_rollouts["reward"] == 1).to_dicts()
    }
    for r in after.to_dicts():
        if (r["task_id"], r["rollout_idx"]) in kept_before:
            assert r["created_at"] == kept_before[(r["task_id"], r["rollout_idx"])]


def check_a_second_model_on_the_same_batch_compares_in_one_query(runs):
    data_dir, *_, second_model, _ = runs
    assert second_model.success
    rates = query(
        Lake(data_dir),
        "select model, count(*) n, avg(reward) rate from solver_rollouts group by 1 order by 1",
    )
    assert rates.rows() == [("model-a", TASKS * 3, 1.0), ("model-b", TASKS * 2, 0.75)]
    modes = query(
        Lake(data_dir), "select model, failure_mode, rollouts from failure_modes order by 1, 2"
    )
    assert modes.rows() == [
        ("model-a", "solved", TASKS * 3),
        ("model-b", "solved", 3),
        ("model-b", "wrong_done", 1),
    ]


def check_pass_at_k_difficulty_and_the_keep_band(runs):
    data_dir, *_, second_model, words = runs
    dataset = query(
        Lake(data_dir),
        "select instruction, solver_model, attempts, scored_attempts, successes, pass_at_n, "
        "pass_at_curve, "
        "pass_rate, kept, drop_reason from filtered_dataset order by task_id",
    ).to_dicts()
    assert [d["solver_model"] for d in dataset] == ["chat/model-b"] * TASKS
    easy = next(d for d in dataset if words[0] in d["instruction"])
    half = next(d for d in dataset if words[1] in d["instruction"])
    assert (easy["scored_attempts"], easy["successes"], easy["pass_rate"], easy["kept"]) == (
        2,
        2,
        1.0,
        False,
    )
    assert easy["drop_reason"].startswith("too_easy")
    assert (half["scored_attempts"], half["successes"], half["pass_rate"], half["kept"]) == (
        2,
        1,
        0.5,
        True,
    )
    assert json.loads(half["pass_at_curve"]) == [0.5, 1.0] and half["pass_at_n"] == 1.0
    info = meta(second_model, "filtered_dataset")
    assert info["kept"] == 1 and "pass rate in [0.0, 0.9]" in info["keep_rule"]
    checks = second_model.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)


def check_a_smaller_k_reuses_and_keeps_every_stored_attempt(data_dir, smaller_k, requests):
    assert smaller_k.success and requests == 0
    assert meta(smaller_k, "solver_rollouts")["reused"] == TASKS * 2
    stored = query(
        Lake(data_dir), "select model, count(*) n from solver_rollouts group by 1 order by 1"
    )
    assert stored.rows() == [("model-a", TASKS * 3), ("model-b", TASKS * 2)]
    dataset = query(
        Lake(data_dir), "select solver_model, scored_attempts, successes from filtered_dataset"
    )
    assert dataset.rows() == [("chat/model-a", 2, 2)] * TASKS
