"""The embedded default generator: task families written in Python, seeded per batch and index."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from endless_assets.generation import GenerationError, Usage
from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.procedural import base, families, render
from endless_assets.generation.procedural.base import (
    LEVELS,
    Family,
    check_level,
    level_names,
    render_dockerfile,
)
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.models import Task


def family_names() -> list[str]:
    return [f.name for f in ALL_FAMILIES]


@dataclass(frozen=True)
class Cell:
    """What to describe: one family, at one complexity level (1-6, see `LEVELS`); level None
    is the family's own unleveled mix, the tasks a batch without cells gets."""

    family: str
    level: int | None = None


def _code_version() -> str:
    """A hash of every module that writes a task (the families, their helpers, what renders
    their Dockerfiles, tests and setup) and of the level names a leveled task records."""
    digest = hashlib.sha256()
    sources = sorted(Path(families.__file__).parent.glob("*.py"))
    for path in [*sources, Path(base.__file__), Path(render.__file__)]:
        digest.update(path.read_bytes())
    digest.update("\n".join(level_names()).encode())
    return "procedural-" + digest.hexdigest()[:12]


class ProceduralGenerator(CarriedGenerator):
    """Writes every part of a task at once; later stages only validate what it wrote.

    Families are dealt round-robin in an order shuffled by the batch, so a batch of N tasks
    covers min(N, families) families and any family appears at most ceil(N / families) times,
    each at its own unleveled mix. A caller that chooses instead passes a `Cell` (a family and
    a complexity level) per task to `describe`; `cells()` lists every one there is.
    """

    name = "procedural"
    model = ""
    repair_rounds = 1
    reference_required = True
    needs_build_network = False  # families build from their own files only

    def __init__(self, base_image: str, families: list[type[Family]] | None = None) -> None:
        self.base_image = base_image
        self.families = list(families or ALL_FAMILIES)
        if not self.families:
            raise ValueError("the procedural generator needs at least one family")
        self.version = _code_version()

    def _family_named(self, cell: Cell) -> type[Family]:
        if cell.level is not None:
            check_level(cell.level)
        for family in self.families:
            if family.name == cell.family:
                return family
        names = ", ".join(f.name for f in self.families)
        raise ValueError(f"no procedural family {cell.family!r} (have: {names})")

    def _family_for(self, batch: str, index: int) -> type[Family]:
        order = list(self.families)
        random.Random(f"families:{batch}").shuffle(order)
        return order[index % len(order)]

    def cells(self) -> list[Cell]:
        """Every family of this generator at every complexity level, family by family."""
        return [Cell(f.name, level) for f in self.families for level in LEVELS]

    def describe(
        self, batch: str, index: int, seed: int, cell: Cell | None = None
    ) -> tuple[Task, Usage]:
        """The task at `index` of `batch`: the family dealt to it at its unleveled mix, or
        the family and level `cell` names (ValueError for a family this generator does not
        have or a level outside 1-6). A leveled task's complexity is the level's name in the
        taxonomy and its truth's `level` the number."""
        family = self._family_for(batch, index) if cell is None else self._family_named(cell)
        level = None if cell is None else cell.level
        try:
            task = (
                family().make(random.Random(seed))
                if level is None
                else family().make(random.Random(seed), level)
            )
        except Exception as exc:  # a family bug must name the family
            raise GenerationError(f"family {family.name} failed: {exc!r}") from exc
        dockerfile, context = render_dockerfile(self.base_image, task)
        draft = Task(
            batch=batch,
            index=index,
            seed=seed,
            category=family.category,
            complexity=task.complexity,
            scenario=task.scenario,
            instruction=task.instruction,
            truth=task.truth,
            reference_solution=task.solution,
            dockerfile=dockerfile,
            context_files=context,
            initial_test=task.initial_test,
            completion_test=task.completion_test,
            generator=self.name,
            generator_model="",
            prompt_version=self.version,
            family=family.name,
        )
        return draft, Usage()
