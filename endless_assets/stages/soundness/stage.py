"""Soundness: is the completion test's verdict stable, and does any shortcut pass it?

1. Repeated controls: the do-nothing episode and the reference each run `repeats` times (first in
   a fresh container in some lanes, after the other control in others), plus the validation
   stage's run of the reference (`earlier_reference`); any disagreement is `flaky: ...`.
2. Shortcut probes (probes.py): end states that never do the task. One the test passes (confirmed
   in a fresh container) is `hackable: <probe>`; passing after doing nothing is `hackable:
   do-nothing`.
3. Test strength: the reference with each top-level step removed in turn; the share rejected is
   the mutation score, `weak_test: ...` below `min_mutation_score`.
4. With a model (audit.py), for a task found sound: `misaligned: ...` and `hackable: cheat`.

lanes.py runs them; engine failures end as `harness_error`, never as a rejection.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from endless_assets.agent.episode import EpisodeLimits
from endless_assets.models import HARNESS_ERROR, OK, REJECTED, Task
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.stages.completion import CHECK_LIMITS
from endless_assets.stages.runner import now
from endless_assets.stages.soundness.audit import Auditor, AuditOutcome, audit_task
from endless_assets.stages.soundness.lanes import CONTROL, REFERENCE, LaneRun, ProbeOutcome
from endless_assets.stages.soundness.probes import ABLATION, SHORTCUT
from endless_assets.stages.stage_run import Counts, StageResult, StageRun
from endless_assets.stages.tasks import tasks_with_tests

__all__ = ["AuditOutcome", "ProbeOutcome", "SoundnessOutcome", "check_soundness", "with_audit"]

DO_NOTHING = "do-nothing"


@dataclass
class SoundnessOutcome:
    task_id: str
    status: str
    reject_reason: str = ""
    repeats: int = 0
    reference_runs: int = 0
    reference_passes: int = 0
    noop_runs: int = 0
    noop_passes: int = 0
    probes: list[ProbeOutcome] = field(default_factory=list)
    hackable: list[str] = field(default_factory=list)  # shortcuts that passed, confirmed
    ablations_run: int = 0
    ablations_rejected: int = 0
    mutation_score: float | None = None
    containers: int = 0
    engine_retries: int = 0
    seconds: float = 0.0
    cpu_seconds: float | None = None  # the containers' own CPU (None: cgroups not visible)
    audit: AuditOutcome = field(default_factory=lambda: AuditOutcome.skipped("not run"))
    # The validation stage's run of the reference (None: not known), counted with the repeated ones
    earlier_reference: bool | None = None

    def decide(self, min_mutation_score: float = 0.0, reference_required: bool = True) -> None:
        """Tally the probes and set status and reason (again, e.g. with another keep band). The
        first code found is the reason; the details of that code are joined."""
        self.reference_runs = self.reference_passes = self.noop_runs = self.noop_passes = 0
        self.ablations_run = self.ablations_rejected = 0
        self.hackable, self.mutation_score = [], None
        for p in self.probes:
            if p.kind == CONTROL and p.name.startswith(REFERENCE):
                self.reference_runs += 1
                self.reference_passes += bool(p.passed)
            elif p.kind == CONTROL:
                self.noop_runs += 1
                self.noop_passes += bool(p.passed)
            elif p.kind == ABLATION and p.passed is not None:
                self.ablations_run += 1
                self.ablations_rejected += not p.passed
            elif p.kind == SHORTCUT and p.passed and p.confirmed:
                self.hackable.append(p.name)
        runs, ref, noop = self.repeats, self.reference_passes, self.noop_passes
        if self.ablations_run and ref == runs:
            self.mutation_score = self.ablations_rejected / self.ablations_run
        if self.earlier_reference is not None:  # every run of the same check is evidence
            self.reference_runs += 1
            self.reference_passes += self.earlier_reference
        reasons: list[tuple[str, str]] = []
        ref_runs, ref = self.reference_runs, self.reference_passes
        if 0 < ref < ref_runs:
            included = " (the validation stage's run included)" * (
                self.earlier_reference is not None
            )
            reasons.append(("flaky", f"reference passed {ref} of {ref_runs}{included}"))
        if 0 < noop < runs:
            reasons.append(("flaky", f"{DO_NOTHING} passed {noop} of {runs}"))
        if ref == 0 and reference_required:
            reasons.append(("reference_fails", f"the reference passed 0 of {ref_runs} runs"))
        if noop == runs:
            reasons.append(("hackable", DO_NOTHING))
        reasons += [("hackable", name) for name in self.hackable]
        reasons += self.audit.reasons()  # the model probes: hackable: cheat, ...
        self.hackable += [detail for code, detail in self.audit.reasons() if code == "hackable"]
        score = self.mutation_score
        if score is not None and score < min_mutation_score:
            reasons.append(
                ("weak_test", f"mutation score {score:.2f} below {min_mutation_score:.2f}")
            )
        if self.audit.harness_error:
            self.status, self.reject_reason = HARNESS_ERROR, f"harness: {self.audit.state}"
            return
        if not reasons:
            self.status, self.reject_reason = OK, ""
            return
        code = reasons[0][0]
        self.status = REJECTED
        self.reject_reason = f"{code}: " + ", ".join(d for c, d in reasons if c == code)

    @property
    def shortcuts_run(self) -> int:
        return sum(1 for p in self.probes if p.kind == SHORTCUT and p.passed is not None)

    @property
    def shortcuts_passed(self) -> int:
        return sum(1 for p in self.probes if p.kind == SHORTCUT and p.passed)

    def probes_json(self) -> str:
        return json.dumps([asdict(p) for p in self.probes], ensure_ascii=False)

    def row(self, task: Task | None = None) -> dict[str, Any]:
        """One flat row: scalars only, the probes as JSON; `task_soundness`'s row of `task`
        (its batch, when made) when given."""
        made = {"batch": task.batch, "created_at": now()} if task is not None else {}
        return {
            "task_id": self.task_id,
            **made,
            "status": self.status,
            "reject_reason": self.reject_reason,
            "repeats": self.repeats,
            "reference_runs": self.reference_runs,
            "reference_passes": self.reference_passes,
            "noop_runs": self.noop_runs,
            "noop_passes": self.noop_passes,
            "shortcuts_run": self.shortcuts_run,
            "shortcuts_passed": self.shortcuts_passed,
            "hackable": ",".join(self.hackable),
            "ablations_run": self.ablations_run,
            "ablations_rejected": self.ablations_rejected,
            "mutation_score": self.mutation_score,
            "containers": self.containers,
            "engine_retries": self.engine_retries,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "probes": self.probes_json(),
            **self.audit.columns(),
        }


def with_audit(
    outcome: SoundnessOutcome,
    audit: AuditOutcome,
    min_mutation_score: float = 0.0,
    reference_required: bool = True,
) -> SoundnessOutcome:
    """`outcome` with the model probes' results (stages/soundness/audit.py) attached and decided
    again (an engine failure of the offline probes stays what it was)."""
    outcome.audit = audit
    if outcome.status != HARNESS_ERROR:
        outcome.decide(min_mutation_score, reference_required)
    return outcome


def check_soundness(
    task: Task,
    image_tag: str,
    sandbox: Sandbox,
    *,
    repeats: int = 3,
    min_mutation_score: float = 0.0,
    reference_required: bool = True,
    limits: EpisodeLimits = CHECK_LIMITS,
    engine_retries: int = 2,
    probes: bool = True,
    earlier_reference: bool | None = None,
) -> SoundnessOutcome:
    """Run the controls, shortcut probes and ablations of `task` in containers of `image_tag`,
    each lane holding one CPU slot for its life. `reference_required=False` (the LLM path) accepts
    a reference that fails every run (the solver decides solvability); one that passes some runs
    is flaky either way. `probes=False`: the repeated controls only (drift re-validation)."""
    started = time.monotonic()
    outcome = SoundnessOutcome(task_id=task.task_id, status=REJECTED, repeats=max(1, repeats))
    outcome.earlier_reference = earlier_reference
    if not task.completion_test:
        outcome.reject_reason = "no_completion_test: the validation stage left the task without one"
        return outcome
    run = LaneRun(
        task, image_tag, sandbox, limits=limits, engine_retries=engine_retries, probes=probes
    )
    try:
        run.run_lanes(outcome.repeats)
        run.confirm(outcome.repeats)
    except SandboxError as exc:
        outcome.status = HARNESS_ERROR
        outcome.reject_reason = f"harness: {exc}"
    order = [CONTROL, SHORTCUT, ABLATION]
    outcome.probes = sorted(run.results, key=lambda p: (order.index(p.kind), p.name))
    outcome.containers, outcome.engine_retries = run.containers, run.retries
    outcome.cpu_seconds = run.cpu
    if outcome.status != HARNESS_ERROR:
        outcome.decide(min_mutation_score, reference_required)
    outcome.seconds = time.monotonic() - started
    return outcome


def run_soundness(
    run: StageRun,
    descriptions: pl.DataFrame,
    environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
) -> StageResult:
    """The soundness stage over the validated tasks (with `auditor_model` and soundness `full`,
    the model probes too)."""
    settings = run.settings
    tasks = tasks_with_tests(descriptions, environments, completion_tests)
    earlier = dict(completion_tests.select("task_id", "passes_with_reference").iter_rows())
    run.log.info(f"{len(tasks)} tasks enter the soundness stage ({settings.soundness.mode})")
    auditor = Auditor.from_settings(settings) if settings.soundness.mode == "full" else None
    skipped = _skipped_audit(settings.soundness.mode, auditor)

    def work(task: Task) -> SoundnessOutcome:
        if settings.soundness.mode == "off":
            return SoundnessOutcome(task.task_id, OK, audit=skipped)
        image = run.image(task)
        required = run.generator.reference_required and bool(task.reference_solution.strip())
        outcome = check_soundness(
            task,
            image,
            run.sandbox,
            repeats=settings.soundness.repeats,
            min_mutation_score=settings.keep.min_mutation_score,
            reference_required=required,
            probes=settings.soundness.mode == "full",
            earlier_reference=earlier.get(task.task_id),
        )
        if auditor is None or outcome.status != OK:
            why = "the offline probes did not find the task sound"
            outcome.audit = skipped if auditor is None else AuditOutcome.skipped(why)
            return outcome
        audit = audit_task(task, image, run.sandbox, auditor)
        return with_audit(outcome, audit, settings.keep.min_mutation_score, required)

    # Each task runs `soundness_repeats` lanes of containers; `workers` bounds them together.
    rows = run.each(tasks, work, SoundnessOutcome, label="soundness", workers=settings.run.workers)
    violations = [
        f"{r['task_id']}: ok but {r['hackable'] or 'the do-nothing control'} passed"
        for r in rows
        if r["status"] == OK
        and r["repeats"]
        and (r["hackable"] or r["noop_passes"] or 0 < r["reference_passes"] < r["reference_runs"])
    ]
    scores = [r["mutation_score"] for r in rows if r["repeats"] and r["mutation_score"] is not None]
    audited = [r for r in rows if r.get("audit") == "ran"]
    flagged = Counter(p for r in rows for p in r["hackable"].split(",") if p)
    metadata: dict[str, Any] = {
        "mode": settings.soundness.mode,
        "mean_mutation_score": round(sum(scores) / len(scores), 3) if scores else None,
        "containers": int(sum(r["containers"] for r in rows)),
        "cpu_seconds": round(sum(r["cpu_seconds"] or 0.0 for r in rows), 2),
        "model_probes": auditor.model if auditor else skipped.state,
        "audited": len(audited),
        "cheats_passed": sum(bool(r["cheat_passed"]) for r in audited),
        "misaligned": sum(r["aligned"] is False for r in audited),
        "llm_requests": sum(r["requests"] or 0 for r in rows),  # journaled rows may lack it
        "tokens_in": sum(r["tokens_in"] or 0 for r in rows),
        "tokens_out": sum(r["tokens_out"] or 0 for r in rows),
    }
    if flagged:
        metadata["hackable_probes"] = Counts(flagged, "probe")
    if auditor is not None:
        metadata["llm_requests_sent"] = auditor.client.requests  # cache hits excluded
        if auditor.reference is not None:
            metadata["reference_judge"] = auditor.reference.model
            metadata["reference_requests_sent"] = auditor.reference.client.requests
            agreement = [r["judge_agreement"] for r in rows if r.get("judge_agreement") is not None]
            if agreement:
                metadata["judge_agreement"] = round(sum(agreement) / len(agreement), 3)
    return run.result(rows, violations, funnel_step="soundness", **metadata)


def _skipped_audit(mode: str, auditor: Auditor | None) -> AuditOutcome:
    """Why the model probes do not run for any task of this run ("ran" when they may)."""
    if mode != "full":
        return AuditOutcome.skipped(f"soundness is {mode}")
    if auditor is None:
        return AuditOutcome.skipped("no auditor_model configured")
    return AuditOutcome("ran")
