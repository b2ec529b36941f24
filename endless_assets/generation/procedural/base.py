"""What a procedural task family is, and how its output becomes a `Task`.

A family is a small class with a `make(rng)` method. Everything random in it comes from `rng`
(seeded by batch and index), so a batch reproduces exactly. It returns a `FamilyTask`: the
instruction, the truth, the files to seed under /home/user, an optional Python setup script run
as root at build time (for binary data, databases, ownership and modes), the initial-state
test, the completion test and the reference solution (a bash script run as the agent user).
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass, field
from typing import Any, ClassVar

HOME = "/home/user"


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


class Family:
    """Base class: subclasses set `name`, `category` and implement `make`."""

    name: ClassVar[str]
    category: ClassVar[str]

    def make(self, rng: random.Random) -> FamilyTask:
        raise NotImplementedError


def render_dockerfile(base_image: str, task: FamilyTask) -> tuple[str, dict[str, str]]:
    """The Dockerfile and build-context files that create a family's initial state."""
    lines = [f"FROM {base_image}"]
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


def dedent(text: str) -> str:
    """Dedent a triple-quoted block and strip the leading newline."""
    return textwrap.dedent(text).lstrip("\n")


# Small pools of names shared by families, so tasks read like real work.
PROJECTS = [
    "atlas",
    "borealis",
    "cobalt",
    "delta",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "ion",
    "juniper",
    "kestrel",
    "lumen",
    "meridian",
    "nimbus",
    "onyx",
    "pylon",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umbra",
    "vertex",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]
SERVICES = [
    "auth",
    "billing",
    "cache",
    "gateway",
    "indexer",
    "ingest",
    "mailer",
    "metrics",
    "payments",
    "scheduler",
    "search",
    "storage",
    "uploader",
    "worker",
]
PEOPLE = [
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "niaj",
    "olivia",
    "peggy",
    "rupert",
    "sybil",
    "trent",
    "victor",
    "walter",
]
