"""The soundness stage (between the validation stage and the solver): is each validated task's
verdict stable, and does any shortcut pass its completion test? (stages/soundness/stage.py does the
work; with `auditor_model` set, stages/soundness/audit.py adds the model probes.)"""

import dagster as dg
import polars as pl

from endless_assets.defs.common import stage_result
from endless_assets.defs.resources import PipelineSettings
from endless_assets.defs.stage_spec import GENERATED, IMPORTED, StageSpec
from endless_assets.stages.soundness.stage import run_soundness

TABLE = "task_soundness"


def build_task_soundness(spec: StageSpec) -> dg.AssetsDefinition:
    @spec.asset(
        TABLE,
        ["task_descriptions", "task_environments", "completion_tests"],
        invariant="every sound task passed every run of the reference (when required) and no "
        "run of the do-nothing control, and no shortcut passed its test",
        description="Soundness: for every task whose completion test the validation stage "
        "validated, the "
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
        run = spec.run(context, pipeline, TABLE)
        result = run_soundness(run, task_descriptions, task_environments, completion_tests)
        return stage_result(context, result, spec.prefix)

    return task_soundness


task_soundness = build_task_soundness(GENERATED)
imported_task_soundness = build_task_soundness(IMPORTED)
