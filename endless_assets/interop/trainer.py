"""Rows for trainers: RL prompts with their environments (`rl`) and successful trajectories as
chat messages (`sft`). Each is written as Parquet and as JSONL with the same fields.

RL rows follow the shape SkyRL and verl dataset loaders read: `data_source`, `prompt` (chat
messages: the solver's system prompt and the task, exactly as the solver stage sends them),
`env_class`, `reward_spec` (SkyRL) and `reward_model` (verl) whose `ground_truth` is the completion
test, and `extra_info`; plus flat columns with everything needed to rebuild and grade the task
(`dockerfile` FROM the chosen base image, `context_files` as JSON, `initial_test`,
`completion_test`, `reference_solution`, the agent user and limits). A row's `split` is decided by a
hash of its task id, so it never changes between exports.

Both carry the task's quality record (quality.py) as `quality`: a struct column in Parquet and an
object in JSONL, with the same keys as everywhere else (null: not measured).

SFT rows are the successful rollouts that carry chat messages (model solvers; the oracle and
no-op policies talk to no model and have none): `messages` as `{role, content}` pairs exactly as
sent and received, with the task id, solver and rollout index.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl

from endless_assets.interop.dockerfile import rebase
from endless_assets.interop.harbor import check_base_image
from endless_assets.interop.output import staged_directory
from endless_assets.interop.quality import KEY, QualityRecord, record_of
from endless_assets.interop.tasks import ExportError, validate_all
from endless_assets.models import AGENT_HOME, AGENT_USER, Task
from endless_assets.settings import Settings
from endless_assets.solver_id import SolverId
from endless_assets.store.lake import Lake

DATA_SOURCE = "endless"
ENV_CLASS = "endless_terminal"
ROLES = {"system", "user", "assistant", "tool"}

_MESSAGES = pl.List(pl.Struct({"role": pl.String, "content": pl.String}))


def split_of(task_id: str, val_fraction: float) -> str:
    if val_fraction <= 0:
        return "train"
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0x1_0000_0000
    return "validation" if bucket < val_fraction else "train"


def prompt_messages(instruction: str, settings: Settings) -> list[dict[str, str]]:
    """The first two messages of a solver stage episode, rendered from prompts/solver_*.md."""
    from endless_assets.agent.chat import ChatConfig, SolverPrompts
    from endless_assets.settings import SettingsError

    try:
        prompts = SolverPrompts.load()
    except SettingsError as exc:
        raise ExportError(f"cannot render the solver prompt for RL rows: {exc}") from exc
    config = ChatConfig(
        model="",
        max_turns=settings.solver.max_turns,
        output_cap=settings.solver.output_cap,
        command_timeout=settings.solver.command_timeout,
    )
    return [
        {"role": "system", "content": prompts.render_system(config)},
        {"role": "user", "content": prompts.render_task(instruction)},
    ]


def rl_row(
    task: Task,
    index: int,
    *,
    base_image: str,
    settings: Settings,
    split: str,
    quality: QualityRecord,
) -> dict[str, Any]:
    prompt = prompt_messages(task.instruction, settings)
    meta = task.provenance()
    return {
        "data_source": DATA_SOURCE,
        "prompt": prompt,
        "env_class": ENV_CLASS,
        "ability": "terminal",
        "reward_spec": {"method": "pytest", "ground_truth": task.completion_test},
        "reward_model": {"style": "rule", "ground_truth": task.completion_test},
        "extra_info": {
            "index": index,
            "split": split,
            "task_id": task.task_id,
            "batch": task.batch,
            "category": task.category,
            "difficulty": task.difficulty,
            "pass_rate": meta["pass_rate"],
        },
        "split": split,
        **{k: meta[k] for k in ("task_id", "category", "complexity", "scenario", "family")},
        "batch": task.batch,
        "instruction": task.instruction,
        "dockerfile": rebase(task.dockerfile, base_image),
        "base_image": base_image,
        "context_files": json.dumps(task.context_files, sort_keys=True, ensure_ascii=False),
        "initial_test": task.initial_test,
        "completion_test": task.completion_test,
        "reference_solution": task.reference_solution,
        "truth": json.dumps(task.truth, sort_keys=True, ensure_ascii=False),
        "agent_user": AGENT_USER,
        "agent_home": AGENT_HOME,
        "max_turns": settings.solver.max_turns,
        "command_timeout": settings.solver.command_timeout,
        "difficulty": task.difficulty,
        **{k: meta[k] for k in ("pass_rate", "scored_attempts", "successes", "solver_model")},
        "generator": task.generator,
        "generator_model": task.generator_model,
        "prompt_version": task.prompt_version,
        KEY: quality.as_dict(),
    }


def check_messages(
    messages: Any, where: str, *, need_assistant: bool = True
) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise ExportError(f"{where}: messages must be a non-empty list")
    clean = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ExportError(f"{where}: message {i} is not an object")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ExportError(f"{where}: message {i} has role {role!r}")
        if not isinstance(content, str):
            raise ExportError(f"{where}: message {i} ({role}) has no text content")
        clean.append({"role": role, "content": content})
    if clean[0]["role"] not in ("system", "user"):
        raise ExportError(f"{where}: the conversation starts with {clean[0]['role']!r}")
    if need_assistant and not any(m["role"] == "assistant" for m in clean):
        raise ExportError(f"{where}: the conversation has no assistant message")
    return clean


def _write_rows(stage: Path, name: str, rows: list[dict[str, Any]], schema: dict) -> None:
    frame = pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    frame.write_parquet(stage / f"{name}.parquet", compression="zstd")
    with (stage / f"{name}.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    back = pl.read_parquet(stage / f"{name}.parquet")
    if back.height != len(rows):
        raise ExportError(f"{name}.parquet reads back {back.height} rows, wrote {len(rows)}")


def _rl_schema() -> dict[str, pl.DataType]:
    text = pl.String
    return {
        "data_source": text,
        "prompt": _MESSAGES,
        "env_class": text,
        "ability": text,
        "reward_spec": pl.Struct({"method": text, "ground_truth": text}),
        "reward_model": pl.Struct({"style": text, "ground_truth": text}),
        "extra_info": pl.Struct(
            {
                "index": pl.Int64,
                "split": text,
                "task_id": text,
                "batch": text,
                "category": text,
                "difficulty": text,
                "pass_rate": pl.Float64,
            }
        ),
        "split": text,
        "task_id": text,
        "category": text,
        "complexity": text,
        "scenario": text,
        "family": text,
        "batch": text,
        "instruction": text,
        "dockerfile": text,
        "base_image": text,
        "context_files": text,
        "initial_test": text,
        "completion_test": text,
        "reference_solution": text,
        "truth": text,
        "agent_user": text,
        "agent_home": text,
        "max_turns": pl.Int64,
        "command_timeout": pl.Float64,
        "difficulty": text,
        "pass_rate": pl.Float64,
        "scored_attempts": pl.Int64,
        "successes": pl.Int64,
        "solver_model": text,
        "generator": text,
        "generator_model": text,
        "prompt_version": text,
        KEY: QualityRecord.polars_dtype(),
    }


def export_rl(
    tasks: list[Task],
    out: Path,
    *,
    base_image: str,
    settings: Settings,
    val_fraction: float = 0.0,
    overwrite: bool = False,
    quality: dict[str, QualityRecord] | None = None,
) -> dict[str, int]:
    """train.parquet/.jsonl (and validation.* when val_fraction > 0), each row with its task's
    record from `quality` (absent: not checked). Returns rows per split."""
    validate_all(tasks)
    check_base_image(base_image)
    if not 0 <= val_fraction < 1:
        raise ExportError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    splits: dict[str, list[dict[str, Any]]] = {"train": []}
    for index, task in enumerate(tasks):
        split = split_of(task.task_id, val_fraction)
        record = record_of(quality, task)
        row = rl_row(
            task, index, base_image=base_image, settings=settings, split=split, quality=record
        )
        check_messages(row["prompt"], f"task {task.task_id}", need_assistant=False)
        splits.setdefault(split, []).append(row)
    with staged_directory(out, fmt="rl", overwrite=overwrite) as stage:
        for name, rows in splits.items():
            _write_rows(stage, name, rows, _rl_schema())
    return {name: len(rows) for name, rows in splits.items()}


def successful_rollouts(lake: Lake, tasks: list[Task]) -> pl.DataFrame:
    columns = ["task_id", "batch", "policy", "model", "rollout_idx", "n_turns", "messages"]
    columns += ["tokens_in", "tokens_out", "reward"]
    if not lake.has_data("solver_rollouts") or not tasks:
        return pl.DataFrame(schema={c: pl.String for c in columns})
    ids = [t.task_id for t in tasks]
    return (
        pl.scan_parquet(lake.table_glob("solver_rollouts"), missing_columns="insert")
        .filter((pl.col("reward") == 1) & pl.col("task_id").is_in(ids))
        .select(columns)
        .sort(["batch", "task_id", "policy", "model", "rollout_idx"])
        .collect()
    )


def export_sft(
    lake: Lake,
    tasks: list[Task],
    out: Path,
    *,
    overwrite: bool = False,
    quality: dict[str, QualityRecord] | None = None,
) -> dict[str, int]:
    """train.parquet/.jsonl: one row per successful rollout that has chat messages, with its
    task's record from `quality` (absent: not checked)."""
    validate_all(tasks)
    by_id = {task.task_id: task for task in tasks}
    rows = []
    skipped = 0
    for r in successful_rollouts(lake, tasks).to_dicts():
        solver = str(SolverId(r["policy"], r["model"]))
        where = f"task {r['task_id']} rollout {r['rollout_idx']} ({solver})"
        try:
            raw = json.loads(r["messages"] or "[]")
        except json.JSONDecodeError as exc:
            raise ExportError(f"{where}: messages do not parse as JSON: {exc}") from exc
        if not raw:
            skipped += 1  # a policy that talks to no model (oracle, noop)
            continue
        rows.append(
            {
                "messages": check_messages(raw, where),
                "task_id": r["task_id"],
                "batch": r["batch"],
                "solver": solver,
                "rollout_idx": r["rollout_idx"],
                "n_turns": r["n_turns"],
                "tokens_in": r["tokens_in"],
                "tokens_out": r["tokens_out"],
                KEY: record_of(quality, by_id[r["task_id"]]).as_dict(),
            }
        )
    schema = {
        "messages": _MESSAGES,
        "task_id": pl.String,
        "batch": pl.String,
        "solver": pl.String,
        "rollout_idx": pl.Int64,
        "n_turns": pl.Int64,
        "tokens_in": pl.Int64,
        "tokens_out": pl.Int64,
        KEY: QualityRecord.polars_dtype(),
    }
    with staged_directory(out, fmt="sft", overwrite=overwrite) as stage:
        _write_rows(stage, "train", rows, schema)
    return {"train": len(rows), "skipped_without_messages": skipped}
