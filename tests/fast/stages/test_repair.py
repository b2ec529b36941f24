"""The repair loop the build and validation stages share (stages/repair.py), on scripted replies and
checks: no Docker needed. The stages' own checks are tested on real Docker in test_stages.py."""

from __future__ import annotations

from endless_assets.generation import Environment, GenerationError, Usage
from endless_assets.sandbox.containers.startup import ContainerExited
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.stages.repair import Failed, RepairOutcome, cause, repair


def scripted(replies):
    """A generator call that answers from a list and records what it was asked."""
    asked = []

    def write(feedback, previous):
        asked.append((feedback, previous))
        reply = replies[len(asked) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply, Usage(requests=1, tokens_in=10, tokens_out=2)

    return write, asked


def checked_by(verdicts):
    """A check that logs one step per round and fails or passes as told."""
    outcome = RepairOutcome("t1", "rejected")

    def check(written):
        verdict = verdicts.pop(0)
        outcome.log("try", "" if verdict is None else f"{written} failed")
        return verdict

    return outcome, check


def test_a_failed_round_is_fed_back_numbered_and_the_next_round_can_pass():
    write, asked = scripted(["a", "b"])
    outcome, check = checked_by([Failed("broken: a", "it broke"), None])
    repair(outcome, 3, write, check, unparsable="unparsable")
    assert outcome.status == "ok" and outcome.reject_reason == "" and outcome.attempts == 2
    assert asked == [(None, None), ("Attempt 1 of 3 did not work. it broke", "a")]
    assert outcome.attempt_log == [
        {"round": 1, "stage": "try", "error": "a failed"},
        {"round": 2, "stage": "try", "error": ""},
    ]
    assert (outcome.usage.requests, outcome.usage.tokens_in) == (2, 20)


def test_the_last_failure_is_the_reject_reason_when_no_round_passes():
    write, _ = scripted(["a", "b"])
    outcome, check = checked_by([Failed("first: a", "x"), Failed("second: b", "y")])
    repair(outcome, 2, write, check, unparsable="unparsable")
    assert (outcome.status, outcome.reject_reason, outcome.attempts) == ("rejected", "second: b", 2)


def test_an_unusable_reply_is_logged_charged_and_fed_back():
    error = GenerationError("no code block", usage=Usage(requests=1, tokens_in=5))
    write, asked = scripted([error, "b"])
    outcome, check = checked_by([None])
    repair(outcome, 2, write, check, unparsable="environment_unparsable")
    assert outcome.status == "ok"
    assert outcome.attempt_log[0] == {"round": 1, "stage": "write", "error": "no code block"}
    assert asked[1][0] == (
        "Attempt 1 of 2 did not work. Your previous reply could not be used: no code block"
    )
    assert (outcome.usage.requests, outcome.usage.tokens_in) == (2, 15)
    write, _ = scripted([error])
    outcome, check = checked_by([])
    repair(outcome, 1, write, check, unparsable="environment_unparsable")
    assert outcome.reject_reason == "environment_unparsable: no code block"


def test_what_an_unusable_reply_left_usable_is_kept_only_when_asked():
    partial = Environment("", {}, "def test_x(): pass\n")
    for keep, previous in ((True, partial), (False, None)):
        write, asked = scripted([GenerationError("no Dockerfile", partial=partial), "b"])
        outcome, check = checked_by([None])
        repair(outcome, 2, write, check, unparsable="u", keep_partial=keep)
        assert asked[1][1] == previous


def test_a_failure_without_feedback_stops_the_repairs():
    write, asked = scripted(["a", "b"])
    outcome, check = checked_by([Failed("reference_fails: exit 1")])
    repair(outcome, 3, write, check, unparsable="u")
    assert (outcome.status, outcome.attempts, len(asked)) == ("rejected", 1, 1)
    assert outcome.reject_reason == "reference_fails: exit 1"


def test_an_engine_failure_is_a_harness_error_not_a_rejection_after_bounded_retries():
    write, asked = scripted(["a"])
    outcome = RepairOutcome("t1", "rejected")
    checks, recovered = [], []

    def check(written):
        checks.append(written)
        raise SandboxError("the engine went away")

    repair(outcome, 3, write, check, "u", engine_retries=2, recover=lambda: recovered.append(1))
    assert outcome.status == "harness_error"
    assert outcome.reject_reason == "harness: the engine went away"
    assert (checks, len(recovered), len(asked)) == (["a", "a", "a"], 2, 1)


def test_an_engine_that_fails_once_is_retried_and_the_task_passes_without_a_new_reply():
    write, asked = scripted(["a"])
    outcome = RepairOutcome("t1", "rejected")
    failures = [SandboxError("a start the engine dropped")]

    def check(written):
        if failures:
            raise failures.pop()
        return None

    repair(outcome, 3, write, check, "u", engine_retries=2)
    assert (outcome.status, outcome.attempts, len(asked)) == ("ok", 1, 1)
    assert outcome.attempt_log == [
        {
            "round": 1,
            "stage": "engine",
            "error": "retried after an engine failure: a start the engine dropped",
        }
    ]


def test_a_container_its_own_image_stopped_is_not_retried():
    write, _ = scripted(["a"])
    outcome = RepairOutcome("t1", "rejected")
    checks = []

    def check(written):
        checks.append(written)
        raise ContainerExited("the ENTRYPOINT exited")

    repair(outcome, 3, write, check, "u", engine_retries=2)
    assert (outcome.status, checks) == ("harness_error", ["a"])


def test_the_cause_is_the_end_of_the_output_without_pytest_banners():
    output = "===== FAILURES =====\nE   assert 1 == 2\n________\nshort summary\n"
    assert cause(output) == "; output: E   assert 1 == 2 | short summary"
    assert cause("  \n====\n") == ""
    assert cause("x" * 500, "log", limit=10) == "; log: ..." + "x" * 10
