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
    _grader_for,
    _in_verifier,
    _regrade,
    disturbed,
    parse_verdict,
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
    """Run `test_source` in isolation as the agent's uid (see grader.py) and return the verdict.
    `stop_agent`: kill the agent's processes first (False where no agent has run yet).
    `agent_uid`: the container's agent's (identity.py) unless given. `learn`: the reference
    solution's episode; a verdict in a verifier container then reports what it changed in the
    system locations (`system_changes`) instead of holding them against it (verifier.py)."""
    started = time.monotonic()
    uid = container.agent.uid if agent_uid is None else agent_uid
    spec = bundle.unpack(test_source)
    if _in_verifier(spec, uid, stop_agent):
        spec = spec or bundle.Verifier(test=test_source, test_name=filename)
        return grade_in_verifier(container, spec, uid, timeout, stop_agent, started, learn=learn)
    request: dict = {
        "id": secrets.token_hex(6),
        "filename": spec.test_name if spec else filename,
        "test": spec.test if spec else test_source,
        "timeout": timeout,
        "agent_uid": uid,
        "stop_agent": stop_agent,
        "env": container.image_env,
        "verifier": uid == 0,  # root is graded here only before any agent command ran
    }
    try:
        # A grader that cannot start (the agent's processes fill the pids limit) or dies before
        # the test: the container is restarted (its files stay) and graded afresh. One lost once
        # the test started was lost to what the test ran: 0, never a second chance.
        reply = _grader_for(container).ask(request, deadline=time.monotonic() + timeout + 60)
    except GraderLost as exc:
        if exc.running and container.running():
            reply = disturbed(exc)
        elif isinstance(exc, GraderGone) and not exc.running:
            reply = _regrade(container, request, timeout)
        else:
            raise
    return parse_verdict(
        int(reply.get("exit_code", -1)),
        reply.get("counts"),
        reply.get("output", ""),
        time.monotonic() - started,
        timed_out=bool(reply.get("timed_out")),
    )
