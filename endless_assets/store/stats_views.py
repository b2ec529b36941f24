"""The stats views' SQL, written once: the catalog creates them as views, `endless stats` and the
report run the same templates over chosen batches."""

from __future__ import annotations

from endless_assets.models import DIFFICULTY_THRESHOLDS
from endless_assets.solver_id import SolverId
from endless_assets.store.failure_modes import failure_mode_sql
from endless_assets.store.frontier_views import CELL_BATCHES_SQL, FRONTIER_BATCHES_SQL
from endless_assets.store.funnel import funnel_overall_sql, funnel_reasons_sql, funnel_sql
from endless_assets.store.schemas.costs import COST_ESTIMATES_SQL


def difficulty_sql(rate: str, attempts: str) -> str:
    cases = " ".join(
        f"when {rate} >= {floor} then '{label}'" for label, floor in DIFFICULTY_THRESHOLDS
    )
    return (
        f"case when {attempts} = 0 or {rate} is null then 'unknown' {cases} "
        f"when {rate} > 0 then 'hard' else 'unsolved' end"
    )


SOLVER_SQL = SolverId.sql()  # as filtered_dataset.solver_model names the solver
GENERATOR_SQL = (
    "case when coalesce(generator_model, '') = '' then generator "
    "else generator || '/' || generator_model end"
)
# What became of one rollout; rows older than that column: the rule of store/failure_modes.py.
FAILURE_MODE_SQL = f"coalesce(failure_mode, {failure_mode_sql()})"

# Stats views, written once as templates: `{key}` groups the rows (the batch in the catalog's
# views; a constant when `endless stats` sums batches), `{where}` filters them. They name the
# columns they use (never `select *` across tables): columns added to the tables change nothing.
STATS_TEMPLATES: dict[str, str] = {
    # The funnel: how many tasks entered and survived each step, and why the others did not.
    "funnel": funnel_sql(),
    "funnel_reasons": funnel_reasons_sql(),
    # Category x complexity: how many were described, reached the filter, were kept.
    "category_mix": """
        with described as (
            select {key} as batch, category, complexity, count(*) as described
            from task_descriptions where status = 'ok' and {where} group by all
        ), filtered as (
            select {key} as batch, category, complexity, count(*) as reached_filter,
                   count(*) filter (where kept) as kept,
                   avg(pass_rate) filter (where scored_attempts > 0) as mean_pass_rate
            from filtered_dataset where {where} group by all
        )
        select batch, category, complexity, coalesce(described, 0) as described,
               coalesce(reached_filter, 0) as reached_filter, coalesce(kept, 0) as kept,
               mean_pass_rate
        from described full outer join filtered using (batch, category, complexity)
        order by batch, kept desc, described desc, category, complexity
    """,
    # Soundness per category: tasks probed, flagged (flaky, hackable, weak test), test strength.
    "soundness": """
        select {key} as batch, category, count(*) as checked,
               count(*) filter (where repeats > 0) as probed,
               count(*) filter (where status = 'ok') as sound,
               count(*) filter (where starts_with(reject_reason, 'flaky:')) as flaky,
               count(*) filter (where starts_with(reject_reason, 'hackable:')) as hackable,
               count(*) filter (where starts_with(reject_reason, 'weak_test:')) as weak_test,
               count(*) filter (where starts_with(reject_reason, 'reference_fails:'))
                   as reference_fails,
               count(*) filter (where status = 'harness_error') as harness_errors,
               count(mutation_score) as scored_strength,
               avg(mutation_score) as mean_mutation_score,
               min(mutation_score) as min_mutation_score,
               count(*) filter (where mutation_score = 1) as full_strength,
               count(*) filter (where mutation_score < 0.5) as weak_strength,
               count(*) filter (where audit = 'ran') as audited,
               count(*) filter (where cheat_passed) as cheats_passed,
               count(*) filter (where cheat_judged_done = false) as cheats_judged_hacks,
               count(*) filter (where starts_with(reject_reason, 'misaligned:')) as misaligned,
               count(judge_agreement) as calibrated,
               avg(judge_agreement) as judge_agreement,
               coalesce(sum(requests), 0)::BIGINT as audit_requests
        from task_soundness
        join (select batch, task_id, category from task_descriptions) using (batch, task_id)
        where {where} group by all order by batch, category
    """,
    # Which shortcut probes passed completion tests (each task counted once per probe).
    "soundness_probes": """
        select {key} as batch, probe, count(*) as tasks
        from (select batch, unnest(string_split(hackable, ',')) as probe
              from task_soundness where hackable <> '')
        where {where} group by all order by batch, tasks desc, probe
    """,
    # Kept tasks re-validated on a freshly rebuilt image (defs/drift.py): which no longer pass.
    "drift": """
        select {key} as batch, count(*) as kept, count(d.status) as checked,
               count(*) filter (where d.status = 'valid') as still_valid,
               count(*) filter (where d.status = 'drifted') as drifted,
               count(*) filter (where d.status = 'harness_error') as harness_errors,
               count(*) filter (where starts_with(d.reason, 'build_failed:')) as build_failed,
               count(*) filter (where starts_with(d.reason, 'reference_fails:'))
                   as reference_fails,
               count(*) filter (where starts_with(d.reason, 'flaky:')) as flaky,
               count(*) filter (where starts_with(d.reason, 'hackable:')) as passes_undone,
               max(d.created_at) as last_checked
        from (select batch, task_id from filtered_dataset where kept)
        left join (select batch, task_id, status, reason, created_at from drift_revalidation) d
            using (batch, task_id)
        where {where} group by all order by batch
    """,
    # One row per task and solver: scored attempts, successes, pass rate, difficulty.
    "task_pass_rates": f"""
        select batch, task_id, {SOLVER_SQL} as solver,
               count(reward)::BIGINT as attempts,
               count(*) filter (where reward = 1) as successes,
               count(*) filter (where reward is null) as harness_errors,
               case when count(reward) > 0
                    then count(*) filter (where reward = 1) / count(reward) end as pass_rate,
               {{difficulty}} as difficulty
        from solver_rollouts where {{where}} group by batch, task_id, policy, model
    """,
    # The difficulty distribution per solver: tasks per label and per pass-rate bin.
    "difficulty": """
        select {key} as batch, solver, difficulty, count(*) as tasks,
               case difficulty when 'easy' then 1 when 'medium' then 2 when 'hard' then 3
                               when 'unsolved' then 4 else 5 end as difficulty_order
        from task_pass_rates where {where} group by all order by batch, solver, difficulty_order
    """,
    "pass_rate_histogram": """
        select {key} as batch, solver,
               least(floor(pass_rate * 10), 10)::INTEGER / 10.0 as bin_low,
               count(*) as tasks
        from task_pass_rates where attempts > 0 and {where}
        group by all order by batch, solver, bin_low
    """,
    # Failure modes per solver: each rollout counted once, under its failure mode.
    "failure_modes": f"""
        select {{key}} as batch, {SOLVER_SQL} as solver, policy, model,
               {FAILURE_MODE_SQL} as failure_mode,
               count(*) as rollouts, count(distinct task_id) as tasks,
               avg(n_turns) as mean_turns, avg(command_diversity) as mean_command_diversity,
               avg(case when loop_detected then 1.0 else 0.0 end) as loop_share,
               coalesce(sum(invalid_turns), 0)::BIGINT as invalid_turns,
               coalesce(sum(command_timeouts), 0)::BIGINT as command_timeouts
        from solver_rollouts where {{where}} group by all order by batch, solver, rollouts desc
    """,
    "turns_per_episode": f"""
        select {{key}} as batch, {SOLVER_SQL} as solver, n_turns, count(*) as rollouts,
               count(*) filter (where reward = 1) as successes
        from solver_rollouts where reward is not null and {{where}}
        group by all order by batch, solver, n_turns
    """,
    # Tokens per stage, and per task kept.
    "token_cost": """
        with stages as (
            select {key} as batch, 1 as stage_order, 'describe' as stage,
                   sum(requests) as requests, sum(tokens_in) as tokens_in,
                   sum(tokens_out) as tokens_out
            from task_descriptions where {where} group by all
            union all
            select {key}, 2, 'environment', sum(requests), sum(tokens_in), sum(tokens_out)
            from task_environments where {where} group by all
            union all
            select {key}, 3, 'completion test', sum(requests), sum(tokens_in),
                   sum(tokens_out)
            from completion_tests where {where} group by all
            union all
            select {key}, 4, 'soundness', coalesce(sum(requests), 0),
                   coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)
            from task_soundness where {where} group by all having count(*) > 0
            union all
            select {key}, 5, 'solver rollouts',
                   coalesce(sum(n_turns) filter (where tokens_in + tokens_out > 0), 0),
                   sum(tokens_in), sum(tokens_out)
            from solver_rollouts where {where} group by all
        ), kept as (
            select {key} as batch, count(*) filter (where kept) as kept_tasks
            from filtered_dataset where {where} group by all
        )
        select batch, stage_order, stage, requests::BIGINT as requests,
               tokens_in::BIGINT as tokens_in, tokens_out::BIGINT as tokens_out,
               (tokens_in + tokens_out)::BIGINT as tokens, coalesce(kept_tasks, 0) as kept_tasks,
               case when kept_tasks > 0 then (tokens_in + tokens_out) / kept_tasks end
                   as tokens_per_kept_task
        from stages left join kept using (batch)
        order by batch, stage_order
    """,
    # The learnable share: kept tasks the solver solved in some of its attempts but not all
    # (0 < pass rate < 1, the ones an RL update learns from), and what each cost: every token
    # and every second of every stage's work on the batch's tasks (kept or not), per learnable.
    "learnable": """
        with scores as (
            select {key} as batch, solver_model as solver,
                   count(*) filter (where scored_attempts > 0) as scored,
                   count(*) filter (where kept) as kept,
                   count(*) filter (where kept and successes > 0
                                    and successes < scored_attempts) as learnable
            from filtered_dataset where {where} group by all
        ), costs as (
            select {key} as batch, coalesce(sum(tokens), 0)::BIGINT as tokens,
                   coalesce(sum(seconds), 0)::DOUBLE as stage_seconds
            from (
                select batch, tokens_in + tokens_out as tokens, 0.0 as seconds
                from task_descriptions
                union all
                select batch, tokens_in + tokens_out, seconds from task_environments
                union all
                select batch, tokens_in + tokens_out, seconds from completion_tests
                union all
                select batch, coalesce(tokens_in, 0) + coalesce(tokens_out, 0), seconds
                from task_soundness
                union all
                select batch, tokens_in + tokens_out, seconds from solver_rollouts
            )
            where {where} group by all
        )
        select batch, solver, scored, kept, learnable,
               case when kept > 0 then learnable / kept end as learnable_share,
               tokens, stage_seconds,
               case when learnable > 0 then tokens / learnable end as tokens_per_learnable,
               case when learnable > 0 then stage_seconds / learnable end
                   as seconds_per_learnable
        from scores left join costs using (batch)
        order by batch, solver
    """,
    # Models side by side: who wrote tasks and how many survived; who solved them and how well.
    "generator_models": f"""
        with described as (
            select {{key}} as batch, task_id, {GENERATOR_SQL} as generator, status,
                   tokens_in + tokens_out as tokens
            from task_descriptions where {{where}}
        ), env as (
            select task_id, status = 'ok' as built, tokens_in + tokens_out as tokens
            from task_environments
        ), tests as (
            select task_id, status = 'ok' as validated, tokens_in + tokens_out as tokens
            from completion_tests
        ), kept as (
            select task_id, kept from filtered_dataset
        )
        select d.batch, d.generator, count(*) as sampled,
               count(*) filter (where d.status = 'ok') as described,
               count(*) filter (where env.built) as built,
               count(*) filter (where tests.validated) as validated,
               count(*) filter (where kept.kept) as kept,
               (sum(d.tokens) + coalesce(sum(env.tokens), 0)
                + coalesce(sum(tests.tokens), 0))::BIGINT as tokens
        from described d
        left join env using (task_id) left join tests using (task_id)
        left join kept using (task_id)
        group by all order by d.batch, kept desc
    """,
    "solver_models": f"""
        select {{key}} as batch, {SOLVER_SQL} as solver, count(distinct task_id) as tasks,
               count(distinct task_id) filter (where reward = 1) as solved_tasks,
               count(*) as rollouts, count(reward) as scored,
               count(*) filter (where reward = 1) as successes,
               avg(reward) as success_rate, avg(n_turns) as mean_turns,
               avg(case when loop_detected then 1.0 else 0.0 end) as loop_rate,
               avg(command_diversity) as mean_command_diversity,
               (sum(tokens_in) + sum(tokens_out)) / count(*) as tokens_per_rollout
        from solver_rollouts where {{where}} group by all order by batch, success_rate desc
    """,
    # Decontamination: one row per hit (a field of a task found in a benchmark task), from the
    # pipeline's check and from later rechecks; and per batch, how many were checked and found.
    "contamination": """
        select {key} as batch, task_id, checked, h.reference_set, h.reference_task, h.field,
               h.measure, h.value as score
        from (
            select batch, task_id, 'pipeline' as checked, hits from task_decontamination
            union all
            select batch, task_id, 'recheck', hits from contamination_recheck
        ) as checks,
        unnest(from_json(hits, '[{"reference_set": "VARCHAR", "reference_task": "VARCHAR",
                                  "field": "VARCHAR", "measure": "VARCHAR",
                                  "value": "DOUBLE"}]')) as t(h)
        where {where}
        order by batch, task_id, score desc
    """,
    "decontamination": """
        select {key} as batch, checked, any_value(reference_sets) as reference_sets,
               any_value(thresholds) as thresholds, count(*) as checked_tasks,
               count(*) filter (where status = 'rejected') as contaminated,
               count(*) filter (where status = 'rejected') / count(*) as contaminated_share,
               max(created_at) as last_checked
        from (
            select batch, 'pipeline' as checked, reference_sets, thresholds, status, created_at
            from task_decontamination
            union all
            select batch, 'recheck', reference_sets, thresholds, status, created_at
            from contamination_recheck
        )
        where {where} and reference_sets <> ''
        group by all order by batch, checked
    """,
    "model_matrix": f"""
        with tasks as (
            select p.batch, p.solver, p.successes, p.pass_rate, {GENERATOR_SQL} as generator
            from task_pass_rates p join task_descriptions d using (task_id)
            where p.attempts > 0
        )
        select {{key}} as batch, generator, solver, count(*) as tasks,
               count(*) filter (where successes > 0) as solved_tasks,
               avg(pass_rate) as mean_pass_rate
        from tasks where {{where}}
        group by all order by batch, generator, solver
    """,
    "cost_estimates": COST_ESTIMATES_SQL,  # the estimate before each run beside the cost
}


def render_stats_sql(name: str, *, key: str = "batch", where: str = "true") -> str:
    """A stats view's query, grouped by `key` over the rows `where` selects."""
    # `attempts` there counts scored attempts only (count(reward) skips harness errors' nulls).
    sql = STATS_TEMPLATES[name].replace("{difficulty}", difficulty_sql("pass_rate", "attempts"))
    return sql.replace("{key}", key).replace("{where}", where)


STATS_VIEWS: dict[str, str] = {
    "funnel": render_stats_sql("funnel"),
    "funnel_overall": funnel_overall_sql(),
    **{name: render_stats_sql(name) for name in STATS_TEMPLATES if name != "funnel"},
    # Per batch, solver and cell: what was drawn, described, scored, kept, learnable, and the
    # pass rates' distribution (frontier_views.py; what the describe stage's draw reads); per batch,
    # what the draw expected before it next to what was measured after.
    "cell_batches": CELL_BATCHES_SQL,
    "frontier_batches": FRONTIER_BATCHES_SQL,
}
