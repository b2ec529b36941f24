"""The soundness stage (between stage III and the solver): is each validated task's verdict
stable, and does any shortcut pass its completion test? (stages/soundness.py does the work;
with `auditor_model` set, stages/audit.py adds the model probes.)"""

import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.defs.common import (
    counts_table,
    invariants,
    invariants_check_spec,
    resumable,
    run_parallel,
    schema_check_spec,
    status_metadata,
    timing_metadata,
    validate,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.generation.factory import docker_slots
from endless_assets.models import Task
from endless_assets.sandbox.client import SandboxError
from endless_assets.stages import HARNESS_ERROR, OK
from endless_assets.stages.audit import Auditor, AuditOutcome, audit_task
from endless_assets.stages.rows import frame, soundness_row, tasks_with_tests
from endless_assets.stages.soundness import SoundnessOutcome, check_soundness, with_audit

TABLE = "task_soundness"


def build_task_soundness(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins("task_descriptions", "task_environments", "completion_tests"),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"docker", "parquet"},
        io_manager_key="lake_io_manager",
        pool="docker",
        check_specs=[
            schema_check_spec(TABLE, spec.prefix),
            invariants_check_spec(
                TABLE,
                "every sound task passed every run of the reference (when required) and no run "
                "of the do-nothing control, and no shortcut passed its test",
                spec.prefix,
            ),
        ],
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
        return _materialize(
            context, pipeline, task_descriptions, task_environments, completion_tests, spec
        )

    return task_soundness


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    task_environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    sandbox = pipeline.sandbox()
    generator = spec.generator(settings, sandbox.base.tag)
    started = time.monotonic()
    tasks = tasks_with_tests(task_descriptions, task_environments, completion_tests)
    context.log.info(f"{len(tasks)} tasks enter the soundness stage ({settings.soundness})")
    slots = docker_slots(settings)
    auditor = Auditor.from_settings(settings) if settings.soundness == "full" else None
    skipped = _skipped_audit(settings.soundness, auditor)

    def work(task: Task) -> dict:
        if settings.soundness == "off":
            return soundness_row(task, SoundnessOutcome(task.task_id, OK, audit=skipped))
        with slots:
            build = sandbox.build(task.dockerfile or "", task.context_files)
        if not build.ok:
            raise SandboxError(f"the stage II image no longer builds: {build.log[-500:]}")
        required = generator.reference_required and bool(task.reference_solution.strip())
        outcome = check_soundness(
            task,
            build.tag,
            sandbox,
            repeats=settings.soundness_repeats,
            min_mutation_score=settings.min_mutation_score,
            reference_required=required,
            docker_slots=slots,
            probes=settings.soundness == "full",
        )
        if auditor is None or outcome.status != OK:
            why = "the offline probes did not find the task sound"
            outcome.audit = skipped if auditor is None else AuditOutcome.skipped(why)
            return soundness_row(task, outcome)
        audit = audit_task(task, build.tag, sandbox, auditor, docker_slots=slots)
        return soundness_row(
            task, with_audit(outcome, audit, settings.min_mutation_score, required)
        )

    def failed(task: Task, exc: BaseException) -> dict:
        outcome = SoundnessOutcome(task.task_id, HARNESS_ERROR, reject_reason=f"harness: {exc!r}")
        return soundness_row(task, outcome)

    resume = resumable(pipeline, settings, TABLE, context.partition_key, generator)
    # Each task runs `soundness_repeats` lanes of containers; `workers` bounds them together.
    rows = run_parallel(
        context, tasks, resume.wrap(work), failed, workers=settings.workers, label="soundness"
    )
    table = frame(TABLE, rows)
    check = validate(TABLE, table, spec.prefix, context=context)
    violations = [
        f"{r['task_id']}: ok but {r['hackable'] or 'the do-nothing control'} passed"
        for r in rows
        if r["status"] == OK
        and r["repeats"]
        and (r["hackable"] or r["noop_passes"] or 0 < r["reference_passes"] < r["repeats"])
    ]
    probed = [r for r in rows if r["repeats"]]
    scores = [r["mutation_score"] for r in probed if r["mutation_score"] is not None]
    audited = [r for r in rows if r.get("audit") == "ran"]
    flagged = Counter(p for r in rows for p in r["hackable"].split(",") if p)
    metadata = {
        "funnel_step": "III b. soundness",
        "entered": len(tasks),
        "mode": settings.soundness,
        "recovered_from_journal": len(resume.recovered),
        **status_metadata(table),
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
        **timing_metadata([r["seconds"] for r in rows], time.monotonic() - started),
    }
    if flagged:
        metadata["hackable_probes"] = counts_table(flagged, "probe")
    if auditor is not None:
        metadata["llm_requests_sent"] = auditor.client.requests  # cache hits excluded
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[check, invariants(TABLE, violations, spec.prefix)],
    )


def _skipped_audit(mode: str, auditor: Auditor | None) -> AuditOutcome:
    """Why the model probes do not run for any task of this run ("ran" when they may)."""
    if mode != "full":
        return AuditOutcome.skipped(f"soundness is {mode}")
    if auditor is None:
        return AuditOutcome.skipped("no auditor_model configured")
    return AuditOutcome("ran")


task_soundness = build_task_soundness(GENERATED)
imported_task_soundness = build_task_soundness(IMPORTED)
