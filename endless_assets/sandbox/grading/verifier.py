"""Grading in a verifier container: a fresh container started from a snapshot of the agent's.

Two kinds of verdict are not given in the agent's own container (verdict.py decides):

- a root agent's. Root could read the test as the grader writes it, or signal the grader, or
  leave a process that changes files while the test runs. So the agent's container is paused
  and committed (`docker commit`), its processes are all killed, and the test runs in a new
  container of that snapshot: the agent's files, none of its processes. No ENTRYPOINT runs
  there, and PID 1's program, the grader's `env` and its interpreter are named by the paths
  the first grader saw before the agent's first command.
- a task graded by its own script (Harbor's tests/test.sh; bundle.py): the script runs as the
  verifier's user (root unless the task says otherwise), and anything it runs could write the
  reward file; in a verifier container nothing the agent left running can.

The code that grades must be the image's own, and the agent's files only data. Before the
snapshot, with the container paused until it is committed (a process the agent left running
could otherwise change a file after the check passed it), system_paths.check holds what the
agent changed (changes.py: its overlay upper directory, or `docker diff`; less what the engine
itself changed at start) against the system locations the first grader named: any change there
that the task's reference solution does not make itself is tampering, a verdict of 0 naming the
paths. In the verifier container those locations are mounted read-only, so nothing a test or
script runs can change them while grading, and the grader, the script's shell, its tools and
every interpreter it starts are the image's, byte for byte (offline_pytest.py: how pytest and
Python start). Identities are numbers, never names looked up in the agent's /etc/passwd.
Bytecode caches the agent wrote among what grading loads are never read: the verifier's
interpreters then keep their own on a tmpfs. Configuration the agent changed and the reference
does not is the image's own in the verifier, and volumes over system locations are fresh
(verifier_view.py). A grader lost once its test started is a verdict of 0, never a harness
error (`_lost`): only what the test ran can have done it. What remains is the docs'
(docs/sandbox.md): a test that imports the agent's code, a script that believes what the
agent's program prints, and what the reference solution itself may change.
"""

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
    """The verdict in a verifier container (module docstring). `learn`: the reference solution's
    episode (the validation stage): what it changed in the system locations is returned in the
    verdict (`system_changes`) instead of being tampering."""
    halted = stop_agent and uid == 0  # a root agent's: stopped while graded
    homes = verifier_view.homes_of(container, spec)
    image, finding = snapshot(
        container, check=stop_agent, allowed=spec.allowed, learn=learn, homes=homes
    )
    if finding.tampered:
        return _no_verdict(spec, finding.detail(), started)
    if spec.script:
        timeout = spec.timeout or timeout

    def stop() -> None:
        if halted:
            # Every process dies, and none starts again (an ENTRYPOINT the agent changed, say,
            # with a VOLUME the verifier shares) until the verdict is given.
            container.halt()
        elif stop_agent:
            stop_agent_processes(container, uid)

    # A halted container starts again when something is to run in it next (a stage's next
    # check): a rollout's, removed next, never does.
    shared, fresh = verifier_view.shared_volumes(container, homes)
    prepare = verifier_view.put_back(container, finding.pristine)
    view = {"shared_volumes": shared, "prepare": prepare}
    verdict = _verdict_in(container, image, stop, spec, uid, timeout, started, finding, view)
    detail = "; ".join(filter(None, (verdict.detail, finding.unseen(), fresh)))
    return dataclasses.replace(verdict, system_changes=finding.changed, detail=detail)


def _verdict_in(
    container: TaskContainer,
    image: str,
    stop: Callable[[], None],
    spec: bundle.Verifier,
    uid: int,
    timeout: float,
    started: float,
    finding: Finding,
    view: dict,
) -> Verdict:
    own_caches = finding.own_caches
    with verifier_container(container, image, stop, **view) as box:
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
        if not spec.script:
            return reply_verdict(reply, started)
    return script_verdict(spec.script, reply, time.monotonic() - started)


def _lost(box: TaskContainer, spec: bundle.Verifier, exc: GraderLost, started: float) -> Verdict:
    """The verifier's grader was lost. Before its test started, no code of the agent's had run
    there: a harness error. After, only what the test ran can have done it (killed or stopped
    the grader, or the container's own processes: nothing else runs in a verifier), unless the
    engine itself is gone (a harness error): an error, reward 0, scored, never a retry."""
    if not exc.running:
        raise exc
    try:
        box.client.api.inspect_container(box.id)
    except (docker.errors.DockerException, OSError) as gone:
        raise SandboxError(f"the verifier container is gone: {gone}") from exc
    verdict = _no_verdict(spec, f"{DISTURBED}: {exc}", started)
    return dataclasses.replace(verdict, status="error")


def _no_verdict(spec: bundle.Verifier, detail: str, started: float) -> Verdict:
    return Verdict(
        passed=False,
        status="tampered",
        exit_code=-1,
        tests=0,
        failures=0,
        errors=0,
        output="",
        seconds=time.monotonic() - started,
        script=spec.script,
        detail=detail,
    )


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
    """What the agent changed, held against the system locations and configuration (of
    `homes`: root's unless given) and what the reference solution changes there
    (system_paths.check)."""
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
    """What differs in the container's files from its image (changes.py: read in its overlay
    upper directory when we can, else `docker diff`)."""
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
    what it may not (`tampering`). The container is paused from before the check until after
    the commit: a process the agent left running cannot change a file once the check has
    passed it (it could, between a check and a later pause)."""
    paused = _pause(container)
    try:
        unchecked = Finding(own_caches=False)
        finding = (
            check_changes(container, allowed or {}, learn=learn, homes=homes)
            if check
            else unchecked
        )
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
    """A new container of `image`, a snapshot of `container` (see the module docstring), with
    the system locations the first grader named and /etc read-only (`read_only`), the agent's
    volumes (`shared_volumes`: only those) and its layer prepared (`prepare`: verifier_view.py);
    the agent's own container has none of its processes left afterwards (`stop_agent()`). The
    image is removed at the end."""
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
    """Snapshot the container's files as an image, labelled with the process that made it; its
    id. `pause`: the engine pauses its processes meanwhile (False: the caller has paused them)."""
    with engine_failure(f"committing container {container.container.short_id}"):
        image = container.container.commit(
            repository=VERIFIER_REPOSITORY,
            tag=secrets.token_hex(6),
            pause=pause,
            changes=[f'LABEL {OWNER_LABEL}="{owner_tag()}"'],
        )
    return image.id
