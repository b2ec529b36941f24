"""The one model every generator produces and every later stage consumes.

Stage I (describe) yields a `Task`. The procedural generator fills every field at once; the
LLM generator fills the description and truth first and the environment and tests in stages II
and III. After stage I nothing can tell the two paths apart.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
    # Provenance.
    generator: str
    generator_model: str = ""
    prompt_version: str = ""
    family: str = ""

    @field_validator("context_files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for path in files:
            parts = path.split("/")
            if path.startswith("/") or ".." in parts or not path or path == "Dockerfile":
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
