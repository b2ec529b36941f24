"""Stage II: build the task's environment and check its initial state, repairing if allowed."""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import docker.errors

from endless_assets.generation import Environment, GenerationError, TaskGenerator, Usage
from endless_assets.models import Task
from endless_assets.sandbox.client import SandboxError
from endless_assets.sandbox.container import ContainerExited, TaskContainer
from endless_assets.sandbox.identity import identity_dockerfile
from endless_assets.sandbox.images import encode_context
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.sandbox.verdict import run_pytest
from endless_assets.stages import HARNESS_ERROR, OK, REJECTED

FEEDBACK_LIMIT = 4000


@dataclass
class EnvironmentOutcome:
    task_id: str
    status: str
    reject_reason: str = ""
    dockerfile: str = ""
    context_files: dict[str, str] = field(default_factory=dict)
    initial_test: str = ""
    image_tag: str = ""
    image_id: str = ""
    attempts: int = 0
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    build_seconds: float = 0.0
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)

    def attempt_log_json(self) -> str:
        return json.dumps(self.attempt_log, ensure_ascii=False)


def build_environment(
    draft: Task,
    generator: TaskGenerator,
    sandbox: Sandbox,
    *,
    max_rounds: int | None = None,
    docker_slots: AbstractContextManager[Any] | None = None,
    build_network: bool | None = None,
) -> EnvironmentOutcome:
    """Write (or take) the environment, build it, and run the initial-state test in it.

    `docker_slots` (e.g. a semaphore) is held around each build and container only, so many
    tasks can wait on a model while few use Docker at a time. `build_network`: may RUN steps
    reach the network (None: as the generator says).

    What the task did is a rejection: a step of its Dockerfile failed (`build_failed`), its
    container stops by itself, e.g. `ENTRYPOINT ["/bin/false"]` (`container_failed`), its
    initial-state test fails. What the engine did (a fault during a build, a start or an exec)
    is a harness error, always.
    """
    network = generator.needs_build_network if build_network is None else build_network
    started = time.monotonic()
    slot = docker_slots if docker_slots is not None else nullcontext()
    rounds = max(1, max_rounds if max_rounds is not None else generator.repair_rounds)
    outcome = EnvironmentOutcome(task_id=draft.task_id, status=REJECTED)
    feedback: str | None = None
    previous: Environment | None = None
    labels = {"task_id": draft.task_id, "batch": draft.batch}
    try:
        for round_no in range(1, rounds + 1):
            outcome.attempts = round_no
            try:
                env, usage = generator.write_environment(
                    draft, numbered_feedback(feedback, round_no - 1, rounds), previous
                )
            except GenerationError as exc:
                outcome.usage.add(exc.usage)
                outcome.attempt_log.append({"round": round_no, "stage": "write", "error": str(exc)})
                outcome.reject_reason = f"environment_unparsable: {exc}"
                feedback = f"Your previous reply could not be used: {exc}"
                # What the generator could use of its reply (e.g. a test without a Dockerfile).
                previous = exc.partial or previous
                continue
            outcome.usage.add(usage)
            previous = env
            # What is built (and stored, for the later stages to rebuild the same image): the
            # environment, with the agent's identity as image labels when it is not ours, and
            # the task's binary and executable files in the context.
            dockerfile = identity_dockerfile(env.dockerfile, draft.agent_user, draft.workdir)
            context = encode_context(env.context_files, draft.binary_files, draft.executable_files)
            outcome.dockerfile, outcome.initial_test = dockerfile, env.initial_test
            outcome.context_files = context
            with slot:
                build = sandbox.build(dockerfile, context, labels=labels, network=network)
            outcome.build_seconds += build.seconds
            if not build.ok:
                log = build.log[-FEEDBACK_LIMIT:]
                outcome.attempt_log.append({"round": round_no, "stage": "build", "error": log})
                outcome.reject_reason = f"build_failed: {_last_line(log)}"
                feedback = f"The Dockerfile failed to build. Build output (tail):\n{log}"
                continue
            outcome.image_tag, outcome.image_id = build.tag, build.image_id
            try:
                with (
                    slot,
                    sandbox.container(build.tag, labels={**labels, "role": "initial-test"}) as box,
                ):
                    verdict = _initial_verdict(box, env.initial_test, sandbox)
            except ContainerExited as exc:
                outcome.attempt_log.append(
                    {"round": round_no, "stage": "container", "error": str(exc)}
                )
                outcome.reject_reason = f"container_failed: {exc}"
                feedback = f"The image built, but a container of it does not run: {exc}"
                continue
            if verdict.passed:
                outcome.attempt_log.append(
                    {"round": round_no, "stage": "initial_test", "error": ""}
                )
                outcome.status, outcome.reject_reason = OK, ""
                break
            out = verdict.output[-FEEDBACK_LIMIT:]
            outcome.attempt_log.append(
                {"round": round_no, "stage": "initial_test", "error": f"{verdict.summary()}\n{out}"}
            )
            outcome.reject_reason = f"initial_test_failed: {verdict.summary()}{cause(out)}"
            feedback = (
                "The image built, but the initial-state test did not pass in it "
                f"({verdict.summary()}). pytest output (tail):\n{out}"
            )
    except (SandboxError, docker.errors.DockerException, OSError) as exc:
        # OSError: the engine's connection broke under the Docker SDK (requests' errors).
        outcome.status = HARNESS_ERROR
        outcome.reject_reason = f"harness: {exc}"
    outcome.seconds = time.monotonic() - started
    return outcome


def _initial_verdict(box: TaskContainer, initial_test: str, sandbox: Sandbox):
    try:
        return run_pytest(
            box,
            initial_test,
            filename="test_initial_state.py",
            timeout=sandbox.config.test_timeout,
            stop_agent=False,
        )
    except SandboxError:
        box.raise_if_exited()  # its own ENTRYPOINT stopped it meanwhile: the task's fault
        raise


def numbered_feedback(feedback: str | None, failed_round: int, rounds: int) -> str | None:
    """Feedback that says which attempt failed: the model learns how many remain, and two
    rounds that failed the same way still make different requests (no cached repeat)."""
    if feedback is None:
        return None
    return f"Attempt {failed_round} of {rounds} did not work. {feedback}"


def cause(output: str, label: str = "output", limit: int = 400) -> str:
    """The end of a failing step's output, on one line, for a reject reason ("" if none): its
    last lines that say something (not pytest's rules and banners)."""
    lines = [
        line.strip()
        for line in output.strip().splitlines()
        if line.strip() and not set(line.strip()) <= set("=_-") and not line.startswith("====")
    ]
    text = " | ".join(lines[-4:])
    if not text:
        return ""
    return f"; {label}: " + (text if len(text) <= limit else "..." + text[-limit:])


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"
