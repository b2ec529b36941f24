"""The repair loop the build and validation stages share (no Dagster here): ask the generator, try
what it wrote (the stage's `check`), and on failure ask again with the failure as numbered
feedback, up to its repair rounds. An engine failure in a check is retried (after `recover`) at
most `engine_retries` times without asking the generator again, then the task is a harness
error, never a rejection."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from endless_assets.generation import GenerationError, Usage
from endless_assets.models import HARNESS_ERROR, OK, Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.engine.retry import with_engine_retries
from endless_assets.stages.runner import ENGINE_RETRIES, now

FEEDBACK_LIMIT = 4000  # characters of a build log or test output fed back and logged


@dataclass
class RepairOutcome:
    """What a repaired stage records for one task, whatever it checks."""

    task_id: str
    status: str
    reject_reason: str = ""
    attempts: int = 0
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)

    def row(self, task: Task) -> dict[str, Any]:
        """The task's row: the stage's own `columns()`, then the repair's."""
        return {
            "task_id": task.task_id,
            "batch": task.batch,
            **self.columns(),
            "attempts": self.attempts,
            "attempt_log": json.dumps(self.attempt_log, ensure_ascii=False),
            "seconds": self.seconds,
            "status": self.status,
            "reject_reason": self.reject_reason,
            "requests": self.usage.requests,
            "tokens_in": self.usage.tokens_in,
            "tokens_out": self.usage.tokens_out,
            "created_at": now(),
        }

    def columns(self) -> dict[str, Any]:
        """The columns of what the stage checks (none here)."""
        return {}

    def log(self, stage: str, error: str = "") -> None:
        """One entry of the attempt log, in the current round ("" error: the step passed)."""
        self.attempt_log.append({"round": self.attempts, "stage": stage, "error": error})


@dataclass(frozen=True)
class Failed:
    """A failed check: the reject reason, and what the generator is told next round (None: no
    repair can help, stop)."""

    reason: str
    feedback: str | None = None


Outcome = TypeVar("Outcome", bound=RepairOutcome)
Written = TypeVar("Written")


def repair(
    outcome: Outcome,
    rounds: int,
    write: Callable[[str | None, Written | None], tuple[Written, Usage]],
    check: Callable[[Written], Failed | None],
    unparsable: str,
    *,
    keep_partial: bool = False,
    harness_errors: tuple[type[BaseException], ...] = (SandboxError,),
    engine_retries: int = ENGINE_RETRIES,
    recover: Callable[[], Any] | None = None,
) -> Outcome:
    """Up to `rounds` (at least one) rounds of `write` then `check` (None: passed) into `outcome`.

    `write(feedback, previous)` gets the last failure's numbered feedback and what it wrote last;
    an unusable reply (`GenerationError`) is rejected as `<unparsable>: ...` and fed back
    (`keep_partial`: its usable part becomes `previous`). `harness_errors` end the loop as a
    harness error once `check`'s retries are spent (at once, raised anywhere else)."""
    started = time.monotonic()
    rounds = max(1, rounds)
    feedback: str | None = None
    previous: Written | None = None
    try:
        for round_no in range(1, rounds + 1):
            outcome.attempts = round_no
            try:
                written, usage = write(numbered_feedback(feedback, round_no - 1, rounds), previous)
            except GenerationError as exc:
                outcome.usage.add(exc.usage)
                outcome.log("write", str(exc))
                outcome.reject_reason = f"{unparsable}: {exc}"
                feedback = f"Your previous reply could not be used: {exc}"
                if keep_partial:
                    previous = exc.partial or previous  # type: ignore[assignment]
                continue
            outcome.usage.add(usage)
            previous = written
            failed = with_engine_retries(
                partial(check, written),
                retries=engine_retries,
                recover=recover,
                note=lambda exc, _: outcome.log(
                    "engine", f"retried after an engine failure: {exc}"
                ),
                errors=harness_errors,
            )
            if failed is None:
                outcome.status, outcome.reject_reason = OK, ""
                break
            outcome.reject_reason = failed.reason
            if failed.feedback is None:
                break
            feedback = failed.feedback
    except harness_errors as exc:
        outcome.status = HARNESS_ERROR
        outcome.reject_reason = f"harness: {exc}"
    outcome.seconds = time.monotonic() - started
    return outcome


def numbered_feedback(feedback: str | None, failed_round: int, rounds: int) -> str | None:
    """Feedback that says which attempt failed (how many remain; two rounds that failed alike
    still make different requests, not a cached repeat)."""
    if feedback is None:
        return None
    return f"Attempt {failed_round} of {rounds} did not work. {feedback}"


def cause(output: str, label: str = "output", limit: int = 400) -> str:
    """The end of a failing step's output, on one line, for a reject reason ("" if none): its
    last lines that say something (not pytest's rules and banners)."""
    lines = [
        line.strip()
        for line in output.strip().splitlines()
        if line.strip() and not set(line.strip()) <= set("=_-") and not line.startswith("====")
    ]
    text = " | ".join(lines[-4:])
    if not text:
        return ""
    return f"; {label}: " + (text if len(text) <= limit else "..." + text[-limit:])
