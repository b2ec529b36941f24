"""`cell_batches` in SQL over the lake's tables, for a catalog view: the same rows and columns as
`history.cell_batches` (`CELL_BATCH_COLUMNS`), which a test holds it to."""

from __future__ import annotations

# A procedural task's cell needs its truth's level as a JSON integer (or integer string) 1-6;
# an LLM-written task's is its category and complexity; other tasks have none.
CELL_BATCHES_SQL = """
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
    select task_id,
           case when coalesce(model, '') = '' then policy else policy || '/' || model end
               as solver,
           count(reward) as scored_attempts,
           count(*) filter (where reward = 1) as task_successes
    from solver_rollouts group by all
), tasks as (
    select n.batch, a.solver, n.cell, a.scored_attempts, a.task_successes,
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
           count(*) filter (where n.status = 'ok') as described
    from named n left join solvers s using (batch)
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
               as mean_pass_rate
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
       c.mean_pass_rate, coalesce(o.outcomes, '[]') as outcomes
from generated g
left join counts c using (batch, solver, cell)
left join outcomes o using (batch, solver, cell)
order by g.batch, g.solver, g.cell
"""
