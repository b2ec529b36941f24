"""A task graded by its own script (Harbor's tests/test.sh): the grader's request, and its reply
read as a verdict (grader_script.py runs it in a verifier container, verifier.py)."""

from __future__ import annotations

import re
import secrets

from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading import bundle, offline
from endless_assets.sandbox.grading.verdict import OUTPUT_TAIL, Verdict

_SUMMARY = re.compile(r"=+ (?P<body>[^=\n]*\b(?:passed|failed|error|errors)\b[^=\n]*) =+\s*$")


class VerifierUserUnknown(SandboxError):
    """The task names a verifier user its image does not have: the task's fault."""


def script_request(
    box: TaskContainer, spec: bundle.Verifier, timeout: float, *, own_caches: bool
) -> dict:
    """The grader's request to run `spec`'s script in `box`: the verifier's user as numbers from
    the image's own /etc/passwd (never the agent's), the stand-ins (offline.py)."""
    agent = box.agent  # resolved in the agent's container before its first command
    user = spec.user or agent.image_user or "root"
    if user == agent.user:
        uid, gid, home = agent.uid, agent.gid, agent.home
    else:
        try:
            uid, gid, home = agent.lookup(user)
        except ValueError as exc:
            raise VerifierUserUnknown(f"the verifier's user: {exc}") from exc
    env = {**box.image_env, "HOME": home, **spec.env}
    python = box.grading_programs.get("python", "python3")
    image_path = box.image_env.get("PATH") or offline.DEFAULT_PATH
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
        "workdir": agent.workdir,
        "timeout": timeout,
        "shims": offline.shims(python, image_path),
        "own_caches": own_caches,
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
