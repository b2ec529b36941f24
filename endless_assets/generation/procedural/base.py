"""What a procedural task family is, and how its output becomes a `Task`.

A family draws a plan from a seeded `rng` (at a complexity level 1-6, or as its own unleveled
mix) and writes the task from it in steps: the instruction, the tests, the reference solution,
with the files and the setup script (Python, run as root at build time) of its initial state.
"""

from __future__ import annotations

import functools
import random
import textwrap
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, TypeVar

from endless_assets.models import Service
from endless_assets.taxonomy import Taxonomy

LEVELS = (1, 2, 3, 4, 5, 6)  # the taxonomy's complexity levels, simplest first
P = TypeVar("P")


@dataclass
class FamilyTask:
    instruction: str
    truth: dict[str, Any]
    initial_test: str
    completion_test: str
    solution: str
    complexity: str
    scenario: str
    files: dict[str, str] = field(default_factory=dict)  # path relative to /home/user -> text
    setup_script: str = ""  # Python, run as root during the image build
    # Services beside the agent's container: each Dockerfile without its FROM line (the
    # generator puts the base image's); and Debian packages the agent's image installs (a
    # client of theirs, from the build network).
    services: list[Service] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)


@functools.cache
def level_names() -> tuple[str, ...]:
    """The taxonomy's names of the complexity levels, level 1 first."""
    names = tuple(entry.name for entry in Taxonomy.load().complexities)
    if len(names) != len(LEVELS):
        raise ValueError(f"the taxonomy has {len(names)} complexity levels, expected 6")
    return names


def check_level(level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
        raise ValueError(f"a complexity level is an integer from 1 to 6, got {level!r}")
    return level


def level_name(level: int) -> str:
    return level_names()[check_level(level) - 1]


def by_level(level: int, *values: Any) -> Any:
    """The value for `level` from one value per level (six of them, level 1 first)."""
    if len(values) != len(LEVELS):
        raise ValueError(f"by_level needs one value per level, got {len(values)}")
    return values[check_level(level) - 1]


class Family(Generic[P]):
    """Base class: subclasses set `name` and `category` and implement the steps: `sample`
    (today's unleveled draw, kept as it is so a batch reproduces), `sample_level` (the draw
    for one complexity level), and `build`, which writes the task from either plan, most often
    as `task` puts together its `instruction`, `tests` and `solution`."""

    name: ClassVar[str]
    category: ClassVar[str]

    def make(self, rng: random.Random, level: int | None = None) -> FamilyTask:
        """The family's task for `rng`; at `level` (1-6) its complexity is the level's name
        and its truth records the level, without one it is the family's unleveled draw."""
        if level is None:
            return self.build(self.sample(rng))
        task = self.build(self.sample_level(rng, check_level(level)))
        task.complexity = level_name(level)
        task.truth = {**task.truth, "level": level}
        return task

    def sample(self, rng: random.Random) -> P:
        """The unleveled draw: one of the first three levels, unless a family has its own mix."""
        return self.sample_level(rng, rng.choice([1, 2, 3]))

    def sample_level(self, rng: random.Random, level: int) -> P:
        raise NotImplementedError

    def build(self, plan: P) -> FamilyTask:
        raise NotImplementedError

    def instruction(self, plan: P) -> str:
        raise NotImplementedError

    def solution(self, plan: P) -> str:
        raise NotImplementedError

    def tests(self, plan: P) -> tuple[str, str]:
        """The initial-state test and the completion test."""
        raise NotImplementedError

    def task(self, plan: P, tests: tuple[str, str] | None = None, **parts: Any) -> FamilyTask:
        """The task of `plan`: its instruction, tests (`tests`, else the family's) and
        reference solution, with `parts` (truth, complexity, scenario, files, setup)."""
        initial_test, completion_test = tests or self.tests(plan)
        return FamilyTask(
            instruction=self.instruction(plan),
            initial_test=initial_test,
            completion_test=completion_test,
            solution=self.solution(plan),
            **parts,
        )


def render_dockerfile(base_image: str, task: FamilyTask) -> tuple[str, dict[str, str]]:
    """The Dockerfile and build-context files that create a family's initial state."""
    lines = [f"FROM {base_image}", *([apt_install(task.packages)] if task.packages else [])]
    context: dict[str, str] = {}
    if task.files:
        for rel, text in task.files.items():
            context[f"home/{rel}"] = text
        lines.append("COPY --chown=user:user home/ /home/user/")
    if task.setup_script:
        context["setup.py"] = task.setup_script
        lines.append("COPY setup.py /tmp/endless-setup.py")
        lines.append("RUN python3 /tmp/endless-setup.py && rm -f /tmp/endless-setup.py")
    return "\n".join(lines) + "\n", context


def apt_install(packages: list[str]) -> str:
    """A RUN line installing Debian packages (the same line caches the same layer)."""
    return (
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
        f"--no-install-recommends {' '.join(packages)} && rm -rf /var/lib/apt/lists/*"
    )


def iso_stamp(utc: datetime, offset: int = 0) -> str:
    """The UTC time `utc` in ISO 8601 as a clock `offset` minutes east of UTC shows it: with
    `Z` for UTC itself, else with its `+HH:MM` or `-HH:MM`."""
    local = (utc + timedelta(minutes=offset)).strftime("%Y-%m-%dT%H:%M:%S")
    if not offset:
        return local + "Z"
    sign, minutes = "+" if offset > 0 else "-", abs(offset)
    return f"{local}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def dedent(text: str) -> str:
    """Dedent a triple-quoted block and strip the leading newline."""
    return textwrap.dedent(text).lstrip("\n")
