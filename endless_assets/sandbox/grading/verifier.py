"""Grading in a verifier container: a fresh container of a snapshot of the agent's, none of whose
processes runs there (verdict.py decides when; docs/sandbox.md's threat model says why).

Two kinds of verdict are given there: a root agent's (root could read the test, signal the
grader, or leave a process that changes files while the test runs) and a task's own script's
(whatever the agent left running could write the reward file). The code that grades must be
the image's own and the agent's files only data: with the container paused from the check
until the commit (a process left running could change a file the check had passed),
system_paths.check holds what the agent changed against the system locations the first grader
named; a change there that the reference solution does not make is tampering, a verdict of 0.
In the verifier those locations are read-only, identities are numbers (never names looked up
in the agent's /etc/passwd), bytecode caches the agent wrote among what grading loads are not
read, and the agent's configuration and volumes over system locations are set aside
(verifier_view.py). A grader lost once its test started is a scored 0 (`_lost`)."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import docker.errors

from endless_assets.sandbox.containers.changes import change_key, container_changes
from endless_assets.sandbox.containers.container import TaskContainer, task_container
from endless_assets.sandbox.engine.client import (
    OWNER_LABEL,
    SandboxError,
    engine_failure,
    owner_tag,
)
from endless_assets.sandbox.grading import bundle, system_paths, verifier_view
from endless_assets.sandbox.grading.script_route import script_request, script_verdict
from endless_assets.sandbox.grading.system_paths import Finding
from endless_assets.sandbox.grading.verdict import (
    DISTURBED,
    GraderLost,
    InterpreterMoved,
    Verdict,
    grader_for,
    pytest_request,
    reply_verdict,
    stop_agent_processes,
)

VERIFIER_REPOSITORY = "endless-verifier"
PYCACHE = "/verifier/pycache"  # on the verifier's tmpfs: no cache the agent wrote is ever read
UNDESCRIBED = Finding(
    ("(what grading runs was not described before the agent's first command)",), 1, False
)


class Snapshot(NamedTuple):
    image: str  # the snapshot's image id ("" when the agent tampered)
    finding: Finding  # what the check found (system_paths.check)


def grade_in_verifier(
    container: TaskContainer,
    spec: bundle.Verifier,
    uid: int,
    timeout: float,
    stop_agent: bool,
    started: float,
    *,
    learn: bool = False,
) -> Verdict:
    """The verdict in a verifier container. `learn`: the reference solution's episode, whose
    changes to the system locations are returned (`system_changes`), not tampering."""
    homes = verifier_view.homes_of(container, spec)
    image, finding = snapshot(
        container, check=stop_agent, allowed=spec.allowed, learn=learn, homes=homes
    )
    if finding.tampered:
        return _no_verdict(spec, finding.detail(), started)
    timeout = (spec.timeout or timeout) if spec.script else timeout

    def stop() -> None:
        if stop_agent and uid == 0:
            # A root agent's: every process dies, and none starts again (an ENTRYPOINT it
            # changed, with a VOLUME the verifier shares) until something is to run in it next
            # (a rollout's, removed next, never does).
            container.halt()
        elif stop_agent:
            stop_agent_processes(container, uid)

    shared, fresh = verifier_view.shared_volumes(container, homes)
    prepare = verifier_view.put_back(container, finding.pristine)
    with verifier_container(container, image, stop, shared_volumes=shared, prepare=prepare) as box:
        verdict = _verdict_in(box, spec, uid, timeout, started, finding.own_caches)
    detail = "; ".join(filter(None, (verdict.detail, finding.unseen(), fresh)))
    return dataclasses.replace(verdict, system_changes=finding.changed, detail=detail)


def _verdict_in(
    box: TaskContainer,
    spec: bundle.Verifier,
    uid: int,
    timeout: float,
    started: float,
    own_caches: bool,
) -> Verdict:
    prefix = "" if own_caches else PYCACHE
    try:
        grader = grader_for(box, pycache_prefix=prefix, preload=not spec.script)
    except InterpreterMoved as exc:
        return _no_verdict(spec, str(exc), started)
    if spec.script:
        request = script_request(box, spec, timeout, own_caches=own_caches)
    else:
        flags = {"stop_agent": False, "verifier": True}
        request = pytest_request(box, spec.test_name, spec.test, timeout, uid, **flags)
    try:
        reply = grader.ask(request, deadline=time.monotonic() + timeout + 60)
    except GraderLost as exc:
        return _lost(box, spec, exc, started)
    if spec.script:
        return script_verdict(spec.script, reply, time.monotonic() - started)
    return reply_verdict(reply, started)


def _lost(box: TaskContainer, spec: bundle.Verifier, exc: GraderLost, started: float) -> Verdict:
    """The verifier's grader was lost. Before its test started, no code of the agent's had run
    there: a harness error. After, only what the test ran can have done it (nothing else runs
    in a verifier), unless the engine itself is gone: an error, reward 0, scored, never retried."""
    if not exc.running:
        raise exc
    try:
        box.client.api.inspect_container(box.id)
    except (docker.errors.DockerException, OSError) as gone:
        raise SandboxError(f"the verifier container is gone: {gone}") from exc
    return _no_verdict(spec, f"{DISTURBED}: {exc}", started, status="error")


def _no_verdict(
    spec: bundle.Verifier, detail: str, started: float, status: str = "tampered"
) -> Verdict:
    seconds = time.monotonic() - started
    return Verdict(False, status, -1, 0, 0, 0, "", seconds, script=spec.script, detail=detail)


def tampering(container: TaskContainer, allowed: dict[str, str] | None = None) -> str:
    """The first path the agent changed that it may not (system_paths.check); "" if none."""
    finding = check_changes(container, allowed or {})
    return finding.tampered[0] if finding.tampered else ""


def check_changes(
    container: TaskContainer,
    allowed: dict[str, str],
    *,
    learn: bool = False,
    homes: list[str] | None = None,
) -> Finding:
    """What the agent changed, held against the system locations (system_paths.check)."""
    if container.protected is None:
        return UNDESCRIBED
    engine = container.engine_changes
    changes = [c for c in diff(container) if change_key(c) not in engine]
    return system_paths.check(
        changes,
        system=container.system,
        protected=container.protected,
        allowed=allowed,
        upper=container.upper_dir,
        learn=learn,
        homes=verifier_view.homes_of(container) if homes is None else homes,
        restorable=bool(container.lower_dirs),  # (pristine.py reads the image's layers there)
        workdir=container.agent.workdir,
    )


def diff(container: TaskContainer) -> list[dict]:
    """What differs in the container's files from its image (changes.py)."""
    return container_changes(container.client, container.id, container.upper_dir)


def snapshot(
    container: TaskContainer,
    *,
    check: bool,
    allowed: dict[str, str] | None = None,
    learn: bool = False,
    homes: list[str] | None = None,
) -> Snapshot:
    """A snapshot of the container's files, or none when `check` finds that the agent changed
    what it may not. The container is paused from before the check until after the commit: a
    process the agent left running cannot change a file once the check has passed it."""
    paused = _pause(container)
    try:
        finding = Finding(own_caches=False)
        if check:
            finding = check_changes(container, allowed or {}, learn=learn, homes=homes)
        if finding.tampered:
            return Snapshot("", finding)
        return Snapshot(commit(container, pause=False), finding)
    finally:
        if paused:
            with contextlib.suppress(docker.errors.DockerException, OSError):
                container.client.api.unpause(container.id)


# A freeze the OCI runtime could not finish in time ("unable to freeze": a loaded machine, many
# processes starting) is engine trouble, not the agent's: tried this many times, backing off.
PAUSE_TRIES = 4


def _pause(container: TaskContainer) -> bool:
    """Pause the container; False if it is not running (it stopped: no process can act)."""
    for attempt in range(PAUSE_TRIES):
        try:
            container.client.api.pause(container.id)
            return True
        except (docker.errors.DockerException, OSError) as exc:
            if not container.running():
                return False
            if "freeze" not in str(exc) or attempt + 1 == PAUSE_TRIES:
                short = container.container.short_id
                raise SandboxError(f"pausing container {short}: {exc}") from exc
            time.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def verifier_container(
    container: TaskContainer,
    image: str,
    stop_agent: Callable[[], None],
    *,
    read_only: bool = True,
    shared_volumes: list[str] | None = None,
    prepare: Callable[[str], None] | None = None,
) -> Iterator[TaskContainer]:
    """A new container of `image`, a snapshot of `container`, once `stop_agent()` left none of
    the agent's processes: the system locations and /etc read-only (`read_only`), only the
    agent's `shared_volumes`, its layer prepared (`prepare`: verifier_view.py). The image is
    removed at the end."""
    try:
        stop_agent()
        programs = container.grading_programs
        sleep = programs.get("sleep", "sleep")
        locked = [*container.system, *system_paths.CONFIG_DIRS] if read_only else []
        locked = system_paths.read_only(locked)
        with task_container(
            container.client,
            image,
            limits=container.limits,
            labels={"role": "verifier"},
            verifier_of=container,
            command=[sleep, "infinity"],
            read_only_paths=locked,
            shared_volumes=shared_volumes,
            prepare=prepare,
            network=container.network,  # its test may ask the episode's services
        ) as box:
            box.grading_programs = dict(programs)
            box.protected = container.protected
            box.interpreter = container.interpreter
            box.system = list(container.system)
            box.absent = list(container.absent)
            box.image_env = system_paths.grading_env(container.image_env)
            yield box
    finally:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.client.images.remove(image, force=True, noprune=False)


def commit(container: TaskContainer, *, pause: bool = True) -> str:
    """Snapshot the container's files as an image labelled with its maker; its id. `pause`: the
    engine pauses its processes meanwhile (False: the caller has)."""
    with engine_failure(f"committing container {container.container.short_id}"):
        image = container.container.commit(
            repository=VERIFIER_REPOSITORY,
            tag=secrets.token_hex(6),
            pause=pause,
            changes=[f'LABEL {OWNER_LABEL}="{owner_tag()}"'],
        )
    return image.id
