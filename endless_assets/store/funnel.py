"""The funnel, defined once: the steps from described to kept, in order, each with its table and
what counts there as survived, rejected and a harness error, and why a task dropped out. The
`funnel` and `funnel_reasons` stats views are generated from it (stats_views.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step: SQL conditions over its table's rows."""

    name: str
    table: str
    survived: str = "status = 'ok'"
    rejected: str = "status = 'rejected'"
    harness_errors: str = "status = 'harness_error'"
    reason: str = "reject_reason"  # why a task that did not survive dropped out, `kind: detail`
    shown: str = ""  # when the step has a row (always, when empty)


FUNNEL: tuple[Step, ...] = (
    Step("describe", "task_descriptions"),
    # A step of its own where reference sets were checked against.
    Step(
        "decontamination",
        "task_decontamination",
        shown="count(*) filter (where reference_sets <> '') > 0",
    ),
    Step("environment", "task_environments"),
    Step("completion test", "completion_tests"),
    Step("soundness", "task_soundness", shown="count(*) > 0"),  # a step where it ran
    Step(
        "solver filter",
        "filtered_dataset",
        survived="kept",
        rejected="not kept and scored_attempts > 0",
        harness_errors="scored_attempts = 0",
        reason="drop_reason",
    ),
)
TABLES = tuple(step.table for step in FUNNEL)
COUNTS = ("entered", "survived", "rejected", "harness_errors")  # per step, in this order


def funnel_sql() -> str:
    """How many tasks entered each step and survived it, and why the others did not: a stats
    template (`{key}` groups the rows, `{where}` filters them)."""
    arms = [
        f"select {{key}} as batch, {order} as stage_order, '{step.name}' as stage, "
        "count(*) as entered, "
        f"count(*) filter (where {step.survived}) as survived, "
        f"count(*) filter (where {step.rejected}) as rejected, "
        f"count(*) filter (where {step.harness_errors}) as harness_errors "
        f"from {step.table} where {{where}} group by all"
        + (f" having {step.shown}" if step.shown else "")
        for order, step in enumerate(FUNNEL, 1)
    ]
    union = "\nunion all\n".join(arms)
    return f"with stages as (\n{union}\n)\nselect * from stages order by batch, stage_order"


def funnel_overall_sql() -> str:
    """The `funnel` view's steps summed over every batch."""
    sums = ", ".join(f"sum({n})::BIGINT as {n}" for n in COUNTS)
    return (
        f"select stage_order, stage, {sums} from funnel "
        "group by stage_order, stage order by stage_order"
    )


def funnel_reasons_sql() -> str:
    """Per step, each reason tasks dropped out for (the part of the reason before `: `), with how
    many and an example: a stats template like `funnel_sql`'s."""
    arms = [
        f"select batch, {order} as stage_order, '{step.name}' as stage, "
        f"split_part({step.reason}, ': ', 1) as reason, {step.reason} as detail "
        f"from {step.table} where not ({step.survived})"
        for order, step in enumerate(FUNNEL, 1)
    ]
    union = "\nunion all\n".join(arms)
    return (
        "select {key} as batch, stage_order, stage, reason, count(*) as tasks, "
        f"any_value(detail) as example\nfrom (\n{union}\n)\n"
        "where {where} group by all order by batch, stage_order, tasks desc"
    )
