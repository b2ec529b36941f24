"""The build stage: build the task's environment and check its initial state, repairing if
allowed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import docker.errors
import polars as pl

from endless_assets.generation import Environment, TaskGenerator
from endless_assets.models import OK, REJECTED, Task
from endless_assets.sandbox.containers.container import ContainerExited, TaskContainer
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.sandbox.containers.services import ServiceFailed
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.image.images import encode_context
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.stages.repair import FEEDBACK_LIMIT, Failed, RepairOutcome, cause, repair
from endless_assets.stages.stage_run import StageResult, StageRun, usage_metadata
from endless_assets.stages.tasks import ok_drafts

# What the engine did, never the task: OSError is the engine's connection broken under the
# Docker SDK (requests' errors).
ENGINE_ERRORS = (SandboxError, docker.errors.DockerException, OSError)


@dataclass
class EnvironmentOutcome(RepairOutcome):
    dockerfile: str = ""
    context_files: dict[str, str] = field(default_factory=dict)
    initial_test: str = ""
    image_tag: str = ""
    image_id: str = ""
    build_seconds: float = 0.0
    services: str = "[]"  # JSON, as the build used them (a repair may have fixed one)

    def columns(self) -> dict[str, Any]:
        return {
            "dockerfile": self.dockerfile,
            "context_files": json.dumps(self.context_files, sort_keys=True, ensure_ascii=False),
            "initial_test": self.initial_test,
            "image_tag": self.image_tag,
            "image_id": self.image_id,
            "build_seconds": self.build_seconds,
            "services": self.services,
        }


def build_environment(
    draft: Task,
    generator: TaskGenerator,
    sandbox: Sandbox,
    *,
    max_rounds: int | None = None,
    build_network: bool | None = None,
) -> EnvironmentOutcome:
    """Write (or take) the environment, build it, and run the initial-state test in it (a CPU
    slot held for each build, start and verdict only, not while the model writes).
    `build_network`: may RUN steps reach the network (None: as the generator says).

    What the task did is a rejection (`build_failed`, `container_failed` for a container that
    stops by itself, `initial_test_failed`); what the engine did is a harness error, always."""
    network = generator.needs_build_network if build_network is None else build_network
    # A service installs its server from Debian's packages: its build has the network unless
    # the run turned it off (imported tasks) or the configuration does (`build_network`).
    served = build_network is not False
    outcome = EnvironmentOutcome(task_id=draft.task_id, status=REJECTED)
    labels = {"task_id": draft.task_id, "batch": draft.batch}

    def check(env: Environment) -> Failed | None:
        # What is built and stored (the later stages rebuild it): with the agent's identity as
        # image labels, the binary and executable files in the context.
        dockerfile = identity_dockerfile(env.dockerfile, draft.agent_user, draft.workdir)
        context = encode_context(env.context_files, draft.binary_files, draft.executable_files)
        outcome.dockerfile, outcome.initial_test = dockerfile, env.initial_test
        outcome.context_files = context
        services = draft.services if env.services is None else env.services
        outcome.services = draft.model_copy(update={"services": services}).services_json()
        build = sandbox.build(
            dockerfile,
            context,
            network=network or (served and bool(services)),  # (installs their clients)
            services=services,
            service_network=served,
        )
        outcome.build_seconds += build.seconds
        if not build.ok:
            log = build.log[-FEEDBACK_LIMIT:]
            outcome.log("build", log)
            return Failed(
                f"build_failed: {_last_line(log)}",
                f"The Dockerfile failed to build. Build output (tail):\n{log}",
            )
        outcome.image_tag, outcome.image_id = build.tag, build.image_id
        try:
            with sandbox.container(build.tag, labels={**labels, "role": "initial-test"}) as box:
                verdict = _initial_verdict(box, env.initial_test, sandbox)
        except ContainerExited as exc:
            outcome.log("container", str(exc))
            what = (
                "one of the task's services"
                if isinstance(exc, ServiceFailed)
                else "a container of it"
            )
            return Failed(
                f"container_failed: {exc}",
                f"The image built, but {what} does not run: {exc}",
            )
        if verdict.passed:
            outcome.log("initial_test")
            return None
        out = verdict.output[-FEEDBACK_LIMIT:]
        outcome.log("initial_test", f"{verdict.summary()}\n{out}")
        return Failed(
            f"initial_test_failed: {verdict.summary()}{cause(out)}",
            "The image built, but the initial-state test did not pass in it "
            f"({verdict.summary()}). pytest output (tail):\n{out}",
        )

    rounds = generator.repair_rounds if max_rounds is None else max_rounds
    write = partial(generator.write_environment, draft)
    # keep_partial: what the generator could use of an unusable reply (e.g. a test without a
    # Dockerfile) is what it repairs next.
    return repair(
        outcome,
        rounds,
        write,
        check,
        "environment_unparsable",
        keep_partial=True,
        harness_errors=ENGINE_ERRORS,
        recover=sandbox.recover,
    )


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


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def run_environments(
    run: StageRun, descriptions: pl.DataFrame, decontamination: pl.DataFrame, network: bool | None
) -> StageResult:
    """The build stage over the described tasks no benchmark contaminates."""
    contaminated = decontamination.filter(pl.col("status") != OK)["task_id"].to_list()
    drafts = ok_drafts(descriptions.filter(~pl.col("task_id").is_in(contaminated)))
    run.log.info(f"{len(drafts)} tasks enter the build stage")
    if network is False:
        run.log.info(
            "imported Dockerfiles build without a network (set build_network explicitly, "
            "e.g. ENDLESS_BUILD_NETWORK=1, to let their RUN steps reach the registries)"
        )

    def work(draft: Task) -> EnvironmentOutcome:
        return build_environment(draft, run.generator, run.sandbox, build_network=network)

    rows = run.each(drafts, work, EnvironmentOutcome, label="environment")
    violations = [
        f"{r['task_id']}: status ok without an image"
        for r in rows
        if r["status"] == OK and not r["image_id"]
    ]
    return run.result(
        rows,
        violations,
        funnel_step="environment",
        **usage_metadata(rows),
        repair_rounds_used=sum(r["attempts"] for r in rows),
        **run.generator.run_metadata(),
    )
