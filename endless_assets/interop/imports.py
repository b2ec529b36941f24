"""Importing a directory of tasks as a batch: one `Task` per task directory, or the reason it
could not be imported. Formats: `harbor` (harbor_import.py), `terminal-bench` (Terminal-Bench
1.x, tb_import.py), `auto` (each directory by its own layout: task.yaml without instruction.md
is Terminal-Bench).

Base images the machine cannot pull are mapped with `base_image_map` (`ubuntu:22.04` ->
`endless-base:<tag>`; the value `endless-base` without a tag means our base image of the
setting `base_recipe`, `endless-base-bookworm` and `endless-base-trixie` name a recipe). An image
that is neither mapped nor present is not checked here: the build stage rejects the task with
`build_failed` and Docker's own message (e.g. pull access denied).

A task exported by us carries its quality record (quality.py: Harbor `[metadata.quality]`,
Terminal-Bench `quality:`); it is kept as `source_metadata["quality"]`, every key, nulls
included (one that does not read is left out, with a note).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from endless_assets.interop.compose import services_of
from endless_assets.interop.dockerfile import replace_base_images
from endless_assets.interop.harbor_import import (
    HarborTask,
    ImportProblem,
    find_task_dirs,
    read_harbor_dir,
    trivial_initial_test,
)
from endless_assets.interop.import_files import DEFAULT_MAX_BINARY_BYTES
from endless_assets.interop.quality import KEY, carried
from endless_assets.interop.tb_import import is_tb_dir, read_tb_dir
from endless_assets.models import Task, task_seed

FORMATS = ("harbor", "terminal-bench", "auto")
OUR_BASE = "endless-base"


@dataclass(frozen=True)
class ImportOutcome:
    directory: str  # relative to the source directory ("." for the source itself)
    index: int
    draft: Task | None
    reason: str = ""  # why it could not be imported
    notes: tuple[str, ...] = ()  # what was filled in (e.g. a generated initial-state test)


def resolve_image_map(
    mapping: dict[str, str], base_image: str, recipes: Callable[[str], str] | None = None
) -> dict[str, str]:
    """`endless-base` -> `base_image`; `endless-base-<recipe>` -> `recipes(recipe)`."""
    resolved = {}
    for src, dst in mapping.items():
        if dst == OUR_BASE:
            dst = base_image
        elif dst.startswith(OUR_BASE + "-") and ":" not in dst and recipes is not None:
            dst = recipes(dst.removeprefix(OUR_BASE + "-"))
        resolved[src] = dst
    return resolved


def _text(metadata: dict[str, Any], *names: str, default: str = "") -> str:
    for name in names:
        value = metadata.get(name)
        if value not in (None, ""):
            return str(value)
    return default


def draft_from_harbor(
    task: HarborTask, batch: str, index: int, image_map: dict[str, str], source_name: str = ""
) -> tuple[Task, tuple[str, ...]]:
    meta = task.metadata
    notes: list[str] = []
    initial_test = task.initial_test
    if initial_test is None:
        initial_test = trivial_initial_test(task.dockerfile)
        notes.append("initial-state test generated (the task has none)")
    if not task.reference_solution.strip():
        notes.append("no reference solution")
    if task.binary_files:
        notes.append("binary files kept as bytes")
    mapped = replace_base_images(task.dockerfile, image_map)
    services = services_of(task.services, image_map)
    if mapped != task.dockerfile or any(s.image for s in task.services):
        notes.append("base image mapped")
    if services:
        notes.append(f"services: {', '.join(s.name for s in services)}")
    source: dict[str, Any] = {"format": task.source_format, "config": task.config}
    try:
        record = carried(meta)
    except ValueError as exc:
        notes.append(f"quality record not read ({exc})")
    else:
        if record is not None:
            source[KEY] = record.as_dict()
    draft = Task(
        batch=batch,
        index=index,
        seed=task_seed(batch, index),
        category=_text(meta, "category", default="imported"),
        complexity=_text(meta, "complexity", "difficulty", default="unknown"),
        scenario=_text(meta, "scenario"),
        instruction=task.instruction,
        truth=task.truth,
        reference_solution=task.reference_solution,
        dockerfile=mapped,
        context_files=task.context_files,
        initial_test=initial_test,
        completion_test=task.completion_test,
        generator=_text(meta, "generator", default="imported"),
        generator_model=_text(meta, "generator_model"),
        prompt_version=_text(meta, "prompt_version"),
        family=_text(meta, "family"),
        agent_user=task.agent_user,
        workdir=task.workdir,
        binary_files=task.binary_files,
        executable_files=task.executable_files,
        source_name=source_name or task.directory.name,
        source_metadata=source,
        services=services,
    )
    return draft, tuple(notes)


def read_task_dir(directory: Path, fmt: str, max_binary_bytes: int) -> HarborTask:
    if fmt == "terminal-bench" or (fmt == "auto" and is_tb_dir(directory)):
        return read_tb_dir(directory, max_binary_bytes=max_binary_bytes)
    return read_harbor_dir(directory, max_binary_bytes=max_binary_bytes)


def import_tasks(
    source: Path,
    batch: str,
    *,
    fmt: str = "harbor",
    base_image_map: dict[str, str] | None = None,
    base_image: str,
    recipes: Callable[[str], str] | None = None,
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
) -> list[ImportOutcome]:
    """Read every task directory under `source`. Never raises for one bad directory."""
    if fmt not in FORMATS:
        raise ImportProblem(
            f"import format {fmt!r} is not supported (supported: {', '.join(FORMATS)})"
        )
    source = Path(source).expanduser().resolve()
    image_map = resolve_image_map(base_image_map or {}, base_image, recipes)
    outcomes = []
    for index, directory in enumerate(find_task_dirs(source)):
        name = directory.relative_to(source).as_posix()
        source_name = directory.name if name == "." else f"{source.name}/{name}"
        try:
            task = read_task_dir(directory, fmt, max_binary_bytes)
            draft, notes = draft_from_harbor(task, batch, index, image_map, source_name)
        except ImportProblem as exc:
            outcomes.append(ImportOutcome(name, index, None, str(exc)))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            outcomes.append(ImportOutcome(name, index, None, problems))
        except OSError as exc:
            outcomes.append(ImportOutcome(name, index, None, f"cannot read: {exc}"))
        else:
            outcomes.append(ImportOutcome(name, index, draft, notes=notes))
    return outcomes
