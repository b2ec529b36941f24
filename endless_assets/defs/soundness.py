"""The soundness stage (between stage III and the solver): is each validated task's verdict
stable, and does any shortcut pass its completion test? (stages/soundness/stage.py does the work;
with `auditor_model` set, stages/soundness/audit.py adds the model probes.)"""

from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.defs.common import counts_table
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageRun, StageSpec
from endless_assets.models import OK, Task
from endless_assets.stages.rows import soundness_row, tasks_with_tests
from endless_assets.stages.soundness.audit import Auditor, AuditOutcome, audit_task
from endless_assets.stages.soundness.stage import SoundnessOutcome, check_soundness, with_audit

TABLE = "task_soundness"


def build_task_soundness(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_environments", "completion_tests"],
        invariant="every sound task passed every run of the reference (when required) and no "
        "run of the do-nothing control, and no shortcut passed its test",
        description="Soundness: for every task whose completion test stage III validated, the "
        "reference and the do-nothing control run `soundness_repeats` times (flaky verdicts), "
        "shortcut probes try to pass the test without doing the task (hackable), and one-step "
        "ablations of the reference measure the test's strength (mutation score); with "
        "`auditor_model` set, an alignment audit and a judged cheat rollout (model probes).",
    )
    def task_soundness(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
    ):
        tasks = tasks_with_tests(task_descriptions, task_environments, completion_tests)
        earlier = dict(
            zip(
                completion_tests["task_id"].to_list(),
                completion_tests["passes_with_reference"].to_list(),
                strict=True,
            )
        )
        return _materialize(StageRun(context, pipeline, spec, TABLE), tasks, earlier)

    return task_soundness


def _materialize(
    run: StageRun, tasks: list[Task], earlier: dict[str, bool | None]
) -> dg.MaterializeResult:
    """`earlier`: whether each task's reference passed stage III's run (soundness.py)."""
    settings = run.settings
    run.context.log.info(
        f"{len(tasks)} tasks enter the soundness stage ({settings.soundness.mode})"
    )
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
    rows = run.each(
        tasks,
        work,
        soundness_row,
        SoundnessOutcome,
        label="soundness",
        workers=settings.run.workers,
    )
    table = run.frame(rows)
    violations = [
        f"{r['task_id']}: ok but {r['hackable'] or 'the do-nothing control'} passed"
        for r in rows
        if r["status"] == OK
        and r["repeats"]
        and (r["hackable"] or r["noop_passes"] or 0 < r["reference_passes"] < r["reference_runs"])
    ]
    probed = [r for r in rows if r["repeats"]]
    scores = [r["mutation_score"] for r in probed if r["mutation_score"] is not None]
    audited = [r for r in rows if r.get("audit") == "ran"]
    flagged = Counter(p for r in rows for p in r["hackable"].split(",") if p)
    metadata = {
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
        metadata["hackable_probes"] = counts_table(flagged, "probe")
    if auditor is not None:
        metadata["llm_requests_sent"] = auditor.client.requests  # cache hits excluded
        if auditor.reference is not None:
            metadata["reference_judge"] = auditor.reference.model
            metadata["reference_requests_sent"] = auditor.reference.client.requests
            agreement = table["judge_agreement"].drop_nulls()
            if len(agreement):
                metadata["judge_agreement"] = round(float(agreement.mean()), 3)
    return run.result(table, violations, funnel_step="III b. soundness", metadata=metadata)


def _skipped_audit(mode: str, auditor: Auditor | None) -> AuditOutcome:
    """Why the model probes do not run for any task of this run ("ran" when they may)."""
    if mode != "full":
        return AuditOutcome.skipped(f"soundness is {mode}")
    if auditor is None:
        return AuditOutcome.skipped("no auditor_model configured")
    return AuditOutcome("ran")


task_soundness = build_task_soundness(GENERATED)
imported_task_soundness = build_task_soundness(IMPORTED)
