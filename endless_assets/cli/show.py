"""`endless show TASK_ID [--rollout N]`: read a task's rollouts, or one trajectory turn by turn."""

from __future__ import annotations

import json
from typing import Annotated, Any

import polars as pl
import typer
from rich.rule import Rule
from rich.text import Text

from endless_assets.cli.app import _fail, app, failing, lake, out, print_frame
from endless_assets.solver_id import SolverId

THOUGHT_CHARS = 1200
OUTPUT_CHARS = 3000
OUTPUT_LINES = 40


@app.command()
def show(
    task_id: Annotated[str, typer.Argument(help="the task id (et-...)")],
    rollout: Annotated[
        int | None,
        typer.Option("--rollout", "-r", help="rollout index to print; omit to list them all"),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="solver model, when several attempted the task")
    ] = None,
    messages: Annotated[
        bool,
        typer.Option("--messages", help="print the chat messages exactly as sent and received"),
    ] = False,
    full: Annotated[bool, typer.Option(help="print thoughts and outputs in full")] = False,
) -> None:
    """Show a task's solver rollouts, or one trajectory turn by turn."""
    data = lake()
    rows = _rows(
        data,
        "select * from solver_rollouts where task_id = ? order by policy, model, rollout_idx",
        [task_id],
    )
    if model is not None:
        rows = [r for r in rows if r["model"] == model]
    if not rows:
        where = f" by model {model!r}" if model is not None else ""
        _fail(f"no rollouts of task {task_id!r}{where} in {data.root}")
    if rollout is None:
        _list(data, task_id, rows)
        return
    chosen = [r for r in rows if r["rollout_idx"] == rollout]
    if not chosen:
        have = sorted({r["rollout_idx"] for r in rows})
        _fail(f"task {task_id} has no rollout {rollout} (it has {have})")
    if len(chosen) > 1:
        models = ", ".join(sorted(str(SolverId(r["policy"], r["model"])) for r in chosen))
        _fail(f"rollout {rollout} of {task_id} exists for several solvers ({models}): add --model")
    row = chosen[0]
    if messages:
        out.print_json(row["messages"] or "[]")
        return
    _trajectory(data, row, full)


def _rows(lake: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    from endless_assets.store.catalog import CatalogError, query

    with failing(CatalogError):
        return query(lake, sql, params).to_dicts()


def _instruction(lake: Any, task_id: str) -> str:
    found = _rows(
        lake, "select instruction from task_descriptions where task_id = ? limit 1", [task_id]
    )
    return found[0]["instruction"] if found else ""


def _list(lake: Any, task_id: str, rows: list[dict[str, Any]]) -> None:
    frame = pl.DataFrame(
        [
            {
                "batch": r["batch"],
                "solver": str(SolverId(r["policy"], r["model"])),
                "idx": r["rollout_idx"],
                "reward": r["reward"],
                "termination": r["termination"],
                "failure": r.get("failure_mode"),
                "turns": r["n_turns"],
                "loop": r["loop_detected"],
                "diversity": r["command_diversity"],
                "tokens": r["tokens_in"] + r["tokens_out"],
                "seconds": r["seconds"],
            }
            for r in rows
        ]
    )
    print_frame(frame, title=f"rollouts of {task_id} (show one with --rollout N)")
    instruction = _instruction(lake, task_id)
    if instruction:
        out.print(Text("Task: ", style="bold") + Text(instruction))


def _clip(text: str, limit: int, full: bool, lines: int = OUTPUT_LINES) -> str:
    text = text.rstrip("\n")
    head = "\n".join(text.splitlines()[:lines])[:limit]
    if full or len(head) >= len(text):
        return text
    return head + f"\n… ({len(text) - len(head)} more characters; --full shows them)"


def _trajectory(lake: Any, row: dict[str, Any], full: bool) -> None:
    reward = "none (harness error)" if row["reward"] is None else str(row["reward"])
    diversity = row["command_diversity"]
    header = Text()
    header.append(f"{row['task_id']}", style="bold")
    header.append(f"  batch {row['batch']}  rollout {row['rollout_idx']}  ")
    header.append(str(SolverId(row["policy"], row["model"])), style="cyan")
    out.print(header)
    facts = (
        f"reward {reward} · termination {row['termination']} · failure mode "
        f"{row.get('failure_mode') or '-'} · {row['n_turns']} turns · tokens "
        f"{row['tokens_in']} in / {row['tokens_out']} out · {row['seconds']:.1f} s · loop "
        f"{'yes' if row['loop_detected'] else 'no'} · command diversity "
        f"{'-' if diversity is None else f'{diversity:.2f}'}"
    )
    out.print(Text(facts))
    if row.get("verdict"):
        out.print(Text(f"verdict: {row['verdict']}"))
    if row.get("error"):
        out.print(Text(f"error: {row['error']}", style="red"))
    instruction = _instruction(lake, row["task_id"])
    if instruction:
        out.print(Text("\nTask: ", style="bold") + Text(instruction))
    for turn in json.loads(row["trajectory"] or "[]"):
        _turn(turn, full)


def _turn(turn: dict[str, Any], full: bool) -> None:
    tokens = f"{turn.get('tokens_in', 0)} in / {turn.get('tokens_out', 0)} out tokens"
    folded = turn.get("folded_turns") or 0
    title = f"turn {turn['index'] + 1} · {turn['kind']} · {tokens}"
    if folded:
        title += f" · {folded} earlier turns folded"
    out.print(Rule(Text(title)))
    if turn.get("thought"):
        out.print(Text(_clip(turn["thought"], THOUGHT_CHARS, full), style="dim italic"))
    if turn["kind"] == "invalid":
        out.print(Text(f"unusable reply: {turn.get('error', '')}", style="yellow"))
        return
    if turn["kind"] == "done":
        out.print(Text("done", style="bold green"))
        return
    out.print(Text("$ ", style="bold") + Text(turn["command"], style="bold"))
    if turn.get("output"):
        out.print(Text(_clip(turn["output"], OUTPUT_CHARS, full)))
    status = (
        f"timed out ({turn.get('note') or 'interrupted'})"
        if turn.get("timed_out")
        else f"exit code {turn.get('exit_code')}"
    )
    if turn.get("truncated"):
        status += f" · output cut by the harness ({turn.get('original_bytes')} bytes in all)"
    out.print(Text(f"[{status} · {turn.get('seconds', 0):.2f} s]", style="dim"))
