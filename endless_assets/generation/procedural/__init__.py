"""The embedded default generator: task families written in Python, seeded per batch and index."""

from __future__ import annotations

import hashlib
import inspect
import random

from endless_assets.generation import GenerationError, Usage
from endless_assets.generation.carried import CarriedGenerator
from endless_assets.generation.procedural import render
from endless_assets.generation.procedural.base import Family, render_dockerfile
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.models import Task


def family_names() -> list[str]:
    return [f.name for f in ALL_FAMILIES]


def _code_version() -> str:
    digest = hashlib.sha256()
    for family in ALL_FAMILIES:
        digest.update(inspect.getsource(inspect.getmodule(family)).encode())
    # And what renders every family's Dockerfile and tests.
    for module in (inspect.getmodule(render_dockerfile), render):
        digest.update(inspect.getsource(module).encode())
    return "procedural-" + digest.hexdigest()[:12]


class ProceduralGenerator(CarriedGenerator):
    """Writes every part of a task at once; later stages only validate what it wrote.

    Families are dealt round-robin in an order shuffled by the batch, so a batch of N tasks
    covers min(N, families) families and any family appears at most ceil(N / families) times.
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

    def _family_for(self, batch: str, index: int) -> type[Family]:
        order = list(self.families)
        random.Random(f"families:{batch}").shuffle(order)
        return order[index % len(order)]

    def describe(self, batch: str, index: int, seed: int) -> tuple[Task, Usage]:
        family = self._family_for(batch, index)
        try:
            task = family().make(random.Random(seed))
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
