"""The one model every generator produces and every later stage consumes.

The describe stage yields a `Task`. The procedural generator fills every field at once; the LLM
generator fills the description and truth first and the environment and tests in the build and
validation stages. After the describe stage nothing can tell the two paths apart. The solver stage
adds the `score`; exports read the same model back from `filtered_dataset`. Here too: the task
statuses every stage writes, and the solver stage's arithmetic (pass@k, difficulty, the keep rule)
that makes the `score`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from endless_assets.solver_id import NO_SOLVER, SolverId

# The status of a task's row in every stage table. A rejected task keeps its row with a
# `reject_reason`; `harness_error` is the engine failing, never a rejection of the task.
OK = "ok"
REJECTED = "rejected"
HARNESS_ERROR = "harness_error"
SKIPPED = "skipped"  # an earlier stage rejected the task

# Difficulty labels from a solver's pass rate over its scored attempts (the same thresholds in
# SQL views and in exports): a task every attempt solves is easy, one solved at least once but in
# under a quarter of attempts is hard; never solved is "unsolved" (no label in Harbor terms).
DIFFICULTY_THRESHOLDS: tuple[tuple[str, float], ...] = (("easy", 0.75), ("medium", 0.25))


def difficulty_label(pass_rate: float | None, attempts: int = 1) -> str:
    """easy (>= 0.75), medium (>= 0.25), hard (> 0), unsolved (0), unknown (no scored attempt)."""
    if pass_rate is None or attempts <= 0:
        return "unknown"
    for label, floor in DIFFICULTY_THRESHOLDS:
        if pass_rate >= floor:
            return label
    return "hard" if pass_rate > 0 else "unsolved"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from n attempts with c successes (Chen et al., 2021)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or k > n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_curve(n: int, c: int) -> list[float]:
    """pass@k for every k from 1 to n (element i is pass@(i+1)); empty when n is 0."""
    return [pass_at_k(n, c, k) for k in range(1, n + 1)]


@dataclass(frozen=True)
class TaskScore:
    """One task's attempts by one solver, reduced to what the keep rule and a trainer need, and
    the keep decision (the solver stage's part of a `Task`)."""

    attempts: int  # rows for the task (scored or not)
    harness_errors: int
    scored_attempts: int  # attempts - harness_errors: the n of pass@k
    successes: int
    pass_at_n: float  # pass@k with k = n: solved at least once
    curve: list[float]
    pass_rate: float  # successes / scored_attempts = pass@1: the difficulty
    mean_turns_solved: float | None
    solver: SolverId = NO_SOLVER  # filtered_dataset's solver_model and solver_policy
    kept: bool = False
    drop_reason: str = ""

    @property
    def difficulty(self) -> str:
        return difficulty_label(self.pass_rate, self.scored_attempts)


def score_task(
    rollouts: Sequence[Mapping[str, Any]],
    rule: KeepRule | None = None,
    *,
    solver: SolverId = NO_SOLVER,
) -> TaskScore:
    """Score a task from its `solver_rollouts` rows (reward null = harness error, not 0) and
    decide whether `rule` keeps it."""
    scored = [r for r in rollouts if r["reward"] is not None]
    solved = [r for r in scored if r["reward"] == 1]
    n, c = len(scored), len(solved)
    kept, reason = (rule or KeepRule()).decide(n, c)
    return TaskScore(
        attempts=len(rollouts),
        harness_errors=len(rollouts) - n,
        scored_attempts=n,
        successes=c,
        pass_at_n=pass_at_k(n, c, n) if n else 0.0,
        curve=pass_at_curve(n, c),
        pass_rate=c / n if n else 0.0,
        mean_turns_solved=sum(r["n_turns"] for r in solved) / c if c else None,
        solver=solver,
        kept=kept,
        drop_reason=reason,
    )


def score_tasks(
    tasks: Sequence[Task],
    rollouts: Mapping[str, Sequence[Mapping[str, Any]]],
    rule: KeepRule,
    *,
    solver: SolverId,
) -> list[Task]:
    """The solver stage's last step: each task with its score by one solver (`rollouts` by task
    id)."""
    return [
        task.model_copy(
            update={"score": score_task(rollouts.get(task.task_id, []), rule, solver=solver)}
        )
        for task in tasks
    ]


@dataclass(frozen=True)
class EpisodeLimits:
    """What one episode may take (the solver settings' `limits()`; fixed ones for checks)."""

    max_turns: int = 16
    command_timeout: float = 60.0
    episode_seconds: float = 900.0
    output_cap: int = 50_000
    test_timeout: float = 180.0


@dataclass(frozen=True)
class KeepRule:
    """Keep a task when its pass rate is inside [min_pass_rate, max_pass_rate] and it was solved.

    The default is the paper's rule: solved at least once. `max_pass_rate < 1` drops tasks solved
    in every attempt, which teach nothing under a binary reward.
    """

    min_pass_rate: float = 0.0
    max_pass_rate: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_pass_rate <= self.max_pass_rate <= 1:
            raise ValueError(
                "need 0 <= min_pass_rate <= max_pass_rate <= 1, got "
                f"{self.min_pass_rate} and {self.max_pass_rate}"
            )

    def describe(self) -> str:
        if (self.min_pass_rate, self.max_pass_rate) == (0.0, 1.0):
            return "solved at least once"
        return f"solved at least once, pass rate in [{self.min_pass_rate}, {self.max_pass_rate}]"

    def decide(self, scored: int, successes: int) -> tuple[bool, str]:
        if scored == 0:
            return False, "no_scored_attempts: every attempt was a harness error"
        if successes == 0:
            return False, f"unsolved: 0 of {scored} attempts passed"
        rate = successes / scored
        if rate < self.min_pass_rate:
            return False, f"too_hard: pass rate {rate:.2f} < {self.min_pass_rate:.2f}"
        if rate > self.max_pass_rate:
            return False, f"too_easy: pass rate {rate:.2f} > {self.max_pass_rate:.2f}"
        return True, ""


AGENT_USER = "user"
AGENT_HOME = "/home/user"
SERVICE_NAME = r"^[a-z][a-z0-9-]{0,30}$"  # a DNS label: what the agent reaches it by
SERVICE_ALIAS = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"  # a compose service name (`my_db`, `DB`)
RESERVED_NAMES = ("agent", "localhost")


class Service(BaseModel):
    """A container beside the agent's (a database, a web server, a queue): built FROM the base
    image like the task's own, started with `command` as PID 1 on the episode's private network
    (no route out), reached by `name`, ready once `ready` (a shell command run in it) exits 0
    within `ready_seconds`; with its own limits, smaller than the agent's."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=SERVICE_NAME)
    dockerfile: str = Field(min_length=1)
    context_files: dict[str, str] = Field(default_factory=dict)
    command: list[str] = Field(min_length=1)
    environment: dict[str, str] = Field(default_factory=dict)
    ready: str = Field(min_length=1)
    ready_seconds: float = Field(default=60.0, gt=0, le=600)
    memory: str = "512m"
    cpus: float = Field(default=0.5, gt=0, le=4)
    pids: int = Field(default=256, ge=16, le=4096)
    disk: str = "1g"  # what it may write (the disk budget, as the agent's `disk` setting)
    # The services that must be ready before this one starts (compose's depends_on).
    after: list[str] = Field(default_factory=list)
    # More names it is reached by (an imported compose name that is not a DNS label).
    aliases: list[Annotated[str, Field(pattern=SERVICE_ALIAS)]] = Field(default_factory=list)

    @field_validator("context_files")
    @classmethod
    def _context_paths(cls, files: dict[str, str]) -> dict[str, str]:
        for path in files:
            if not is_context_path(path):
                raise ValueError(f"service file path {path!r} must be relative and inside it")
        return files

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name in RESERVED_NAMES:
            raise ValueError(f"a service may not be named {name!r}")
        return name


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
    # Environment (the build stage): a Dockerfile whose FROM is the base image, plus the files of
    # its build context (relative path -> text). Empty until the build stage on the LLM path.
    dockerfile: str | None = None
    context_files: dict[str, str] = Field(default_factory=dict)
    initial_test: str | None = None
    # Grading (the validation stage).
    completion_test: str | None = None
    # Score (the solver stage): the solver's attempts and the keep decision. None until then.
    score: TaskScore | None = None
    # Provenance.
    generator: str
    generator_model: str = ""
    prompt_version: str = ""
    family: str = ""
    # The task this one is a variant of (a level harder or easier, sampling/evolve.py); "" for
    # a task drawn on its own.
    parent_task_id: str = ""
    # Who the agent is and where the task came from. Our own tasks keep the
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
    # the quality record one of our exports carried ("quality", interop/quality.py).
    source_name: str = ""
    source_metadata: dict[str, Any] = Field(default_factory=dict)
    # The containers beside the agent's on the episode's private network (none: one container).
    services: list[Service] = Field(default_factory=list)

    @field_validator("services")
    @classmethod
    def _unique_services(cls, services: list[Service]) -> list[Service]:
        names = [n for s in services for n in (s.name, *s.aliases)]
        lowered = [n.lower() for n in names]  # (the engine's resolver ignores case)
        if len(set(lowered)) != len(names) or set(RESERVED_NAMES) & set(lowered):
            raise ValueError(f"service names and aliases must be unique and not reserved: {names}")
        start_order(services)  # every `after` names a service, and none waits on itself
        return services

    @field_validator("binary_files", "context_files")
    @classmethod
    def _context_paths(cls, files: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        kind = "binary" if info.field_name == "binary_files" else "context"
        for path in files:
            if not is_context_path(path):
                raise ValueError(
                    f"{kind} file path {path!r} must be relative and inside the context"
                )
        return files

    @property
    def task_id(self) -> str:
        """Stable id: a hash of batch, index and content (the services' names too, where there
        are any: a one-container task's id is as it always was), so a re-run reproduces it.
        Like the task's Dockerfile, what the build stage may repair (a service's Dockerfile,
        command, readiness) is not in it."""
        return task_id_for(self.batch, self.index, self.instruction, self.truth, self.services)

    def services_json(self) -> str:
        """The services as the lake's `services` column holds them ("[]" for none)."""
        return json.dumps([s.model_dump() for s in self.services], sort_keys=True)

    def truth_json(self) -> str:
        return json.dumps(self.truth, sort_keys=True, ensure_ascii=False)

    def stored_json(self) -> str:
        """The task as stored in the lake (`draft` and `task` columns): everything but the score,
        which has its own columns. A task with no parent stores no `parent_task_id`, as tasks
        did before variants existed, and a one-container task no `services`."""
        exclude = {"score"} | ({"parent_task_id"} if not self.parent_task_id else set())
        exclude |= {"services"} if not self.services else set()
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
            "solver_model": str(score.solver) if score else "",
            "scored_attempts": score.scored_attempts if score else 0,
            "successes": score.successes if score else 0,
            "pass_rate": score.pass_rate if score else 0.0,
            "difficulty": self.difficulty,
        }


def start_order(services: Sequence[Service]) -> list[list[Service]]:
    """The services in waves: each wave's `after` names only services of earlier waves.
    ValueError naming an unknown name or a cycle."""
    known = {s.name for s in services}
    for s in services:
        unknown = sorted(set(s.after) - known)
        if unknown:
            raise ValueError(f"service {s.name} starts after {', '.join(unknown)}: no such service")
    waves: list[list[Service]] = []
    placed: set[str] = set()
    while len(placed) < len(services):
        wave = [s for s in services if s.name not in placed and set(s.after) <= placed]
        if not wave:
            stuck = sorted(s.name for s in services if s.name not in placed)
            raise ValueError(f"services {', '.join(stuck)} wait on each other (a cycle in after)")
        waves.append(wave)
        placed |= {s.name for s in wave}
    return waves


def is_context_path(path: str) -> bool:
    """A build-context file path: relative, inside the context, not the Dockerfile itself (the
    one rule the parser, the model and the importers apply)."""
    parts = PurePosixPath(path).parts
    return bool(path) and not path.startswith("/") and ".." not in parts and path != "Dockerfile"


def task_id_for(
    batch: str,
    index: int,
    instruction: str,
    truth: dict[str, Any],
    services: Sequence[Service] = (),
) -> str:
    parts: list[Any] = [batch, index, instruction, truth]
    if services:  # only then: every one-container task keeps its id
        parts.append([s.name for s in services])
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
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
