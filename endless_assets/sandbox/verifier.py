"""Grading in a verifier container: a fresh container started from a snapshot of the agent's.

Two kinds of verdict are not given in the agent's own container (verdict.py decides):

- a root agent's. Root could read the test as the grader writes it, or signal the grader, or
  leave a process that changes files while the test runs. So the agent's container is paused
  and committed (`docker commit`), its processes are all killed (a restart), and the test runs
  in a new container of that snapshot: the agent's files, none of its processes. No ENTRYPOINT
  runs there and PID 1's program, the grader's `env` and its interpreter are named by the paths
  the first grader saw before the agent's first command.
- a task graded by its own script (Harbor's tests/test.sh; bundle.py): the script runs as the
  verifier's user (root unless the task says otherwise), and anything it runs could write the
  reward file; in a verifier container nothing the agent left running can.

What a root agent can still do is change the files the grader itself runs: the image's own
interpreter, pytest, the dynamic loader. Before grading, with the container paused until it is
committed (`snapshot`: a process the agent left running could otherwise change a file after the
check passed it), `tampering` compares the agent's changes (changes.py: read in its overlay upper
directory, or `docker diff`; less what the engine had changed when the container started: Podman
touches /etc) with what the first grader described (grader_script.describe): any change there
but to bytecode caches is a verdict of 0 without grading. A bytecode cache the agent wrote or
removed there (Python writes them as it imports) is never read: the verifier's interpreter then
keeps its caches on its own tmpfs (`-X pycache_prefix`, compiling what it imports: ~0.6 CPU-s
more); where the agent changed none, it reads the image's own. What remains (see the README's
threat model): a program the test itself runs as root can still change files the test process
loads later, and a test that imports the agent's code gives that code the test's powers.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Iterator
from typing import NamedTuple

import docker.errors

from endless_assets.sandbox import bundle, offline
from endless_assets.sandbox.changes import change_key, container_changes
from endless_assets.sandbox.client import SandboxError
from endless_assets.sandbox.container import TaskContainer, task_container
from endless_assets.sandbox.identity import lookup_user
from endless_assets.sandbox.verdict import (
    OUTPUT_TAIL,
    InterpreterMoved,
    Verdict,
    _grader_for,
    parse_verdict,
    stop_agent_processes,
)

VERIFIER_REPOSITORY = "endless-verifier"
PYCACHE = "/verifier/pycache"  # on the verifier's tmpfs: no cache the agent wrote is ever read
CACHE_DIR = "__pycache__"


class Snapshot(NamedTuple):
    image: str  # the snapshot's image id ("" when `changed`)
    changed: str  # the first path the agent changed among what grading runs ("" if none)
    own_caches: bool  # checked: the agent changed no bytecode cache among what grading loads


_SUMMARY = re.compile(r"=+ (?P<body>[^=\n]*\b(?:passed|failed|error|errors)\b[^=\n]*) =+\s*$")


def grade_in_verifier(
    container: TaskContainer,
    spec: bundle.Verifier,
    uid: int,
    timeout: float,
    stop_agent: bool,
    started: float,
) -> Verdict:
    """The verdict in a verifier container (verifier.py)."""
    halted = stop_agent and uid == 0  # a root agent's: checked, and stopped while graded
    image, changed, own_caches = snapshot(container, check=halted)
    if changed:
        return _no_verdict(spec, f"the agent changed {changed}, which grading runs", started)
    prefix = "" if own_caches else PYCACHE
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
    return _verdict_in(container, image, stop, spec, uid, timeout, started, prefix)


def _verdict_in(
    container: TaskContainer,
    image: str,
    stop,
    spec: bundle.Verifier,
    uid: int,
    timeout: float,
    started: float,
    pycache_prefix: str,
) -> Verdict:
    with verifier_container(container, image, stop) as box:
        try:
            grader = _grader_for(box, pycache_prefix=pycache_prefix, preload=not spec.script)
        except InterpreterMoved as exc:
            return _no_verdict(spec, str(exc), started)
        deadline = time.monotonic() + timeout + 60
        if not spec.script:
            request = {
                "id": secrets.token_hex(6),
                "filename": spec.test_name,
                "test": spec.test,
                "timeout": timeout,
                "agent_uid": uid,
                "stop_agent": False,
                "env": box.image_env,
                "verifier": True,
            }
            reply = grader.ask(request, deadline=deadline)
            return parse_verdict(
                int(reply.get("exit_code", -1)),
                reply.get("counts"),
                reply.get("output", ""),
                time.monotonic() - started,
                timed_out=bool(reply.get("timed_out")),
            )
        reply = grader.ask(_script_request(box, spec, timeout), deadline=deadline)
    return script_verdict(spec.script, reply, time.monotonic() - started)


def _script_request(box: TaskContainer, spec: bundle.Verifier, timeout: float) -> dict:
    user = spec.user or box.agent.image_user or "root"
    agent = box.agent  # resolved in the agent's container before its first command
    if user == agent.user:
        uid, gid, home = agent.uid, agent.gid, agent.home
    else:
        try:
            uid, gid, home = lookup_user(box.client, box.id, user)
        except ValueError as exc:
            raise SandboxError(f"the verifier's user: {exc}") from exc
    env = {**box.image_env, "HOME": home, **spec.env}
    return {
        "id": secrets.token_hex(6),
        "op": "script",
        "verifier": True,
        "files": spec.all_files(),
        "binary": spec.binary,
        "script": spec.script,
        "tests_dir": bundle.TESTS_DIR,
        "logs_dir": bundle.LOGS_DIR,
        "uid": uid,
        "gid": gid,
        "env": env,
        "workdir": box.agent.workdir,
        "timeout": timeout,
        "shims": offline.shims(),
    }


def script_verdict(script: str, reply: dict, seconds: float) -> Verdict:
    """A script's reply -> a verdict: reward 1 passes, another reward fails, none fails if the
    script failed and is an error if it exited 0."""
    reward = reply.get("reward")
    output = reply.get("output", "")
    tests = failures = 0
    found = [m for m in map(_SUMMARY.search, output.splitlines()) if m]
    if found:
        counts = dict(
            (word, int(n))
            for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", found[-1]["body"])
        )
        failures = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
        tests = failures + counts.get("passed", 0) + counts.get("skipped", 0)
    if reply.get("timed_out"):
        status = "timeout"
    elif reward is None:
        # A script that failed before writing a reward (`set -e` and a failing step: DevEval's
        # shape) failed; one that exited 0 without a reward is broken.
        status = "failed" if int(reply.get("exit_code", 0)) != 0 else "error"
    else:
        status = "passed" if reward >= 1.0 else "failed"
    return Verdict(
        passed=status == "passed",
        status=status,
        exit_code=int(reply.get("exit_code", -1)),
        tests=tests,
        failures=failures,
        errors=0,
        output=output[-OUTPUT_TAIL:],
        seconds=seconds,
        script=script,
        reward=reward,
        needs_network="" if status == "passed" else reply.get("needs_network", ""),
        detail=reply.get("reward_problem", "") if reward is None else "",
    )


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


def tampering(container: TaskContainer) -> str:
    """The first path the agent changed among what grading runs or loads; "" if none."""
    return _check(container)[0]


def _check(container: TaskContainer) -> tuple[str, bool]:
    """(`tampering`, whether the agent left every bytecode cache among what grading loads as it
    was)."""
    protected = container.protected
    if protected is None:
        return "(what grading runs was not described before the agent's first command)", False
    engine = container.engine_changes
    changes = [c for c in diff(container) if change_key(c) not in engine]
    paths = [str(change.get("Path", "")) for change in changes]
    parents = {path.rsplit("/", 1)[0] or "/" for path in paths}
    own_caches = True
    for path in sorted(paths):
        cache = _is_cache(path)
        if not cache and path in parents and _modified(changes, path):
            continue  # a directory whose entries are listed
        for guarded in protected:
            inside = path == guarded or path.startswith(guarded.rstrip("/") + "/")
            if cache:  # (never read if so: the verifier's interpreter keeps its own)
                own_caches = own_caches and not inside
            elif inside or guarded.startswith(path.rstrip("/") + "/"):
                return path, False  # or it replaced a directory on the way to `guarded`
    return "", own_caches


def _is_cache(path: str) -> bool:
    """A bytecode cache directory or what is in one: a path with a `__pycache__` component.
    Not a name that merely contains it: a site directory's `__pycache__.pth` runs its `import`
    lines in every interpreter that starts."""
    parts = path.split("/")
    return CACHE_DIR in parts


def diff(container: TaskContainer) -> list[dict]:
    """What differs in the container's files from its image (changes.py: read in its overlay
    upper directory when we can, else `docker diff`)."""
    return container_changes(container.client, container.id, container.upper_dir)


def _modified(changes: list[dict], path: str) -> bool:
    """A directory listed as changed (its entries are listed), not as replaced."""
    return {c.get("Kind") for c in changes if c.get("Path") == path} == {0}


def snapshot(container: TaskContainer, *, check: bool) -> Snapshot:
    """A snapshot of the container's files, or none when `check` finds that the agent changed a
    path that grading runs (`tampering`). The container is paused from before the check until
    after the commit: a process the agent left running cannot change a file once the check has
    passed it (it could, between a check and a later pause)."""
    paused = _pause(container)
    try:
        changed, own_caches = _check(container) if check else ("", False)
        if changed:
            return Snapshot("", changed, False)
        return Snapshot(commit(container, pause=False), "", own_caches)
    finally:
        if paused:
            with contextlib.suppress(docker.errors.DockerException, OSError):
                container.client.api.unpause(container.id)


def _pause(container: TaskContainer) -> bool:
    """Pause the container; False if it is not running (it stopped: no process can act)."""
    try:
        container.client.api.pause(container.id)
        return True
    except (docker.errors.DockerException, OSError) as exc:
        if not container.running():
            return False
        raise SandboxError(f"pausing container {container.container.short_id}: {exc}") from exc


@contextlib.contextmanager
def verifier_container(container: TaskContainer, image: str, stop_agent) -> Iterator[TaskContainer]:
    """A new container of `image`, a snapshot of `container` (see the module docstring); the
    agent's own container has none of its processes left afterwards (`stop_agent()`). The
    image is removed at the end."""
    try:
        stop_agent()
        programs = container.grading_programs
        sleep = programs.get("sleep", "sleep")
        with task_container(
            container.client,
            image,
            limits=container.limits,
            labels={"role": "verifier"},
            verifier_of=container,
            command=[sleep, "infinity"],
        ) as box:
            box.grading_programs = dict(programs)
            box.protected = container.protected
            box.interpreter = container.interpreter
            yield box
    finally:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            container.client.images.remove(image, force=True, noprune=False)


def commit(container: TaskContainer, *, pause: bool = True) -> str:
    """Snapshot the container's files as an image; its id. `pause`: the engine pauses its
    processes meanwhile (False: the caller has paused them)."""
    try:
        image = container.container.commit(
            repository=VERIFIER_REPOSITORY, tag=secrets.token_hex(6), pause=pause
        )
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxError(f"committing container {container.container.short_id}: {exc}") from exc
    return image.id
