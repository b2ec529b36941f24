"""The LLM generator through whole Dagster runs: the real `openai` client over HTTP against a
scripted model server on 127.0.0.1, real Docker builds and containers, a real lake.

One batch exercises every path of the describe, build and validation stages at once (a clean task,
repairs, rejections, malformed replies, retried 429/500s, a near-duplicate) and is then materialized
again to show that the reply cache makes the rerun send no request at all.
"""

from __future__ import annotations

import json

import pytest
from batches import materialize_batch

from endless_assets.generation.factory import task_parallelism
from endless_assets.generation.llm import LLMGenerator
from endless_assets.generation.llm.prompts import PromptSet
from endless_assets.models import task_seed
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.sandbox.sandbox import CpuSlot
from endless_assets.settings import Settings, SettingsError
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.scripted_model import ScriptedTaskModel
from endless_assets.testing.scripted_server import Reply, ScriptedServer

BATCH = "2026-04-01"
SECRET = "sk-endless-test-secret-123"
STAGES_I_TO_III = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
]
TABLES = [t for t in STAGES_I_TO_III[1:] if t != "task_decontamination"]  # (no model use)


def seed_of(index: int, batch: str = BATCH) -> int:
    return task_seed(batch, index) % 2**31  # what the generator sends as `seed`


BEHAVIOURS = {
    0: {"think", "rate_limited"},  # goes through; its first request meets a 429, then a 500
    1: {"truncated", "build_fails_once", "reference_fails"},
    2: {"build_always_fails"},
    3: {"bad_from_once", "completion_passes_once"},
    4: {"completion_always_passes"},
    5: {"no_task"},
    6: {f"duplicate_of:{seed_of(0)}"},
}


def materialize(data_dir, server: ScriptedServer, assets: list[str], tasks: int, batch=BATCH):
    return materialize_batch(
        data_dir,
        assets,
        batch,
        tasks=tasks,
        workers=4,
        generator="llm",
        generator_model="scripted",
        generator_base_url=server.base_url,
        llm_concurrency=8,
        llm_retries=3,
        llm_backoff=0.01,
    )


def _outcomes(lake: Lake, table: str) -> list[tuple]:
    frame = lake.read(table, BATCH).sort("task_id")
    columns = ["task_id", "status", "reject_reason", "requests", "tokens_in", "tokens_out"]
    if "attempts" in frame.columns:
        columns.append("attempts")
    return frame.select(columns).rows()


def first_run_harness_errors(batch) -> list[tuple]:
    """What the first run left unfinished (the rerun finishes it): the reason a count is off."""
    return [
        (table, row[0], row[2])
        for table, rows in batch["snapshot"].items()
        for row in rows
        if row[1] == "harness_error"
    ]


def by_index(lake: Lake, table: str, ids: list[str]) -> list[dict | None]:
    rows = {r["task_id"]: r for r in lake.read(table, BATCH).to_dicts()}
    return [rows.get(task_id) for task_id in ids]


@pytest.fixture(scope="module")
def batch(tmp_path_factory, sandbox):
    data_dir = tmp_path_factory.mktemp("llm-lake")
    model = ScriptedTaskModel(
        sandbox.base.tag, {seed_of(i): flags for i, flags in BEHAVIOURS.items()}
    )
    with pytest.MonkeyPatch.context() as env, ScriptedServer(model) as server:
        env.setenv("OPENAI_API_KEY", SECRET)
        first = materialize(data_dir, server, STAGES_I_TO_III, len(BEHAVIOURS))
        requests_first = len(server.requests)
        snapshot = {table: _outcomes(Lake(data_dir), table) for table in TABLES}
        second = materialize(data_dir, server, STAGES_I_TO_III, len(BEHAVIOURS))
        requests_second = len(server.requests) - requests_first
    lake = Lake(data_dir)
    ids = lake.read("task_descriptions", BATCH).sort("index")["task_id"].to_list()
    return {
        "lake": lake,
        "data_dir": data_dir,
        "server": server,
        "first": first,
        "second": second,
        "requests": (requests_first, requests_second),
        "snapshot": snapshot,
        "ids": ids,
    }


def test_stage_one_keeps_good_tasks_and_rejects_malformed_and_duplicate_ones(batch):
    assert batch["first"].success
    rows = by_index(batch["lake"], "task_descriptions", batch["ids"])
    assert [r["status"] for r in rows] == ["ok"] * 5 + ["rejected"] * 2
    assert rows[5]["reject_reason"] == "unusable_task: no <task> section in the reply"
    assert rows[6]["reject_reason"].startswith(f"duplicate: near-duplicate of {rows[0]['task_id']}")
    assert rows[6]["duplicate_of"] == rows[0]["task_id"]
    version = PromptSet.load().version
    for row in rows[:5]:
        assert row["generator"] == "llm" and row["generator_model"] == "scripted"
        assert row["prompt_version"] == version
        assert row["category"] and row["complexity"] and row["scenario"]
        assert json.loads(row["truth"])["text"].startswith("Initial state:")
        assert row["requests"] == 1 and row["tokens_in"] > 0 and row["tokens_out"] > 0
    # a reply wrapped in reasoning and prose, and one cut off inside <solution>, both parse
    assert "<think>" not in rows[0]["instruction"] and "Sure!" not in rows[0]["instruction"]
    assert rows[1]["reference_solution"].startswith("echo nothing-useful")


def test_stage_two_repairs_builds_and_replies_and_gives_up_after_three_rounds(batch):
    rows = by_index(batch["lake"], "task_environments", batch["ids"])
    assert rows[5] is None and rows[6] is None  # rejected in the describe stage, never entered
    assert [(r["status"], r["attempts"], r["requests"]) for r in rows[:5]] == [
        ("ok", 1, 2),  # initial-state test, then the Dockerfile written to pass it
        ("ok", 2, 3),  # + one repair after the failed build
        ("rejected", 3, 4),  # three builds failed
        ("ok", 2, 3),  # the first Dockerfile named another image: asked again
        ("ok", 1, 2),
    ]
    log = [json.loads(r["attempt_log"]) for r in rows[:5]]
    assert [e["stage"] for e in log[1]] == ["build", "initial_test"]
    assert "preparing" in log[1][0]["error"] and log[1][1]["error"] == ""
    assert rows[2]["reject_reason"].startswith("build_failed:")
    assert [e["stage"] for e in log[2]] == ["build"] * 3
    assert log[3][0]["stage"] == "write" and "'ubuntu:22.04'" in log[3][0]["error"]
    # the repaired Dockerfile kept the build-context file the repair reply did not resend
    assert list(json.loads(rows[1]["context_files"])) == ["seed/input.txt"]
    assert "exit 3" not in rows[1]["dockerfile"]
    assert all(r["dockerfile"].startswith("FROM endless-base:") for r in rows[:5])


def test_stage_three_repairs_a_test_that_passes_on_the_initial_state(batch):
    rows = by_index(batch["lake"], "completion_tests", batch["ids"])
    assert rows[2] is None  # its environment never built
    checks = [
        (r["status"], r["attempts"], r["fails_on_initial"], r["passes_with_reference"])
        for r in (rows[0], rows[1], rows[3], rows[4])
    ]
    assert checks == [
        ("ok", 1, True, True),
        ("ok", 1, True, False),  # the reference fails: recorded, not fatal on the LLM path
        ("ok", 2, True, True),  # round 1 passed on the initial state; repaired in round 2
        ("rejected", 3, False, None),  # passed on the initial state three times
    ]
    assert rows[4]["reject_reason"].startswith("passes_on_initial:")
    assert json.loads(rows[3]["attempt_log"])[0]["error"] == "passes on the initial state"
    assert json.loads(rows[1]["attempt_log"])[-1]["stage"] == "reference_solution"


def test_cost_and_rejections_are_queryable_and_in_the_metadata(batch):
    lake, first = batch["lake"], batch["first"]
    funnel = query(lake, "select stage, entered, survived from funnel order by stage_order")
    assert funnel.rows()[:3] == [
        ("describe", 7, 5),
        ("environment", 5, 4),
        ("completion test", 4, 3),
    ]
    cost = query(
        lake,
        "select 1 s, sum(requests) r from task_descriptions union all "
        "select 2, sum(requests) from task_environments union all "
        "select 3, sum(requests) from completion_tests order by 1",
    )
    assert cost["r"].to_list() == [7, 14, 7]
    # 28 replies were used; the endpoint also answered the 429 and the 500 before one of them
    assert batch["requests"][0] == 28 + 2, first_run_harness_errors(batch)
    meta = first.asset_materializations_for_node("task_descriptions")[0].metadata
    assert meta["llm_requests_sent"].value == 9 and meta["llm_replies_used"].value == 7
    assert "duplicate" in [r.data["reason"] for r in meta["reject_reasons"].records]
    meta = first.asset_materializations_for_node("task_environments")[0].metadata
    assert meta["llm_requests_sent"].value == 14 and meta["tokens_out"].value > 0
    meta = first.asset_materializations_for_node("completion_tests")[0].metadata
    assert meta["requests_per_ok_task"].value == round(
        28 / 3, 1
    )  # the describe, build and validation stages, 3 survive
    assert meta["tokens_out_per_ok_task"].value > 0


def test_a_rerun_sends_no_request_and_reproduces_the_batch(batch):
    assert batch["second"].success
    assert batch["requests"][1] == 0, first_run_harness_errors(batch)
    meta = batch["second"].asset_materializations_for_node("task_descriptions")[0].metadata
    assert meta["llm_cache_hits"].value == 7 and meta["llm_requests_sent"].value == 0
    lake = batch["lake"]
    for table in TABLES:  # same tasks, outcomes, reasons and recorded costs; no duplicates
        assert _outcomes(lake, table) == batch["snapshot"][table], table
    statuses = query(lake, "select status, count(*) n from task_descriptions group by 1")
    assert dict(statuses.rows()) == {"ok": 5, "rejected": 2}


def test_the_api_key_is_sent_but_never_stored(batch):
    server = batch["server"]
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in server.headers)
    stored = [p for p in batch["data_dir"].rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in stored)
    assert any("llm_cache" in p.parts for p in stored)
    assert not [p for p in stored if SECRET.encode() in p.read_bytes()]
    events = str(batch["first"].all_events) + str(batch["second"].all_events)
    assert SECRET not in events


def test_an_endpoint_that_is_down_is_a_harness_error_and_a_refusal_a_rejection(tmp_path, sandbox):
    batch = "2026-04-02"
    model = ScriptedTaskModel(sandbox.base.tag)

    def responder(request):
        if request["seed"] == seed_of(0, batch):
            return Reply(status=503)
        if request["seed"] == seed_of(1, batch):
            return Reply(status=400, body={"error": {"message": "context length exceeded"}})
        return model(request)

    with ScriptedServer(responder) as server:
        result = materialize(tmp_path, server, ["task_descriptions"], 3, batch=batch)
    assert result.success
    rows = Lake(tmp_path).read("task_descriptions", batch).sort("index")
    assert rows["status"].to_list() == ["harness_error", "rejected", "ok"]
    reasons = rows["reject_reason"].to_list()
    assert reasons[0].startswith("harness: LLMUnavailable") and "did not answer" in reasons[0]
    assert reasons[1].startswith("request_refused: the endpoint refused the request")
    assert "context length exceeded" in reasons[1]
    assert len([r for r in server.requests if r["seed"] == seed_of(0, batch)]) == 4  # 1 + 3


def test_the_llm_generator_needs_a_model_name():
    settings = Settings.resolve(generator="llm", generator_model="")
    with pytest.raises(SettingsError, match="ENDLESS_GENERATOR_MODEL"):
        LLMGenerator.from_settings(settings, base_image_tag())


def test_the_llm_generator_runs_many_tasks_at_once_but_bounds_docker():
    settings = Settings.resolve(generator="llm", generator_model="m", workers=3, llm_concurrency=40)
    generator = LLMGenerator.from_settings(settings, base_image_tag())
    assert task_parallelism(generator, settings) == 40
    slot = CpuSlot(max(1, settings.run.workers))  # as PipelineSettings.sandbox() bounds it
    assert slot.count == 3
