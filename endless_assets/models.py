"""The one model every generator produces and every later stage consumes.

Stage I (describe) yields a `Task`. The procedural generator fills every field at once; the
LLM generator fills the description and truth first and the environment and tests in stages II
and III. After stage I nothing can tell the two paths apart. Stage IV adds the `score`; exports
read the same model back from `filtered_dataset`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from endless_assets.stages.filtering import TaskScore

AGENT_USER = "user"
AGENT_HOME = "/home/user"


class Task(BaseModel):
    """A task: what the agent reads, what only the grader knows, and how to build and grade it."""

    model_config = ConfigDict(extra="forbid")

    batch: str
    index: int = Field(ge=0)
    seed: int
    category: str
    complexity: str
    scenario: str
    instruction: str = Field(min_length=1)
    truth: dict[str, Any] = Field(default_factory=dict)
    reference_solution: str = ""
    # Environment (stage II): a Dockerfile whose FROM is the base image, plus the files of its
    # build context (relative path -> text). Empty until stage II on the LLM path.
    dockerfile: str | None = None
    context_files: dict[str, str] = Field(default_factory=dict)
    initial_test: str | None = None
    # Grading (stage III).
    completion_test: str | None = None
    # Score (stage IV): the solver's attempts and the keep decision. None until then.
    score: TaskScore | None = None
    # Provenance.
    generator: str
    generator_model: str = ""
    prompt_version: str = ""
    family: str = ""
    # The task this one is a variant of (a level harder or easier, sampling/evolve.py); "" for
    # a task drawn on its own.
    parent_task_id: str = ""
    # Who the agent is and where the task came from (imports, issue 11). Our own tasks keep the
    # defaults: the agent, the oracle and the do-nothing control run as `user` (uid 1000) in
    # /home/user. An imported task runs them as Harbor and Terminal-Bench do: "" = the image's
    # USER (root when it sets none) and the image's WORKDIR.
    agent_user: str = AGENT_USER
    workdir: str = AGENT_HOME
    # Build-context files that are not UTF-8 text: relative path -> base64 of their bytes; and
    # the build-context files (text or not) that are executable (mode 755 in the image).
    binary_files: dict[str, str] = Field(default_factory=dict)
    executable_files: list[str] = Field(default_factory=list)
    # The task's directory name where it was imported from (e.g. "evoeval/10"), and what its
    # task.toml / task.yaml said, section by section, for a faithful export ("config"), with
    # the quality record one of our exports carried ("quality", export/quality.py).
    source_name: str = ""
    source_metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("binary_files")
    @classmethod
    def _binary_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for path in files:
            if not is_context_path(path):
                raise ValueError(
                    f"binary file path {path!r} must be relative and inside the context"
                )
        return files

    @field_validator("context_files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for path in files:
            if not is_context_path(path):
                raise ValueError(
                    f"context file path {path!r} must be relative and inside the context"
                )
        return files

    @property
    def task_id(self) -> str:
        """Stable id: a hash of batch, index and content, so a re-run reproduces it."""
        return task_id_for(self.batch, self.index, self.instruction, self.truth)

    def truth_json(self) -> str:
        return json.dumps(self.truth, sort_keys=True, ensure_ascii=False)

    def stored_json(self) -> str:
        """The task as stored in the lake (`draft` and `task` columns): everything but the score,
        which has its own columns. A task with no parent stores no `parent_task_id`, as tasks
        did before variants existed."""
        exclude = {"score"} if self.parent_task_id else {"score", "parent_task_id"}
        return self.model_dump_json(exclude=exclude)

    @property
    def difficulty(self) -> str:
        return self.score.difficulty if self.score else "unknown"

    def provenance(self) -> dict[str, Any]:
        """Where the task comes from and how hard its solver found it, as written into exports
        (task.toml, task.yaml, trainer rows)."""
        score = self.score
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
            "solver_model": score.solver_model if score else "",
            "scored_attempts": score.scored_attempts if score else 0,
            "successes": score.successes if score else 0,
            "pass_rate": score.pass_rate if score else 0.0,
            "difficulty": self.difficulty,
        }


def is_context_path(path: str) -> bool:
    """A build-context file path: relative, inside the context, not the Dockerfile itself (the
    one rule the parser, the model and the importers apply)."""
    parts = PurePosixPath(path).parts
    return bool(path) and not path.startswith("/") and ".." not in parts and path != "Dockerfile"


def task_id_for(batch: str, index: int, instruction: str, truth: dict[str, Any]) -> str:
    payload = json.dumps(
        [batch, index, instruction, truth], sort_keys=True, ensure_ascii=False, default=str
    )
    return "et-" + hashlib.sha256(payload.encode()).hexdigest()[:16]


def content_hash(*parts: str | bytes, length: int = 16) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:length]


def task_seed(batch: str, index: int, salt: int = 0) -> int:
    """The seed of task `index` in `batch`: stable across runs and machines."""
    digest = hashlib.sha256(f"{batch}:{index}:{salt}".encode()).digest()
    return int.from_bytes(digest[:6], "big")
