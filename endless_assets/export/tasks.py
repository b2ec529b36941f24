"""The tasks an export ships: kept rows of `filtered_dataset`, read from the lake and checked.

Every export goes through `load_tasks` and `validate_task`: a task that could not be rebuilt or
graded (no instruction, a Dockerfile without FROM, a completion test that does not parse or
defines no test, an unsafe build-context path) fails the whole export with its task id, before
anything is written.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.export.dockerfile import DockerfileError, base_images
from endless_assets.lake import Lake
from endless_assets.stats_views import difficulty_label

TASK_ID = re.compile(r"^et-[0-9a-f]{16}$")


class ExportError(Exception):
    """An export cannot be written; the message names the task and what is wrong with it."""


@dataclass(frozen=True)
class ExportTask:
    """Everything needed to rebuild, grade and describe one verified task."""

    task_id: str
    batch: str
    instruction: str
    dockerfile: str
    context_files: dict[str, str]
    initial_test: str
    completion_test: str
    reference_solution: str
    category: str
    complexity: str
    scenario: str
    family: str
    truth: dict[str, Any]
    generator: str
    generator_model: str
    prompt_version: str
    solver_model: str
    k: int
    successes: int
    pass_rate: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def difficulty(self) -> str:
        return difficulty_label(self.pass_rate, self.k)

    def metadata(self) -> dict[str, Any]:
        """Provenance and difficulty, as written into task.toml / task.yaml / RL rows."""
        return {
            "task_id": self.task_id,
            "source_batch": self.batch,
            "category": self.category,
            "complexity": self.complexity,
            "scenario": self.scenario,
            "family": self.family,
            "generator": self.generator,
            "generator_model": self.generator_model,
            "prompt_version": self.prompt_version,
            "solver_model": self.solver_model,
            "k": self.k,
            "successes": self.successes,
            "pass_rate": self.pass_rate,
            "difficulty": self.difficulty,
        }


def load_tasks(lake: Lake, batches: list[str] | None = None) -> list[ExportTask]:
    """Kept tasks of the chosen batches (all when None), ordered by batch and task id."""
    frame = lake.read_all("filtered_dataset")
    if batches:
        missing = sorted(set(batches) - set(frame["batch"].unique().to_list()))
        if missing:
            known = ", ".join(lake.batches("filtered_dataset")) or "none"
            raise ExportError(
                f"no filtered_dataset partition for batch(es) {', '.join(missing)} "
                f"(materialized: {known})"
            )
        frame = frame.filter(pl.col("batch").is_in(batches))
    frame = frame.filter(pl.col("kept")).sort(["batch", "task_id"])
    return [task_from_row(row) for row in frame.to_dicts()]


def task_from_row(row: dict[str, Any]) -> ExportTask:
    task_id = str(row.get("task_id") or "?")
    try:
        context_files = json.loads(row.get("context_files") or "{}")
        truth = json.loads(row.get("truth") or "{}")
    except json.JSONDecodeError as exc:
        raise ExportError(f"task {task_id}: stored JSON does not parse: {exc}") from exc
    return ExportTask(
        task_id=task_id,
        batch=row["batch"],
        instruction=row.get("instruction") or "",
        dockerfile=row.get("dockerfile") or "",
        context_files=context_files,
        initial_test=row.get("initial_test") or "",
        completion_test=row.get("completion_test") or "",
        reference_solution=row.get("reference_solution") or "",
        category=row.get("category") or "",
        complexity=row.get("complexity") or "",
        scenario=row.get("scenario") or "",
        family=row.get("family") or "",
        truth=truth if isinstance(truth, dict) else {"value": truth},
        generator=row.get("generator") or "",
        generator_model=row.get("generator_model") or "",
        prompt_version=row.get("prompt_version") or "",
        solver_model=row.get("solver_model") or "",
        k=int(row.get("k") or 0),
        successes=int(row.get("successes") or 0),
        pass_rate=float(row.get("pass_rate") or 0.0),
    )


def validate_task(task: ExportTask) -> None:
    """Raise ExportError naming the task if it cannot be shipped as a gradeable task."""
    problems: list[str] = []
    if not TASK_ID.match(task.task_id):
        problems.append(f"task id {task.task_id!r} is not of the form et-<16 hex digits>")
    if not task.instruction.strip():
        problems.append("the instruction is empty")
    try:
        if not base_images(task.dockerfile):
            problems.append("the Dockerfile has no FROM line")
    except DockerfileError as exc:
        problems.append(f"the Dockerfile is malformed: {exc}")
    for path, text in task.context_files.items():
        parts = path.split("/")
        if not path or path.startswith("/") or ".." in parts or path == "Dockerfile":
            problems.append(f"build-context path {path!r} is not a relative path inside it")
        if not isinstance(text, str):
            problems.append(f"build-context file {path!r} is not text")
    problems += _test_problems("completion test", task.completion_test)
    if task.initial_test.strip():
        problems += _test_problems("initial-state test", task.initial_test)
    if problems:
        raise ExportError(f"task {task.task_id} (batch {task.batch}): " + "; ".join(problems))


def _test_problems(what: str, source: str) -> list[str]:
    if not source.strip():
        return [f"the {what} is empty"]
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"the {what} does not parse (line {exc.lineno}: {exc.msg})"]
    names = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]
    return [] if names else [f"the {what} defines no test function"]


def validate_all(tasks: list[ExportTask]) -> None:
    """Validate every task first, so a bad task fails the export before anything is written."""
    for task in tasks:
        validate_task(task)
