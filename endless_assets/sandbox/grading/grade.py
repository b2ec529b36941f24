"""A verdict on a test: given by the container's grader (verdict.py), or in a verifier container
(verifier.py) for a root agent and for a task graded by its own script."""

from __future__ import annotations

import secrets
import time

from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.verdict import (
    GraderGone,
    GraderLost,
    Verdict,
    disturbed,
    grader_for,
    in_verifier,
    pytest_request,
    reply_verdict,
)
from endless_assets.sandbox.grading.verifier import grade_in_verifier


def run_pytest(
    container: TaskContainer,
    test_source: str,
    *,
    filename: str = "test_outputs.py",
    timeout: float = 180,
    stop_agent: bool = True,
    agent_uid: int | None = None,
    learn: bool = False,
) -> Verdict:
    """Run `test_source` in isolation as the agent's uid (grader.py); its verdict. `stop_agent`:
    kill the agent's processes first (False where no agent ran yet). `learn`: the reference
    solution's episode, whose changes to the system locations a verifier reports
    (`system_changes`) instead of holding them against it (verifier.py)."""
    with container.cpu_slot:  # (its sandbox's CPU slot: TaskContainer.cpu_slot)
        started = time.monotonic()
        uid = container.agent.uid if agent_uid is None else agent_uid
        spec = bundle.unpack(test_source)
        if in_verifier(spec, uid, stop_agent):
            spec = spec or bundle.Verifier(test=test_source, test_name=filename)
            return grade_in_verifier(
                container, spec, uid, timeout, stop_agent, started, learn=learn
            )
        name, test = (spec.test_name, spec.test) if spec else (filename, test_source)
        # (root is graded here only before any agent command ran)
        flags = {"stop_agent": stop_agent, "verifier": uid == 0}
        request = pytest_request(container, name, test, timeout, uid, **flags)
        try:  # (a grader lost once the test started was lost to what it ran: 0, no retry)
            reply = grader_for(container).ask(request, deadline=time.monotonic() + timeout + 60)
        except GraderLost as exc:
            if exc.running and container.running():
                reply = disturbed(exc)
            elif isinstance(exc, GraderGone) and not exc.running:
                reply = _regrade(container, request, timeout)
            else:
                raise
        return reply_verdict(reply, started)


def _regrade(container: TaskContainer, request: dict, timeout: float) -> dict:
    """The grader died before the test started: only the agent's processes can have caused it
    (the OOM killer picks the largest process; the agent cannot signal root). So the container
    is restarted (every process dies, the files stay) and a new grader grades; if that one is
    lost too, grading was disturbed: reward 0. A container that is gone raises SandboxError."""
    container.restart()
    retry = dict(request, id=secrets.token_hex(6))
    try:
        return grader_for(container).ask(retry, deadline=time.monotonic() + timeout + 60)
    except GraderLost as exc:
        if not container.running():
            raise
        return disturbed(exc)
