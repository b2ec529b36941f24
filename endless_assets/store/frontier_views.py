"""Catalog views of the frontier sampler: `cell_batches` (`schemas.draws.CellBatches`) over the
lake's tables, which `sampling.history.cell_batches` also runs over frames in memory; and
`frontier_batches`, per batch what the draw expected before it next to what was measured after."""

from __future__ import annotations

from endless_assets.solver_id import SolverId

# What making each task cost in tokens (describe to soundness).
MAKING_SQL = """
    select task_id, sum(coalesce(tokens_in, 0) + coalesce(tokens_out, 0)) as tokens
    from (
        select task_id, tokens_in, tokens_out from task_descriptions
        union all select task_id, tokens_in, tokens_out from task_environments
        union all select task_id, tokens_in, tokens_out from completion_tests
        union all select task_id, tokens_in, tokens_out from task_soundness
    )
    group by all"""
# A procedural task's cell needs its truth's level as a JSON integer (or integer string) 1-6;
# an LLM-written task's is its category and complexity; other tasks have none.
_CELL_BATCHES = """
with described as (
    select task_id, batch, status, generator, category, complexity, family,
           json_extract_string(truth, '$.level') as level_text
    from task_descriptions
), cells as (
    select task_id, batch, status, kind,
           case when kind = 'taxonomy' then category end as category,
           case when kind = 'taxonomy' then complexity end as complexity,
           case when kind = 'family' then family end as family,
           case when kind = 'family' then level end as level
    from (
        select *,
               case when regexp_full_match(level_text, '-?[0-9]+')
                    then try_cast(level_text as BIGINT) end as level,
               case when generator = 'procedural' and regexp_full_match(level_text, '-?[0-9]+')
                         and try_cast(level_text as BIGINT) between 1 and 6 then 'family'
                    when generator = 'llm' then 'taxonomy' end as kind
        from described
    )
    where kind is not null
), named as (
    select *, kind || ':' || coalesce(category, family) || ':'
              || coalesce(complexity, level::VARCHAR) as cell
    from cells
), attempts as (
    select task_id, {solver} as solver,
           count(reward) as scored_attempts,
           count(*) filter (where reward = 1) as task_successes,
           coalesce(sum(coalesce(tokens_in, 0) + coalesce(tokens_out, 0)), 0) as rollout_tokens
    from solver_rollouts group by all
), making as ({making}
), tasks as (
    select n.batch, a.solver, n.cell, a.scored_attempts, a.task_successes, a.rollout_tokens,
           coalesce(f.kept, false) as kept
    from named n
    join attempts a using (task_id)
    left join (select task_id, solver_model as solver, kept from filtered_dataset) f
        using (task_id, solver)
), solvers as (
    select distinct batch, solver from tasks
), generated as (
    select n.batch, coalesce(s.solver, '') as solver, n.cell,
           any_value(n.kind) as kind, any_value(n.category) as category,
           any_value(n.complexity) as complexity, any_value(n.family) as family,
           any_value(n.level) as level, count(*) as generated,
           count(*) filter (where n.status = 'ok') as described,
           coalesce(sum(m.tokens), 0) as tokens
    from named n left join solvers s using (batch) left join making m using (task_id)
    group by all
), counts as (
    select batch, solver, cell, count(*) as reached,
           count(*) filter (where scored_attempts > 0) as scored,
           count(*) filter (where kept) as kept,
           count(*) filter (where task_successes > 0 and task_successes < scored_attempts)
               as learnable,
           count(*) filter (where scored_attempts > 0 and task_successes = scored_attempts)
               as all_passed,
           count(*) filter (where scored_attempts > 0 and task_successes = 0) as all_failed,
           sum(scored_attempts) as attempts, sum(task_successes) as successes,
           avg(task_successes / scored_attempts) filter (where scored_attempts > 0)
               as mean_pass_rate,
           sum(rollout_tokens) as rollout_tokens
    from tasks group by all
), outcomes as (
    select batch, solver, cell,
           '[' || string_agg('[' || task_successes || ',' || scored_attempts || ',' || n || ']',
                             ',' order by task_successes, scored_attempts) || ']' as outcomes
    from (
        select batch, solver, cell, task_successes, scored_attempts, count(*) as n
        from tasks where scored_attempts > 0 group by all
    )
    group by all
)
select g.batch, g.solver, g.cell, g.kind, g.category, g.complexity, g.family, g.level,
       g.generated, g.described,
       coalesce(c.reached, 0)::BIGINT as reached, coalesce(c.scored, 0)::BIGINT as scored,
       coalesce(c.kept, 0)::BIGINT as kept, coalesce(c.learnable, 0)::BIGINT as learnable,
       coalesce(c.all_passed, 0)::BIGINT as all_passed,
       coalesce(c.all_failed, 0)::BIGINT as all_failed,
       coalesce(c.attempts, 0)::BIGINT as attempts,
       coalesce(c.successes, 0)::BIGINT as successes,
       c.mean_pass_rate, coalesce(o.outcomes, '[]') as outcomes, g.tokens::BIGINT as tokens,
       coalesce(c.rollout_tokens, 0)::BIGINT as rollout_tokens
from generated g
left join counts c using (batch, solver, cell)
left join outcomes o using (batch, solver, cell)
order by g.batch, g.solver, g.cell
"""


def cell_batches_sql(making: str = MAKING_SQL) -> str:
    """The `cell_batches` query, with `making` (task_id, tokens) what making each task cost."""
    return _CELL_BATCHES.replace("{solver}", SolverId.sql()).replace("{making}", making)


CELL_BATCHES_SQL = cell_batches_sql()

# The draw's expectation for its batch, from its task_draws rows (`Draw.expected`), next to what
# filtered_dataset measured for the solver whose history steered it: the learnable share of the
# kept tasks, learnable per scored task, the mean training signal (worth.signal: 0 unless kept
# and 0 < pass rate < 1) and pass rate of a scored task. Expectations are null at a cold start.
FRONTIER_BATCHES_SQL = """
with drawn as (
    select batch, any_value(mode) as mode, any_value(model) as model,
           any_value(solver) as solver, any_value(target_pass_rate) as target,
           count(*) as tasks, count(distinct cell) as cells,
           count(*) filter (where source = 'uniform') as uniform,
           count(*) filter (where source = 'floor') as floor,
           count(*) filter (where source = 'explore') as explore,
           count(*) filter (where source = 'exploit') as exploit,
           count(*) filter (where source = 'evolve') as evolve,
           avg(uncertainty) filter (where source in ('floor', 'explore')) as explored_uncertainty,
           avg(uncertainty) filter (where source = 'exploit') as exploited_uncertainty,
           sum(survival * learnable_prob) / nullif(sum(survival * kept_prob), 0)
               as expected_learnable_share,
           sum(survival * learnable_prob) / nullif(sum(survival), 0) as expected_learnable,
           sum(survival * signal) / nullif(sum(survival), 0) as expected_signal,
           sum(survival * mean_pass_rate) / nullif(sum(survival), 0) as expected_pass_rate
    from task_draws group by batch
), scored as (
    select f.batch, f.kept, f.successes, f.scored_attempts, d.target,
           f.successes / f.scored_attempts as rate
    from filtered_dataset f join drawn d
        on f.batch = d.batch and (f.solver_model = d.solver or d.solver = '')
    where f.scored_attempts > 0
), measured as (
    select batch, count(*) as scored, count(*) filter (where kept) as kept,
           count(*) filter (where kept and successes > 0 and successes < scored_attempts)
               as learnable,
           avg(case when kept and successes > 0 and successes < scored_attempts
                    then pow(rate / target, 2 * target)
                         * pow((1 - rate) / (1 - target), 2 * (1 - target))
                    else 0 end) as signal,
           avg(rate) as pass_rate
    from scored group by batch
)
select d.batch, d.mode, d.model, d.solver, d.tasks, d.cells, d.uniform, d.floor, d.explore,
       d.exploit, d.evolve, d.explored_uncertainty, d.exploited_uncertainty,
       d.expected_learnable_share,
       case when m.kept > 0 then m.learnable / m.kept end as learnable_share,
       d.expected_learnable,
       case when m.scored > 0 then m.learnable / m.scored end as learnable_per_scored,
       d.expected_signal, m.signal, d.expected_pass_rate, m.pass_rate,
       coalesce(m.scored, 0) as scored, coalesce(m.kept, 0) as kept,
       coalesce(m.learnable, 0) as learnable
from drawn d left join measured m using (batch)
order by d.batch
"""
