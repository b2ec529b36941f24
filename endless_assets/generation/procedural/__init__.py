"""The embedded default generator: task families written in Python, seeded per batch and index."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from endless_assets.generation import GenerationError, Usage, new_task
from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.procedural import base, families, names, render
from endless_assets.generation.procedural.base import (
    LEVELS,
    Family,
    check_level,
    level_names,
    render_dockerfile,
)
from endless_assets.generation.procedural.families import ALL_FAMILIES, SERVICE_FAMILIES
from endless_assets.models import Task

# The first batch (a day) dealt the families with services too: a batch before it deals the
# families as it always did, so materializing it again reproduces it.
SERVICES_SINCE = "2026-12-07"


def family_names() -> list[str]:
    return [f.name for f in [*ALL_FAMILIES, *SERVICE_FAMILIES]]


def _code_version() -> str:
    """A hash of every module that writes a task (the families, their helpers, what renders
    their Dockerfiles, tests and setup) and of the level names a leveled task records."""
    digest = hashlib.sha256()
    sources = sorted(Path(families.__file__).parent.glob("*.py"))
    for path in [*sources, *(Path(m.__file__) for m in (base, names, render))]:
        digest.update(path.read_bytes())
    digest.update("\n".join(level_names()).encode())
    return "procedural-" + digest.hexdigest()[:12]


class ProceduralGenerator(CarriedGenerator):
    """Writes every part of a task at once; later stages only validate what it wrote.

    Families are dealt round-robin in an order shuffled by the batch, so a batch of N tasks
    covers min(N, families) families and any family appears at most ceil(N / families) times,
    each at its own unleveled mix; the families with services only in a batch dated from
    SERVICES_SINCE on. A caller that chooses the family and the complexity level
    (1-6) of each task calls `describe_cell` instead; `cells()` lists the choices there are.
    """

    name = "procedural"
    model = ""
    repair_rounds = 1
    reference_required = True
    needs_build_network = False  # families build from their own files only
    cell_kind = "family"

    def __init__(self, base_image: str, families: list[type[Family]] | None = None) -> None:
        self.base_image = base_image
        self.families = list(families or [*ALL_FAMILIES, *SERVICE_FAMILIES])
        if not self.families:
            raise ValueError("the procedural generator needs at least one family")
        self.version = _code_version()

    def _family_named(self, name: str) -> type[Family]:
        for family in self.families:
            if family.name == name:
                return family
        names = ", ".join(f.name for f in self.families)
        raise ValueError(f"no procedural family {name!r} (have: {names})")

    def _family_for(self, batch: str, index: int) -> type[Family]:
        dated = len(batch) == len(SERVICES_SINCE) and batch[:2] == "20"  # (a day, YYYY-MM-DD)
        later = dated and batch >= SERVICES_SINCE
        order = [f for f in self.families if later or f not in SERVICE_FAMILIES]
        order = order or list(self.families)
        random.Random(f"families:{batch}").shuffle(order)
        return order[index % len(order)]

    def cells(self) -> list[tuple[str, int]]:
        """Every (family, level) this generator can describe, family by family, level 1 first."""
        return [(f.name, level) for f in self.families for level in LEVELS]

    def describe(self, batch: str, index: int, seed: int) -> tuple[Task, Usage]:
        """The task at `index` of `batch`: the family dealt to it, at its unleveled mix."""
        return self._describe(batch, index, seed, self._family_for(batch, index), None)

    def describe_cell(
        self, batch: str, index: int, seed: int, family: str, level: int | None
    ) -> tuple[Task, Usage]:
        """The task at `index` of `batch` from the family named `family` at complexity `level`
        (1-6; None: the family's unleveled mix, as `describe` deals it). Its complexity is the
        level's name in the taxonomy and its truth's `level` the number. ValueError for a
        family this generator does not have or a level outside 1-6."""
        if level is not None:
            check_level(level)
        return self._describe(batch, index, seed, self._family_named(family), level)

    def describe_variant(
        self, batch: str, index: int, seed: int, name: str, grade: int, parent: Task
    ) -> tuple[Task, Usage]:
        """The family's task at level `grade` from the variant's own seed (derived from the
        parent's: its lineage), recording the parent."""
        draft, usage = self.describe_cell(batch, index, seed, name, grade)
        return draft.model_copy(update={"parent_task_id": parent.task_id}), usage

    def _describe(
        self, batch: str, index: int, seed: int, family: type[Family], level: int | None
    ) -> tuple[Task, Usage]:
        try:
            if level is None:  # a family may implement make(rng) alone
                task = family().make(random.Random(seed))
            else:
                task = family().make(random.Random(seed), level)
        except Exception as exc:  # a family bug must name the family
            raise GenerationError(f"family {family.name} failed: {exc!r}") from exc
        dockerfile, context = render_dockerfile(self.base_image, task)
        same = ("complexity", "scenario", "instruction", "truth", "initial_test", "completion_test")
        services = [
            s.model_copy(update={"dockerfile": f"FROM {self.base_image}\n{s.dockerfile}"})
            for s in task.services
        ]
        return new_task(
            self,
            batch,
            index,
            seed,
            category=family.category,
            family=family.name,
            reference_solution=task.solution,
            dockerfile=dockerfile,
            context_files=context,
            **({"services": services} if services else {}),
            **{name: getattr(task, name) for name in same},
        ), Usage()
