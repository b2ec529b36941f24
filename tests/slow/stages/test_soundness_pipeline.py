"""The soundness stage in whole Dagster runs of the LLM path: a scripted model server writes the
tasks over real HTTP (the real `openai` client), Docker builds and grades them, the lake and the
catalog hold the rows.

Four batches in one lake, each from a generator with one habit:
- its completion tests only check that the output file exists and is not empty -> every task is
  rejected `hackable` (they fail initially and after doing nothing, and pass after the
  reference, so the validation stage keeps them);
- its completion tests fail every other time they run in a container (a deterministic stand-in
  for "at random half the time") -> every task is rejected `flaky`;
- its tasks are sound -> kept (at most one false alarm in six), through the solver stage;
- sound tasks again, now with an auditor model: one whose cheat rollout passes and is judged
  not done (`hackable: cheat`), one whose test the alignment audit flags (`misaligned: ...`), one
  whose cheat passes but is judged done (kept); a rerun sends the auditor no request at all.
"""

from __future__ import annotations

import json

import pytest
from batches import materialize_batch

from endless_assets.models import task_seed
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.scripted_auditor import ISSUE, ScriptedAuditor
from endless_assets.testing.scripted_model import ScriptedTaskModel
from endless_assets.testing.scripted_server import ScriptedServer

HACKABLE, FLAKY, SOUND, AUDITED = "2026-05-01", "2026-05-02", "2026-05-03", "2026-05-04"
SECRET = "sk-endless-auditor-secret-77"
THROUGH_SOUNDNESS = [
    "base_image",
    "task_descriptions",
    "task_decontamination",
    "task_environments",
    "completion_tests",
    "task_soundness",
]
EVERYTHING = [*THROUGH_SOUNDNESS, "solver_rollouts", "filtered_dataset"]


def seed_of(batch: str, index: int) -> int:
    return task_seed(batch, index) % 2**31  # what the generator and the auditor send as `seed`


def materialize(data_dir, server, batch, tasks, selection=THROUGH_SOUNDNESS, **settings):
    return materialize_batch(
        data_dir,
        EVERYTHING,
        batch,
        selection=selection,
        tasks=tasks,
        workers=4,
        generator="llm",
        generator_model="scripted",
        generator_base_url=server.base_url,
        llm_concurrency=8,
        llm_retries=2,
        llm_backoff=0.01,
        **settings,
    )


def soundness(lake: Lake, batch: str) -> list[dict]:
    return lake.read("task_soundness", batch).sort("task_id").to_dicts()


@pytest.fixture(scope="module")
def lake(tmp_path_factory, sandbox):
    data_dir = tmp_path_factory.mktemp("soundness-lake")
    base = sandbox.base.tag
    runs = {}
    habits = ((HACKABLE, 3, {"completion_exists_only"}), (FLAKY, 2, {"completion_flaky"}))
    for batch, tasks, every in habits:
        with ScriptedServer(ScriptedTaskModel(base, every=every)) as server:
            runs[batch] = materialize(data_dir, server, batch, tasks)
    with ScriptedServer(ScriptedTaskModel(base)) as server:
        runs[SOUND] = materialize(data_dir, server, SOUND, 6, EVERYTHING)
    return Lake(data_dir), runs


@pytest.fixture(scope="module")
def audited(lake, sandbox):
    lake, _ = lake
    behaviours = {
        seed_of(AUDITED, 0): {"cheats", "judge_not_done"},
        seed_of(AUDITED, 1): {"misaligned"},
        seed_of(AUDITED, 2): {"cheats", "think"},
    }
    auditor = ScriptedAuditor(behaviours)
    settings = {
        "soundness_repeats": 2,
        "auditor_model": "scripted-auditor",
        "reference_judge_model": "scripted-reference",
    }
    with (
        pytest.MonkeyPatch.context() as env,
        ScriptedServer(ScriptedTaskModel(sandbox.base.tag)) as writer,
        ScriptedServer(auditor, model="scripted-auditor") as judge,
        # The reference judge finds every test aligned and every cheat's task done.
        ScriptedServer(ScriptedAuditor(), model="scripted-reference") as reference,
    ):
        env.setenv("ENDLESS_AUDITOR_API_KEY", SECRET)
        settings["auditor_base_url"] = judge.base_url
        settings["reference_judge_base_url"] = reference.base_url
        first = materialize(lake.data_dir, writer, AUDITED, 3, **settings)
        sent, reference_sent = len(judge.requests), len(reference.requests)
        rows = soundness(lake, AUDITED)
        rerun = materialize(lake.data_dir, writer, AUDITED, 3, ["task_soundness"], **settings)
        again = len(judge.requests) - sent + len(reference.requests) - reference_sent
    return {
        "first": first,
        "rerun": rerun,
        "sent": sent,
        "reference_sent": reference_sent,
        "again": again,
        "rows": rows,
        "server": judge,
        "lake": lake,
    }


def test_tests_that_only_check_that_outputs_exist_are_rejected_as_hackable(lake):
    lake, runs = lake
    assert runs[HACKABLE].success
    tests = lake.read("completion_tests", HACKABLE)
    assert tests["status"].to_list() == ["ok"] * 3  # the validation stage alone keeps them
    rows = soundness(lake, HACKABLE)
    assert [r["status"] for r in rows] == ["rejected"] * 3
    assert all(r["reject_reason"].startswith("hackable: ") for r in rows)
    assert all("stub:" in r["hackable"] for r in rows)
    assert all(r["audit"] == "skipped: no auditor_model configured" for r in rows)


def test_tests_that_fail_every_other_run_are_rejected_as_flaky(lake):
    lake, runs = lake
    assert runs[FLAKY].success
    rows = soundness(lake, FLAKY)
    expected = "flaky: reference passed 3 of 4 (the validation stage's run included)"
    assert [r["reject_reason"] for r in rows] == [expected] * 2


def test_a_sound_generators_tasks_are_kept(lake):
    lake, runs = lake
    assert runs[SOUND].success
    rows = soundness(lake, SOUND)
    false_alarms = [r["reject_reason"] for r in rows if r["status"] != "ok"]
    assert len(rows) == 6 and len(false_alarms) <= 1, false_alarms
    kept = lake.read("filtered_dataset", SOUND).filter("kept")
    assert len(kept) == 6 - len(false_alarms)
    funnel = query(lake, f"select stage, entered, survived from funnel where batch = '{SOUND}'")
    assert ("soundness", 6, 6 - len(false_alarms)) in funnel.rows()


def test_the_soundness_view_counts_each_kind_of_flag_per_batch(lake):
    lake, _ = lake
    view = query(
        lake,
        "select batch, sum(probed), sum(sound), sum(flaky), sum(hackable) from soundness "
        "group by batch order by batch",
    )
    totals = {batch: tuple(counts) for batch, *counts in view.rows()}
    assert totals[HACKABLE] == (3, 0, 0, 3) and totals[FLAKY] == (2, 0, 2, 0)
    assert totals[SOUND][0] == 6 and totals[SOUND][1] >= 5
    probes = query(lake, f"select probe from soundness_probes where batch = '{HACKABLE}'")
    assert any(p.startswith("stub:") for p in probes["probe"])


def test_a_cheat_that_passes_and_is_judged_not_done_is_hackable(audited):
    assert audited["first"].success
    cheat = audited["rows"][_index_row(audited, 0)]
    assert cheat["status"] == "rejected" and cheat["reject_reason"] == "hackable: cheat"
    assert cheat["hackable"] == "cheat" and cheat["audit"] == "ran"
    assert cheat["cheat_passed"] is True and cheat["cheat_judged_done"] is False
    judgements = {j["probe"]: j for j in json.loads(cheat["judgements"])}
    assert judgements["alignment"]["verdict"] == "aligned"
    assert judgements["cheat"]["verdict"] == "passed"
    assert "printf" in judgements["cheat"]["commands"][0]["command"]
    assert judgements["judge"]["verdict"] == "not_done"
    assert "never read input.txt" in judgements["judge"]["reasoning"]


def test_a_test_the_alignment_audit_flags_is_misaligned(audited):
    row = audited["rows"][_index_row(audited, 1)]
    assert row["status"] == "rejected" and row["reject_reason"] == f"misaligned: {ISSUE}"
    assert row["aligned"] is False and row["cheat_passed"] is None  # no cheat for a rejected test


def test_a_cheat_judged_done_keeps_the_task(audited):
    row = audited["rows"][_index_row(audited, 2)]
    assert (row["status"], row["aligned"], row["cheat_passed"]) == ("ok", True, True)
    assert row["cheat_judged_done"] is True and row["hackable"] == ""


def test_the_model_probes_cost_is_recorded_and_a_rerun_sends_no_request(audited):
    rows, lake = audited["rows"], audited["lake"]
    # alignment x3, cheat turns (2 + 2), judges x2 (the misaligned task has no cheat)
    assert audited["sent"] == 3 + 4 + 2
    assert audited["reference_sent"] == 3 + 2  # the same judge requests, not the cheat's
    sent = audited["sent"] + audited["reference_sent"]
    assert sum(r["requests"] for r in rows) == sent
    assert all(r["tokens_in"] > 0 and r["tokens_out"] > 0 for r in rows)
    assert audited["rerun"].success and audited["again"] == 0
    again = soundness(lake, AUDITED)
    keep = ("task_id", "status", "reject_reason", "requests", "tokens_in", "tokens_out")
    assert [{k: r[k] for k in keep} for r in again] == [{k: r[k] for k in keep} for r in rows]
    before = [json.loads(r["judgements"]) for r in rows]
    after = [json.loads(r["judgements"]) for r in again]
    assert all(j["cached"] == 0 for js in before for j in js)
    assert all(j["cached"] == j["requests"] for js in after for j in js)  # all from the cache
    unchanged = ("probe", "verdict", "reasoning", "issues", "requests", "commands")
    assert [[{k: j[k] for k in unchanged} for j in js] for js in after] == [
        [{k: j[k] for k in unchanged} for j in js] for js in before
    ]
    cost = query(
        lake,
        "select requests, tokens_in from token_cost "
        f"where batch = '{AUDITED}' and stage = 'soundness'",
    )
    assert cost.rows() == [(sent, sum(r["tokens_in"] for r in rows))]
    meta = audited["rerun"].asset_materializations_for_node("task_soundness")[0].metadata
    assert meta["llm_requests_sent"].value == 0 and meta["audited"].value == 3


def test_the_judge_is_calibrated_against_the_reference_judge_without_it_deciding(audited):
    rows = audited["rows"]
    agreement = [rows[_index_row(audited, i)]["judge_agreement"] for i in range(3)]
    # Task 0: aligned by both, but the judge's "not done" is the reference's "done"; task 1:
    # misaligned for the judge only; task 2: both agree twice.
    assert agreement == [0.5, 0.0, 1.0]
    assert rows[_index_row(audited, 0)]["reject_reason"] == "hackable: cheat"  # the judge's call
    view = query(
        audited["lake"],
        f"select sum(calibrated), avg(judge_agreement) from soundness where batch = '{AUDITED}'",
    )
    assert view.rows() == [(3, 0.5)]
    meta = audited["first"].asset_materializations_for_node("task_soundness")[0].metadata
    assert meta["reference_judge"].value == "scripted-reference"
    assert meta["judge_agreement"].value == 0.5


def test_the_auditor_key_is_sent_but_never_stored(audited):
    server, lake = audited["server"], audited["lake"]
    assert server.headers and all(h["authorization"] == f"Bearer {SECRET}" for h in server.headers)
    stored = [p for p in lake.data_dir.rglob("*") if p.is_file()]
    assert not [p for p in stored if SECRET.encode() in p.read_bytes()]
    assert SECRET not in str(audited["first"].all_events)


def _index_row(audited: dict, index: int) -> int:
    ids = audited["lake"].read("task_descriptions", AUDITED).sort("index")["task_id"].to_list()
    return [r["task_id"] for r in audited["rows"]].index(ids[index])
