"""Task generators. Both paths (procedural and LLM) meet in one `Task`.

A generator is asked three things, one per stage, and may be asked again with feedback:

- `describe(batch, index, seed)`: the describe stage, the task and its privileged truth, in the
  generator's own seeded deal; or `describe_cell(batch, index, seed, name, grade)`, the task of one
  of its `cells()` (a family and level, a taxonomy category and complexity) as the describe stage's
  draw chose it;
- `write_environment(draft, feedback)`: the build stage, a Dockerfile and an initial-state test;
- `write_completion_test(draft, feedback)`: the validation stage, the final-state test.

`repair_rounds` says how many times a stage may ask again after a failure (the paper: 3 for the
LLM; 1 for the procedural generator, whose families are fixed code and cannot learn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from endless_assets.models import Service, Task

if TYPE_CHECKING:
    from endless_assets.settings import Settings


@dataclass
class Usage:
    """What a generator call cost. The procedural generator costs nothing."""

    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cached: int = 0

    def add(self, other: Usage) -> None:
        self.requests += other.requests
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.cached += other.cached


@dataclass
class Environment:
    dockerfile: str
    context_files: dict[str, str] = field(default_factory=dict)
    initial_test: str = ""
    services: list[Service] | None = None  # as a repair left them; None: the draft's


class GenerationError(Exception):
    """The generator produced something unusable (e.g. an unparsable reply). Carries the reason,
    what the failed call cost (`usage`) and what a stage may keep of the reply (`partial`, e.g. an
    initial test whose Dockerfile did not parse)."""

    def __init__(
        self, message: str, *, usage: Usage | None = None, partial: Environment | None = None
    ) -> None:
        super().__init__(message)
        self.usage = usage or Usage()
        self.partial = partial


class TaskGenerator(Protocol):
    name: str
    model: str  # "" when no model is involved
    version: str  # prompt set or code version, stored with every row it writes
    repair_rounds: int
    reference_required: bool  # must the reference solution pass the completion test?
    needs_build_network: bool  # may its Dockerfiles' RUN steps reach the network?
    dedupe_threshold: float | None  # near-duplicate rejection in the describe stage; None: never
    # What its cells are (sampling/cells.py): "family" (family, level 1-6), "taxonomy"
    # (category, complexity), or "" for a generator whose tasks cannot be drawn by cell.
    cell_kind: str

    def parallelism(self, settings: Settings) -> int:
        """Tasks a stage works on at once (Docker work stays bounded by `workers`)."""
        ...

    def run_metadata(self) -> dict[str, Any]:
        """What the generator asked of its model during the step, for the asset's metadata."""
        ...

    def describe(self, batch: str, index: int, seed: int) -> tuple[Task, Usage]: ...

    def cells(self) -> list[tuple[str, Any]]:
        """Every (name, grade) `describe_cell` takes, in a stable order; [] when none."""
        ...

    def describe_cell(
        self, batch: str, index: int, seed: int, name: str, grade: Any
    ) -> tuple[Task, Usage]:
        """The task at `index` of `batch` drawn from the cell (name, grade); a generator with
        no cells raises GenerationError."""
        ...

    def describe_variant(
        self, batch: str, index: int, seed: int, name: str, grade: Any, parent: Task
    ) -> tuple[Task, Usage]:
        """A variant of `parent` in the cell (name, grade), a level harder or easier: a family
        writes the new level from the variant's lineage seed, the LLM is shown the parent. It
        records `parent_task_id`; a generator with no cells raises GenerationError."""
        ...

    def write_environment(
        self, draft: Task, feedback: str | None, previous: Environment | None
    ) -> tuple[Environment, Usage]: ...

    def write_completion_test(
        self, draft: Task, feedback: str | None, previous: str | None
    ) -> tuple[str, Usage]: ...


def new_task(generator: TaskGenerator, batch: str, index: int, seed: int, **fields: Any) -> Task:
    """The task `generator` describes at `index` of `batch` from `seed`, with the generator,
    model and version that wrote it."""
    return Task(
        batch=batch,
        index=index,
        seed=seed,
        generator=generator.name,
        generator_model=generator.model,
        prompt_version=generator.version,
        **fields,
    )
