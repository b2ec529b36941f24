"""Trajectories as ATIF documents (Harbor's Agent Trajectory Interchange Format, ATIF-v1.7): one
JSON document per solver attempt (`solver_rollouts`) and per served episode (`served_episodes`)
of the chosen batches, every attempt whatever became of it, with its verdict and token usage.

Layout: `<out>/<source>/<batch>/<task_id>/<attempt>.json`, and `<out>/index.jsonl` with one line
per document (path, source, task, batch, policy, model, reward, termination) to load them from.

A document's steps: the system prompt and the task message exactly as the chat solver sent them
(or the task's instruction, for policies that talk to no model and for served episodes), then
one agent step per turn: the model's reply as received (`message`), the command as a `bash`
tool call, the observation the agent was shown as its result (with exit code, timeout and
truncation in the result's `extra`), the turn's token counts (`metrics`, chat solvers only;
`llm_call_count` 0 for the oracle and the do-nothing policy, unset for a served episode's
client). The reward, termination and verdict are in the document's `extra` and `notes`: a
reward of null is a harness or infra error, never a 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from endless_assets.agent.episode import invalid_observation, observation_text
from endless_assets.interop.output import staged_directory, write_text
from endless_assets.interop.tasks import ExportError
from endless_assets.models import content_hash
from endless_assets.sandbox.containers.shell import CommandResult
from endless_assets.solver_id import SolverId
from endless_assets.store.lake import Lake

SCHEMA_VERSION = "ATIF-v1.7"
SOURCES = ("solver_rollouts", "served_episodes")
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one command in the task container's persistent bash shell",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$")


def _safe(name: str) -> str:
    """A file name part: `name` itself when plain, else a hash of it."""
    return name if _SAFE.match(name) else content_hash(name, length=16)


def _json(text: str | None, where: str) -> Any:
    try:
        return json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise ExportError(f"{where}: stored JSON does not parse: {exc}") from exc


def _observed(turn: dict[str, Any]) -> str:
    """The observation the agent was shown after a command, rebuilt from the stored turn."""
    output = turn.get("output") or ""
    result = CommandResult(
        output=output,
        exit_code=turn.get("exit_code"),
        timed_out=bool(turn.get("timed_out")),
        original_bytes=int(turn.get("original_bytes") or 0),
        truncated=bool(turn.get("truncated")),
        seconds=float(turn.get("seconds") or 0.0),
        note=turn.get("note") or "",
    )
    return observation_text(result, len(output))


def _agent_step(
    number: int, turn: dict[str, Any], reply: str | None, shown: str | None, llm_calls: int | None
) -> dict[str, Any]:
    kind = turn.get("kind") or "command"
    step: dict[str, Any] = {
        "step_id": number,
        "source": "agent",
        "message": reply if reply is not None else (turn.get("thought") or ""),
    }
    if llm_calls is not None:
        step["llm_call_count"] = llm_calls
    if llm_calls:
        step["metrics"] = {
            "prompt_tokens": int(turn.get("tokens_in") or 0),
            "completion_tokens": int(turn.get("tokens_out") or 0),
        }
    extra = {k: turn.get(k) for k in ("seconds", "policy_seconds")} | {"kind": kind}
    if turn.get("folded_turns"):
        extra["folded_turns"] = turn["folded_turns"]
    if turn.get("finish_reason"):
        extra["finish_reason"] = turn["finish_reason"]
    step["extra"] = {k: v for k, v in extra.items() if v is not None}
    if kind == "command":
        call = f"call_{number}"
        arguments = {"command": turn["command"]}
        tool_call = {"tool_call_id": call, "function_name": "bash", "arguments": arguments}
        step["tool_calls"] = [tool_call]
        facts = {k: turn.get(k) for k in ("exit_code", "timed_out", "truncated", "original_bytes")}
        result = {"source_call_id": call, "content": shown or _observed(turn), "extra": facts}
        step["observation"] = {"results": [result]}
    elif kind == "invalid":
        content = shown or invalid_observation(turn.get("error") or "")
        step["observation"] = {"results": [{"content": content}]}
    return step


def trajectory(
    *,
    trajectory_id: str,
    session_id: str,
    agent: dict[str, Any],
    instruction: str,
    turns: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    llm_calls: int | None,
    extra: dict[str, Any],
    tokens: tuple[int, int] | None,
) -> dict[str, Any]:
    """One ATIF document. `messages`: the chat transcript ([system, task, reply 1, observation
    1, ...]) when the policy talked to a model, else []."""
    steps: list[dict[str, Any]] = []
    chat = len(messages) >= 2 and messages[0].get("role") == "system"
    if chat:
        steps.append({"step_id": 1, "source": "system", "message": str(messages[0]["content"])})
        steps.append({"step_id": 2, "source": "user", "message": str(messages[1]["content"])})
    else:
        steps.append({"step_id": 1, "source": "user", "message": instruction})
    for i, turn in enumerate(turns):
        reply = shown = None
        if chat:
            at = 2 + 2 * i
            if at < len(messages) and messages[at].get("role") == "assistant":
                reply = str(messages[at].get("content") or "")
            if at + 1 < len(messages) and messages[at + 1].get("role") == "user":
                shown = str(messages[at + 1].get("content") or "")
        steps.append(_agent_step(len(steps) + 1, turn, reply, shown, llm_calls))
    reward = extra.get("reward")
    verdict = extra.get("verdict") or extra.get("error") or extra.get("infra_error") or ""
    notes = (
        f"reward {reward} ({extra.get('termination')}): {verdict}"
        if reward is not None
        else f"no reward ({extra.get('termination')}): {verdict or 'not graded'}; not a 0"
    )
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": trajectory_id,
        "agent": agent,
        "steps": steps,
        "notes": notes,
        "extra": extra,
    }
    metrics: dict[str, Any] = {"total_steps": len(steps)}
    if tokens is not None:
        metrics["total_prompt_tokens"], metrics["total_completion_tokens"] = tokens
    document["final_metrics"] = metrics
    return document


def _rollout_document(row: dict[str, Any], instruction: str, kept: bool | None) -> dict[str, Any]:
    solver = SolverId(row["policy"], row["model"])
    where = f"task {row['task_id']} rollout {row['rollout_idx']} ({solver})"
    messages = _json(row.get("messages"), where)
    chat = bool(messages)
    doc_id = f"rollout:{row['batch']}:{row['task_id']}:{row['policy']}:{row['model']}:"
    doc_id += str(row["rollout_idx"])
    agent = {
        "name": f"endless-{row['policy']}",
        "version": row.get("prompt_version") or "0",
        "tool_definitions": [BASH_TOOL],
        **({"model_name": row["model"]} if row.get("model") else {}),
    }
    extra = {
        "source": "solver_rollouts",
        "task_id": row["task_id"],
        "batch": row["batch"],
        "rollout_idx": row["rollout_idx"],
        "policy": row["policy"],
        "model": row["model"],
        "reward": row["reward"],
        "termination": row["termination"],
        "verdict": row.get("verdict") or "",
        "error": row.get("error") or "",
        "failure_mode": row.get("failure_mode"),
        "seconds": row.get("seconds"),
        "kept": kept,
    }
    return trajectory(
        trajectory_id=doc_id,
        session_id=doc_id,
        agent=agent,
        instruction=instruction,
        turns=_json(row.get("trajectory"), where),
        messages=messages,
        llm_calls=1 if chat else 0,
        extra=extra,
        tokens=(int(row.get("tokens_in") or 0), int(row.get("tokens_out") or 0)),
    )


def _episode_document(row: dict[str, Any], instruction: str, kept: bool | None) -> dict[str, Any]:
    where = f"served episode {row['episode_id']} (task {row['task_id']})"
    agent = {
        "name": "served",
        "version": "0",
        "tool_definitions": [BASH_TOOL],
        **({"model_name": row["model"]} if row.get("model") else {}),
    }
    names = ("episode_id", "session_id", "task_id", "batch", "model", "seed", "reward")
    extra = {"source": "served_episodes", "policy": "served", **{k: row.get(k) for k in names}}
    extra.update(
        termination=row["termination"],
        verdict=row.get("verdict") or "",
        infra_error=row.get("infra_error") or "",
        steps=row.get("steps"),
        seconds=row.get("seconds"),
        server=row.get("server"),
        kept=kept,
    )
    return trajectory(
        trajectory_id=f"served:{row['episode_id']}",
        session_id=f"served:{row['session_id']}",
        agent=agent,
        instruction=instruction,
        turns=_json(row.get("trajectory"), where),
        messages=[],
        llm_calls=None,  # the client's model: neither seen nor counted here
        extra=extra,
        tokens=None,
    )


def _partitions(lake: Lake, table: str, batches: list[str] | None) -> Iterator[pl.DataFrame]:
    for batch in lake.batches(table):
        if batches is None or batch in batches:
            yield lake.read(table, batch)


def _tasks(lake: Lake) -> tuple[dict[str, str], dict[str, bool]]:
    """Each task's instruction, and whether it was kept (None: never filtered)."""
    instructions: dict[str, str] = {}
    for table in ("task_descriptions", "filtered_dataset"):
        if lake.has_data(table):
            for r in lake.read_all(table).select("task_id", "instruction").to_dicts():
                instructions.setdefault(r["task_id"], r["instruction"] or "")
    kept: dict[str, bool] = {}
    if lake.has_data("filtered_dataset"):
        rows = lake.read_all("filtered_dataset").select("task_id", "kept").to_dicts()
        kept = {r["task_id"]: bool(r["kept"]) for r in rows}
    return instructions, kept


def export_atif(
    lake: Lake, out: Path, *, batches: list[str] | None = None, overwrite: bool = False
) -> tuple[int, dict[str, int]]:
    """Write the documents; (tasks with at least one document, documents per source)."""
    if batches:
        known = {b for table in SOURCES for b in lake.batches(table)}
        missing = sorted(set(batches) - known)
        if missing:
            raise ExportError(
                f"no solver_rollouts or served_episodes partition for batch(es) "
                f"{', '.join(missing)} (materialized: {', '.join(sorted(known)) or 'none'})"
            )
    instructions, kept = _tasks(lake)
    written = dict.fromkeys(SOURCES, 0)
    tasks: set[str] = set()
    with staged_directory(out, fmt="atif", overwrite=overwrite) as stage:
        index = []
        for source in SOURCES:
            make = _rollout_document if source == "solver_rollouts" else _episode_document
            for part in _partitions(lake, source, batches):
                for row in part.to_dicts():
                    task_id = row["task_id"]
                    document = make(row, instructions.get(task_id, ""), kept.get(task_id))
                    if source == "solver_rollouts":
                        tag = content_hash(row["policy"], row["model"], length=8)
                        name = f"rollout-{row['rollout_idx']}-{row['policy']}-{tag}.json"
                    else:
                        name = f"episode-{_safe(row['episode_id'])}.json"
                    path = Path(source) / _safe(row["batch"]) / _safe(task_id) / name
                    write_text(stage / path, json.dumps(document, ensure_ascii=False, indent=1))
                    index.append({"path": str(path), **_index_fields(document)})
                    written[source] += 1
                    tasks.add(task_id)
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in index)
        write_text(stage / "index.jsonl", lines)
    return len(tasks), written


def _index_fields(document: dict[str, Any]) -> dict[str, Any]:
    extra = document["extra"]
    names = ("source", "task_id", "batch", "policy", "model", "reward", "termination")
    return {k: extra.get(k) for k in names}
