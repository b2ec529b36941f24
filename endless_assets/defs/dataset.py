"""The filtered dataset: pass@k, difficulty and the keep rule, with everything a trainer needs
to rebuild and grade each task."""

import json
import time
from collections import Counter

import dagster as dg
import polars as pl

from endless_assets.agent.factory import policy_factory
from endless_assets.defs.common import (
    invariants,
    invariants_check_spec,
    schema_check_spec,
    task_markdown,
    validate,
)
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, StageSpec
from endless_assets.stages import OK
from endless_assets.stages.filtering import KeepRule, score_task
from endless_assets.stages.rows import frame, now

TABLE = "filtered_dataset"


def build_filtered_dataset(spec: StageSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=spec.key(TABLE),
        ins=spec.ins(
            "task_descriptions", "task_environments", "completion_tests", "solver_rollouts"
        ),
        partitions_def=spec.partitions_def,
        group_name=spec.group_name,
        kinds={"python", "parquet"},
        io_manager_key="lake_io_manager",
        check_specs=[
            schema_check_spec(TABLE, spec.prefix),
            invariants_check_spec(
                TABLE,
                "every kept task was solved at least once and its pass rate is inside the keep "
                "band",
                spec.prefix,
            ),
        ],
        description="One row per task that reached stage IV: successes, pass@k, pass rate "
        "(difficulty), kept or not and why, and the columns needed to rebuild and grade it.",
    )
    def filtered_dataset(
        context: dg.AssetExecutionContext,
        pipeline: PipelineSettings,
        task_descriptions: pl.DataFrame,
        task_environments: pl.DataFrame,
        completion_tests: pl.DataFrame,
        solver_rollouts: pl.DataFrame,
    ):
        return _materialize(
            context,
            pipeline,
            task_descriptions,
            task_environments,
            completion_tests,
            solver_rollouts,
            spec,
        )

    return filtered_dataset


def _materialize(
    context: dg.AssetExecutionContext,
    pipeline: PipelineSettings,
    task_descriptions: pl.DataFrame,
    task_environments: pl.DataFrame,
    completion_tests: pl.DataFrame,
    solver_rollouts: pl.DataFrame,
    spec: StageSpec,
) -> dg.MaterializeResult:
    settings = pipeline.resolve()
    started = time.monotonic()
    probe = policy_factory(settings)()
    rule = KeepRule(settings.min_pass_rate, settings.max_pass_rate)
    solver = f"{probe.name}/{probe.model}" if probe.model else probe.name
    rollouts = solver_rollouts.filter(
        (pl.col("policy") == probe.name)
        & (pl.col("model") == probe.model)
        & (pl.col("rollout_idx") < settings.attempts)
    )
    tests = {r["task_id"]: r for r in completion_tests.filter(pl.col("status") == OK).to_dicts()}
    envs = {r["task_id"]: r for r in task_environments.to_dicts()}
    by_task: dict[str, list[dict]] = {}
    for r in rollouts.to_dicts():
        by_task.setdefault(r["task_id"], []).append(r)
    rows = []
    for task in task_descriptions.to_dicts():
        tid = task["task_id"]
        if tid not in tests:
            continue
        score = score_task(by_task.get(tid, []))
        kept, reason = rule.decide(score.n, score.successes)
        env = envs[tid]
        rows.append(
            {
                "task_id": tid,
                "batch": task["batch"],
                "solver_model": solver,
                "solver_policy": probe.name,
                "attempts": score.attempts,
                "harness_errors": score.harness_errors,
                "k": score.n,
                "successes": score.successes,
                "pass_at_k": score.pass_at_k,
                "pass_at_curve": json.dumps([round(p, 6) for p in score.curve]),
                "pass_rate": score.pass_rate,
                "mean_turns_solved": score.mean_turns_solved,
                "kept": kept,
                "drop_reason": reason,
                **{
                    key: task[key]
                    for key in (
                        "category",
                        "complexity",
                        "scenario",
                        "family",
                        "instruction",
                        "truth",
                        "reference_solution",
                        "generator",
                        "generator_model",
                        "prompt_version",
                    )
                },
                "dockerfile": env["dockerfile"],
                "context_files": env["context_files"],
                "initial_test": env["initial_test"],
                "image_tag": env["image_tag"],
                "completion_test": tests[tid]["completion_test"],
                "created_at": now(),
            }
        )
    table = frame(TABLE, rows)
    check = validate(TABLE, table, spec.prefix)
    violations = [
        f"{r['task_id']}: kept with {r['successes']} successes and pass rate {r['pass_rate']:.2f}"
        for r in rows
        if r["kept"]
        and (r["successes"] < 1 or not rule.min_pass_rate <= r["pass_rate"] <= rule.max_pass_rate)
    ]
    kept_rows = [r for r in rows if r["kept"]]
    reasons = Counter(r["drop_reason"].split(": ", 1)[0] for r in rows if not r["kept"])
    metadata = {
        "funnel_step": "IV. solver filter",
        "entered": len(rows),
        "kept": len(kept_rows),
        "dropped": len(rows) - len(kept_rows),
        "solver": solver,
        "keep_rule": rule.describe(),
        "mean_pass_rate": round(sum(r["pass_rate"] for r in rows) / len(rows), 3) if rows else 0.0,
        "wall_seconds": round(time.monotonic() - started, 2),
    }
    if reasons:
        metadata["drop_reasons"] = dg.MetadataValue.md(
            "| reason | tasks |\n|---|---|\n"
            + "\n".join(f"| {r} | {n} |" for r, n in reasons.most_common())
        )
    if kept_rows:
        metadata["sample_task"] = dg.MetadataValue.md(task_markdown(kept_rows[0]))
    return dg.MaterializeResult(
        value=table,
        metadata=metadata,
        check_results=[check, invariants(TABLE, violations, spec.prefix)],
    )


filtered_dataset = build_filtered_dataset(GENERATED)
