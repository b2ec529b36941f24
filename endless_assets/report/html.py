"""`endless report`: one self-contained HTML file about the dataset (inline CSS, SVG charts and a
few lines of JavaScript: it opens offline and can be mailed as it is). Every piece of task text is
escaped.
"""

from __future__ import annotations

import datetime as dt
from html import escape
from pathlib import Path
from typing import Any

import polars as pl

from endless_assets.models import difficulty_label
from endless_assets.report.frontier import (
    calibration_chart,
    learnable_chart,
    learnable_per_batch,
    lineages,
)
from endless_assets.report.svg import hbar, vbar
from endless_assets.report.tables import (
    batch_filter,
    check_batches,
    draws_per_batch,
    headline,
    stats_query,
    stats_tables,
)
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

TEXT_LIMIT = 20_000

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{margin-bottom:.2rem} h2{margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.sub{color:#666} .cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{border:1px solid #ddd;border-radius:6px;padding:.6rem .9rem;min-width:8rem}
.card b{display:block;font-size:1.5rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums} th{background:#f5f5f5}
.legend{font-size:.85rem;margin:.3rem 0 1rem} .key{margin-right:1rem}
.key i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
details{border:1px solid #ddd;border-radius:6px;margin:.4rem 0;padding:.4rem .7rem}
summary{cursor:pointer} pre{background:#f7f7f7;padding:.6rem;overflow-x:auto;font-size:.82rem;
white-space:pre-wrap} .tag{background:#eef;border-radius:4px;padding:0 .35rem;margin-left:.3rem;
font-size:.8rem} .empty{color:#999} #filter{padding:.3rem;width:22rem}
"""

SCRIPT = """
function filterTasks(){
  var q=document.getElementById('filter').value.toLowerCase();
  var c=document.getElementById('category').value;
  var shown=0;
  document.querySelectorAll('details.task').forEach(function(d){
    var ok=(!c||d.dataset.category===c)&&(!q||d.textContent.toLowerCase().indexOf(q)>=0);
    d.style.display=ok?'':'none'; if(ok){shown++;}
  });
  document.getElementById('shown').textContent=shown;
}
"""


def _cell(value: Any) -> str:
    if value is None:
        return "<td></td>"
    if isinstance(value, float):
        return (
            f"<td class='n'>{value:.3g}</td>"
            if abs(value) < 1000
            else f"<td class='n'>{value:,.0f}</td>"
        )
    if isinstance(value, int):
        return f"<td class='n'>{value:,}</td>"
    text = str(value)
    if len(text) > 300:
        text = text[:297] + "..."
    return f"<td>{escape(text)}</td>"


def html_table(frame: pl.DataFrame) -> str:
    if frame.is_empty():
        return "<p class='empty'>no rows</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in frame.iter_rows())
    return f"<table><tr>{head}</tr>{body}</table>"


def _funnel_chart(funnel: pl.DataFrame) -> str:
    rows = [
        (r["stage"], [float(r["survived"]), float(r["rejected"]), float(r["harness_errors"])])
        for r in funnel.iter_rows(named=True)
    ]
    return hbar(rows, ["survived", "rejected", "harness errors"], title="funnel")


def _category_chart(mix: pl.DataFrame) -> str:
    if mix.is_empty():
        return hbar([], [])
    by_category = (
        mix.group_by("category")
        .agg(pl.col("kept").sum(), (pl.col("described") - pl.col("kept")).sum().alias("rest"))
        .sort(["kept", "rest"], descending=True)
    )
    rows = [
        (r["category"] or "(none)", [float(r["kept"]), float(max(r["rest"], 0))])
        for r in by_category.iter_rows(named=True)
    ]
    return hbar(rows, ["kept", "described, not kept"], title="category mix")


def _difficulty_charts(histogram: pl.DataFrame) -> str:
    if histogram.is_empty():
        return "<p class='empty'>no scored rollouts</p>"
    parts = []
    bins = [round(i / 10, 1) for i in range(11)]
    for solver in sorted(histogram["solver"].unique().to_list()):
        counts = dict(
            histogram.filter(pl.col("solver") == solver).select("bin_low", "tasks").iter_rows()
        )
        data = [(f"{b:.1f}" if b < 1 else "1.0", [float(counts.get(b, 0))]) for b in bins]
        parts.append(f"<h3>{escape(solver)}</h3>")
        parts.append(
            vbar(data, ["tasks"], x_label="pass rate over k attempts (bin start)", title=solver)
        )
    return "".join(parts)


def _failure_chart(modes: pl.DataFrame) -> str:
    if modes.is_empty():
        return "<p class='empty'>no rollouts</p>"
    order = (
        modes.group_by("failure_mode")
        .agg(pl.col("rollouts").sum())
        .sort("rollouts", descending=True)["failure_mode"]
        .to_list()
    )
    rows = []
    for solver in sorted(modes["solver"].unique().to_list()):
        counts = dict(
            modes.filter(pl.col("solver") == solver).select("failure_mode", "rollouts").iter_rows()
        )
        rows.append((solver, [float(counts.get(m, 0)) for m in order]))
    return hbar(rows, order, title="failure modes")


def _turns_chart(turns: pl.DataFrame) -> str:
    if turns.is_empty():
        return "<p class='empty'>no scored rollouts</p>"
    totals = turns.group_by("n_turns").agg(pl.col("rollouts").sum(), pl.col("successes").sum())
    totals = totals.sort("n_turns")
    data = [
        (str(r["n_turns"]), [float(r["successes"]), float(r["rollouts"] - r["successes"])])
        for r in totals.iter_rows(named=True)
    ]
    return vbar(data, ["solved", "not solved"], x_label="turns in the episode", title="turns")


def sample_tasks(lake: Lake, batches: list[str] | None, limit: int) -> pl.DataFrame:
    return query(
        lake,
        f"""
        select task_id, batch, category, complexity, scenario, family, solver_model,
               scored_attempts, successes, pass_rate, instruction, completion_test,
               reference_solution, dockerfile, initial_test
        from filtered_dataset where kept and {batch_filter(batches)}
        order by hash(task_id) limit {int(limit)}
        """,
    )


def _pre(title: str, text: str | None) -> str:
    text = text or ""
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + f"\n... ({len(text) - TEXT_LIMIT} more characters)"
    return f"<h4>{escape(title)}</h4><pre>{escape(text)}</pre>"


def _task_html(row: dict[str, Any]) -> str:
    label = difficulty_label(row["pass_rate"], row["scored_attempts"])
    summary = (
        f"<code>{escape(row['task_id'])}</code> {escape(row['category'] or '')}"
        f"<span class='tag'>{escape(row['complexity'] or '')}</span>"
        f"<span class='tag'>{escape(label)} · pass rate {row['pass_rate']:.2f} "
        f"({row['successes']}/{row['scored_attempts']})</span>"
    )
    return (
        f"<details class='task' data-category='{escape(row['category'] or '', quote=True)}'>"
        f"<summary>{summary}</summary>"
        f"<p class='sub'>batch {escape(row['batch'])} · {escape(row['scenario'] or '')} · "
        f"family {escape(row['family'] or '-')} · solver {escape(row['solver_model'] or '')}</p>"
        + _pre("Instruction", row["instruction"])
        + _pre("Completion test", row["completion_test"])
        + _pre("Reference solution", row["reference_solution"])
        + _pre("Dockerfile", row["dockerfile"])
        + _pre("Initial-state test", row["initial_test"])
        + "</details>"
    )


def _samples_html(tasks: pl.DataFrame, total_kept: int) -> str:
    if tasks.is_empty():
        return "<p class='empty'>no kept tasks</p>"
    categories = sorted({c for c in tasks["category"].to_list() if c})
    options = "".join(f"<option>{escape(c)}</option>" for c in categories)
    controls = (
        "<p><input id='filter' placeholder='search the sample' oninput='filterTasks()'> "
        f"<select id='category' onchange='filterTasks()'><option value=''>all categories"
        f"</option>{options}</select> <span id='shown'>{len(tasks)}</span> of {len(tasks)} "
        f"sampled ({total_kept} kept in all)</p>"
    )
    return controls + "".join(_task_html(r) for r in tasks.iter_rows(named=True))


def _figure(name: str, value: float) -> str:
    if name == "keep_rate":
        return f"{value:.1%}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"


def _contamination_sources(lake: Lake, batches: list[str] | None) -> pl.DataFrame:
    """Per benchmark task and field: how many of the dataset's tasks shared it, at most."""
    hits = stats_query(lake, "contamination", batches)
    if not len(hits):
        return pl.DataFrame({"reference_set": [], "reference_task": [], "field": [], "tasks": []})
    return (
        hits.group_by(["reference_set", "reference_task", "field"])
        .agg(pl.col("task_id").n_unique().alias("tasks"), pl.col("score").max().alias("max_score"))
        .sort(["tasks", "reference_set", "reference_task"], descending=[True, False, False])
        .head(20)
    )


def _section(title: str, *parts: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{''.join(parts)}</section>"


def build_report(lake: Lake, batches: list[str] | None = None, *, sample: int = 40) -> str:
    check_batches(lake, batches)
    figures = headline(lake, batches)
    frames = {t.name: t.frame for t in stats_tables(lake, batches)}

    def table(name: str) -> str:
        return html_table(frames[name])

    histogram = stats_query(lake, "pass_rate_histogram", batches)
    turns = stats_query(lake, "turns_per_episode", batches)
    samples = sample_tasks(lake, batches, sample)
    per_batch = learnable_per_batch(lake, batches)
    draws = draws_per_batch(lake, batches)
    scope = ", ".join(batches) if batches else "all batches"
    cards = "".join(
        f"<div class='card'><b>{_figure(name, value)}</b>{escape(name.replace('_', ' '))}</div>"
        for name, value in figures.items()
    )
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(
        [
            "<h1>endless dataset report</h1>",
            f"<p class='sub'>{escape(scope)} · data in {escape(str(lake.data_dir))} · "
            f"generated {generated}</p>",
            f"<div class='cards'>{cards}</div>",
            _section(
                "Funnel",
                _funnel_chart(frames["funnel"]),
                table("funnel"),
                "<h3>Why tasks did not survive</h3>",
                table("funnel_reasons"),
            ),
            _section(
                "Learnable share",
                "<p class='sub'>Kept tasks the solver solved in some of its attempts but not "
                "all (0 &lt; pass rate &lt; 1): the ones a group of RL rollouts learns from. Per "
                "batch, with what each learnable task cost, the describe stage's draw (the "
                "frontier "
                "sampler: what it expected of each batch before it was made, next to what was "
                "measured after), and variants with the task they came from.</p>",
                learnable_chart(per_batch),
                html_table(per_batch),
                "<h3>The describe stage's draw</h3>",
                calibration_chart(draws),
                html_table(draws),
                "<h3>Lineages</h3>",
                html_table(lineages(lake, batches)),
            ),
            _section(
                "Category mix",
                _category_chart(frames["category_mix"]),
                table("category_mix"),
            ),
            _section(
                "Soundness",
                "<p class='sub'>Repeated controls (flaky verdicts), shortcut probes (hackable "
                "tests) and one-step ablations of the reference (mutation score: the share the "
                "test rejects); with an auditor model, an alignment audit and a judged cheat "
                "rollout.</p>",
                table("soundness"),
                "<h3>Shortcut probes that passed</h3>",
                table("soundness_probes"),
                "<h3>Drift: kept tasks re-validated on a rebuilt image</h3>",
                table("drift"),
            ),
            _section(
                "Difficulty",
                "<p class='sub'>Tasks per pass rate (successes / scored attempts), per solver. "
                "Labels: easy ≥ 0.75, medium ≥ 0.25, hard &gt; 0, unsolved = 0.</p>",
                _difficulty_charts(histogram),
                table("difficulty"),
            ),
            _section(
                "Failure modes",
                _failure_chart(frames["failure_modes"]),
                table("failure_modes"),
            ),
            _section(
                "Decontamination",
                "<p class='sub'>Tasks held against the benchmarks of "
                "<code>decontamination_references</code>, field by field: right after the "
                "describe stage "
                "(<i>pipeline</i>) and again later (<i>recheck</i>, <code>endless "
                "decontaminate</code>). Exports leave out what a recheck found.</p>",
                table("decontamination"),
                "<h3>Benchmark tasks the dataset shared a field with</h3>",
                html_table(_contamination_sources(lake, batches)),
            ),
            _section("Turns per episode", _turns_chart(turns)),
            _section(
                "Token cost",
                table("token_cost"),
                "<h3>Estimated before each run (<code>endless run --plan</code>) and actual</h3>",
                table("cost_estimates"),
            ),
            _section(
                "Models",
                "<h3>Generators</h3>",
                table("generator_models"),
                "<h3>Solvers</h3>",
                table("solver_models"),
                "<h3>Generator x solver</h3>",
                table("model_matrix"),
            ),
            _section("Sample of kept tasks", _samples_html(samples, int(figures["tasks_kept"]))),
        ]
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>endless dataset report — {escape(scope)}</title><style>{CSS}</style>"
        f"<script>{SCRIPT}</script></head><body>{body}</body></html>\n"
    )


def write_report(
    lake: Lake, out: Path, batches: list[str] | None = None, *, sample: int = 40
) -> Path:
    """Write the report next to `out` and rename it into place."""
    html = build_report(lake, batches, sample=sample)
    out = Path(out).expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
