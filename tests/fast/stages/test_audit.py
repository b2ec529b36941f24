"""The soundness stage's model probes, piece by piece: judges' replies are read tolerantly, an
unreadable verdict is asked again and then left `unclear`, an endpoint that is down is a harness
error and never a rejection, and a rebuilt Dockerfile shares no cached layer.

The model is the scripted auditor over real HTTP with the real `openai` client; the Dagster runs
are in test_soundness_pipeline.py.
"""

from __future__ import annotations

import pytest

from endless_assets.generation.parsing import ParseError
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.models import HARNESS_ERROR, OK, Task
from endless_assets.settings import Settings
from endless_assets.stages.drift import REBUILD_ARG, fresh_dockerfile
from endless_assets.stages.soundness.audit import Auditor, AuditOutcome, audit_task
from endless_assets.stages.soundness.audit_replies import (
    ALIGNED,
    DONE,
    MISALIGNED,
    NOT_DONE,
    AuditPrompts,
    parse_verdict,
    trajectory_text,
)
from endless_assets.stages.soundness.stage import SoundnessOutcome, with_audit
from endless_assets.testing.scripted_auditor import ISSUE, ScriptedAuditor
from endless_assets.testing.scripted_model import ScriptedTask
from endless_assets.testing.scripted_server import Reply, ScriptedServer

SEED = 4242
SECRET = "sk-endless-auditor-secret-42"


def scripted_task(seed: int = SEED) -> Task:
    script = ScriptedTask.from_seed(seed)
    return Task(
        batch="test-audit",
        index=0,
        seed=seed,
        category="text processing",
        complexity="easy",
        scenario="test",
        instruction=script.instruction(),
        truth={"text": script.truth()},
        reference_solution=script.solution(),
        dockerfile="FROM endless-base:unused\n",
        completion_test=script.completion_test(),
        generator="test",
    )


def auditor_for(server: ScriptedServer, retries: int = 1) -> Auditor:
    endpoint = Endpoint(
        model="scripted-auditor",
        base_url=server.base_url,
        api_key_envs=("ENDLESS_AUDITOR_API_KEY",),
        retries=retries,
        backoff=0.01,
    )
    return Auditor(ChatClient(endpoint))


@pytest.mark.parametrize(
    ("reply", "choices", "verdict"),
    [
        ("<analysis>fine</analysis>\n<verdict>done</verdict>", (DONE, NOT_DONE), DONE),
        ("<VERDICT> Not Done </VERDICT>", (DONE, NOT_DONE), NOT_DONE),
        ("<verdict>**`not-done`**</verdict>", (DONE, NOT_DONE), NOT_DONE),
        (
            "```\n<analysis>x</analysis>\n<verdict>misaligned</verdict>\n```",
            (ALIGNED, MISALIGNED),
            MISALIGNED,
        ),
        (
            "<think>maybe <verdict>done</verdict>?</think>\nVerdict: not done, it faked it",
            (DONE, NOT_DONE),
            NOT_DONE,
        ),
        ("Analysis: the test is fine.\n\nVerdict: aligned.", (ALIGNED, MISALIGNED), ALIGNED),
        ("</think>\n<verdict>done because the file is right</verdict>", (DONE, NOT_DONE), DONE),
    ],
)
def test_a_judges_verdict_is_read_through_reasoning_fences_and_formatting(reply, choices, verdict):
    assert parse_verdict(reply, choices).verdict == verdict


@pytest.mark.parametrize(
    "reply", ["I think it is fine.", "<verdict>maybe</verdict>", "<think><verdict>done</verdict>"]
)
def test_a_reply_without_a_usable_verdict_is_unparsable(reply):
    with pytest.raises(ParseError):
        parse_verdict(reply, (DONE, NOT_DONE))


def test_the_judgements_reasoning_is_its_analysis_else_its_thinking():
    parsed = parse_verdict(
        "<analysis>\nIt copied the input.\n</analysis>\n<issues>\n- a\n- none\n</issues>\n"
        "<verdict>misaligned</verdict>",
        (ALIGNED, MISALIGNED),
    )
    assert parsed.reasoning == "It copied the input." and parsed.issues == ["a"]
    thought = parse_verdict("<verdict>done</verdict>", (DONE, NOT_DONE), thinking="I checked.")
    assert thought.reasoning == "I checked."


def test_a_long_trajectory_keeps_its_start_and_end_for_the_judge():
    turns = [
        {"index": i, "kind": "command", "command": f"echo {i}", "output": "x" * 5000}
        for i in range(30)
    ] + [{"index": 30, "kind": "done"}]
    text = trajectory_text(turns, "passed")
    assert len(text) < 26_000 and "echo 0" in text and text.endswith("completion test: passed ---")
    assert "chars left out" in text and "more chars]" in text


def test_a_rebuilt_dockerfile_declares_a_new_build_argument_after_each_from():
    dockerfile = "FROM a AS one\nRUN echo \\\n  FROM inside\nFROM b\nCOPY x /x\n"
    rebuilt = fresh_dockerfile(dockerfile, "n1").splitlines()
    assert rebuilt == [
        "FROM a AS one",
        f"ARG {REBUILD_ARG}=n1",
        "RUN echo \\",
        "  FROM inside",
        "FROM b",
        f"ARG {REBUILD_ARG}=n1",
        "COPY x /x",
    ]
    assert fresh_dockerfile(dockerfile, "n2") != fresh_dockerfile(dockerfile, "n1")


def test_an_unreadable_verdict_is_asked_again_then_counted_once_more():
    auditor_model = ScriptedAuditor({SEED: {"unparsable_once", "misaligned", "think"}})
    with ScriptedServer(auditor_model) as server:
        auditor = auditor_for(server)
        prompts = AuditPrompts.load()
        request = prompts.render(
            "alignment", instruction="do it", truth="t", completion_test="def test(): pass"
        )
        judgement = auditor.judge(
            "alignment", "alignment_system", request, (ALIGNED, MISALIGNED), SEED
        )
    assert (judgement.verdict, judgement.requests, judgement.issues) == (MISALIGNED, 2, [ISSUE])
    assert "previous reply could not be used" in server.requests[1]["messages"][1]["content"]
    assert "Let me weigh this" not in judgement.reasoning  # the <analysis>, not the thinking


def test_a_verdict_never_readable_is_unclear_and_rejects_nothing():
    with ScriptedServer(lambda request: Reply("Hard to say.")) as server:
        auditor = auditor_for(server)
        outcome = AuditOutcome("ran", judgements=[])
        outcome.judgements.append(
            auditor.judge("alignment", "alignment_system", "x", (ALIGNED, MISALIGNED), SEED)
        )
    assert outcome.judgements[0].verdict == "unclear" and len(server.requests) == 2
    assert outcome.reasons() == [] and outcome.aligned is None


def test_an_endpoint_that_is_down_is_a_harness_error_after_bounded_retries(monkeypatch):
    monkeypatch.setenv("ENDLESS_AUDITOR_API_KEY", SECRET)
    with ScriptedServer(lambda request: Reply(status=503)) as server:
        auditor = auditor_for(server, retries=2)
        audit = audit_task(scripted_task(), "no-image-needed", None, auditor)  # no container
    assert len(server.requests) == 3  # the first try and two retries, then no more
    assert audit.harness_error and "did not answer" in audit.state and SECRET not in audit.state
    outcome = with_audit(SoundnessOutcome("et-x", OK, repeats=3, reference_runs=0), audit)
    assert outcome.status == HARNESS_ERROR and outcome.reject_reason.startswith("harness:")
    assert outcome.row()["audit"].startswith("harness_error")


def test_no_auditor_model_means_no_model_probes():
    assert Auditor.from_settings(Settings.resolve(auditor_model="")) is None
    auditor = Auditor.from_settings(
        Settings.resolve(auditor_model="judge", solver_base_url="http://127.0.0.1:9/v1")
    )
    assert auditor is not None and auditor.client.endpoint.base_url == "http://127.0.0.1:9/v1"
    assert auditor.client.endpoint.api_key_envs[0] == "ENDLESS_AUDITOR_API_KEY"


def test_a_reference_judge_is_asked_the_same_requests_and_its_agreement_is_measured():
    request = AuditPrompts.load().render(
        "alignment", instruction="do it", truth="t", completion_test="def test(): pass"
    )
    choices = (ALIGNED, MISALIGNED)
    # The judge finds every test aligned; the stronger reference flags seed 7's.
    with (
        ScriptedServer(ScriptedAuditor()) as judge,
        ScriptedServer(ScriptedAuditor({7: {"misaligned"}})) as strong,
    ):
        auditor = auditor_for(judge)
        auditor.reference = auditor_for(strong)
        agree, differ = AuditOutcome("ran"), AuditOutcome("ran")
        auditor.judged(agree, "alignment", "alignment_system", request, choices, SEED)
        auditor.judged(differ, "alignment", "alignment_system", request, choices, 7)
    assert [j.probe for j in differ.judgements] == ["alignment", "alignment_reference"]
    assert (agree.judge_agreement, differ.judge_agreement) == (1.0, 0.0)
    assert differ.aligned is True and differ.reasons() == []  # the judge decides, not the reference
    assert (
        len(strong.requests) == 2
        and strong.requests[0]["messages"] == judge.requests[0]["messages"]
    )
    assert differ.columns()["judge_agreement"] == 0.0


def test_a_reference_judge_that_is_down_leaves_the_task_decided_and_uncalibrated():
    request = "Is this test aligned?"
    with (
        ScriptedServer(ScriptedAuditor()) as judge,
        ScriptedServer(lambda r: Reply(status=503)) as down,
    ):
        auditor = auditor_for(judge)
        auditor.reference = auditor_for(down)
        outcome = AuditOutcome("ran")
        auditor.judged(outcome, "alignment", "alignment_system", request, (ALIGNED, MISALIGNED), 1)
    assert outcome.judgements[1].verdict == "unclear" and not outcome.harness_error
    assert outcome.judge_agreement is None


def test_the_reference_judge_comes_from_the_settings_with_its_own_key():
    settings = Settings.resolve(
        auditor_model="judge",
        auditor_base_url="http://127.0.0.1:9/v1",
        reference_judge_model="strong",
    )
    auditor = Auditor.from_settings(settings)
    assert auditor is not None and auditor.reference is not None
    reference = auditor.reference.client.endpoint
    assert (reference.model, reference.base_url) == ("strong", "http://127.0.0.1:9/v1")
    assert reference.api_key_envs[0] == "ENDLESS_REFERENCE_JUDGE_API_KEY"
    assert Auditor.from_settings(Settings.resolve(auditor_model="judge")).reference is None
