"""A root agent's process that changes what grading runs after the check of the agent's changes.

A root agent's verdict is given in a verifier container, a snapshot of its own (verifier.py), and
only if the agent changed nothing grading runs or loads (`tampering`, from `docker diff`). A
process the agent left running keeps running while that check reads the container: if it
plants a `sitecustomize.py` in the interpreter's library once the check has passed, and the
snapshot is taken after, the verdict runs with it, and every test passes.

The moment is a race in life. Here it is made exact: the check's read of the container (`diff`)
is wrapped so that, right after it, the agent's process is let go (a file it waits for) and the
wrapper waits until its change has landed. Where the check runs while the agent's processes do
(the order before `snapshot`), that earns 1; ours pauses the container from before the check to
the snapshot, so the agent's process cannot act (no command can even start in the container)
and the verdict is 0.
"""

from __future__ import annotations

import time

from red_team import PLANT_SITECUSTOMIZE, Scripted, secret_test

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading import verifier
from endless_assets.sandbox.grading.verdict import grader_for, parse_verdict, start_grader

GO, PLANTED, LATE = "/tmp/.go", "/tmp/.planted", "/tmp/.late.sh"
LATE_SCRIPT = f"while [ ! -e {GO} ]; do sleep 0.01; done\n{PLANT_SITECUSTOMIZE}\ntouch {PLANTED}\n"
COMMANDS = [
    f"cat > {LATE} <<'LATEEOF'\n{LATE_SCRIPT}LATEEOF",
    f"nohup sh {LATE} >/dev/null 2>&1 &",
]
POLLS = 3000  # ~2 minutes of `docker exec`: the planted file is there long before


class AgentActsAfterTheRead:
    """`verifier.diff`, then the moment a process the agent left running acts."""

    def __init__(self) -> None:
        self.real = verifier.diff
        self.acted: bool | None = None

    def __call__(self, container: TaskContainer) -> list[dict]:
        changes = self.real(container)
        try:
            container.exec_root(["touch", GO])
        except SandboxError as exc:  # a paused container runs no new command
            assert "paused" in str(exc), exc
            self.acted = False
            return changes
        for _ in range(POLLS):
            if container.exec_root(["test", "-e", PLANTED]).exit_code == 0:
                self.acted = True
                return changes
        raise AssertionError("the agent's process never planted its file")


def check_then_snapshot(box: TaskContainer, test: str) -> int:
    """The verdict as it was given before `snapshot`: the check while the agent's processes
    run, then a commit (which pauses only for itself), then the verifier container."""
    from endless_assets.sandbox.containers.shell import ShellSession

    start_grader(box)
    with ShellSession(box) as shell:
        for command in COMMANDS:
            shell.run(command, timeout=30)
    assert verifier.tampering(box) == ""  # nothing was changed when the check read
    request = {"id": "late", "filename": "test_outputs.py", "test": test, "timeout": 60}
    request.update(agent_uid=0, stop_agent=False, verifier=True, env=box.image_env)
    with verifier.verifier_container(box, verifier.commit(box), lambda: None) as checked:
        grader = grader_for(checked, verifier.PYCACHE)
        reply = grader.ask(request, deadline=time.monotonic() + 120)
    verdict = parse_verdict(reply["exit_code"], reply["counts"], reply["output"], 0.0)
    return 1 if verdict.passed else 0


def test_a_root_agents_process_cannot_change_what_grading_runs_after_the_check(
    sandbox, root_image, monkeypatch
):
    test = secret_test("pass")
    late = AgentActsAfterTheRead()
    monkeypatch.setattr(verifier, "diff", late)
    with sandbox.container(root_image, labels={"role": "naive-grader"}) as box:
        assert box.agent.uid == 0
        naive = check_then_snapshot(box, test)
    assert late.acted is True
    assert naive == 1, "the late change does not fool a check made while the agent runs"

    late = AgentActsAfterTheRead()
    monkeypatch.setattr(verifier, "diff", late)
    with sandbox.container(root_image, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-late-change", "do nothing useful"),
            Scripted(COMMANDS),
            test,
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error  # scored, not a harness error
    assert rollout.reward == 0, rollout.verdict
    assert late.acted is False  # the check ran with the container paused


def test_a_container_that_stopped_is_checked_and_snapshotted_without_a_pause(sandbox, root_image):
    """The engine refuses to pause a container that is not running; nothing can act in one, so
    it is checked and committed as it is (a verdict, not a harness error)."""
    with sandbox.container(root_image, labels={"role": "integrity"}) as box:
        start_grader(box)
        box.exec_root(["sh", "-c", "echo done > /app/out.txt"])
        box.client.api.kill(box.id)
        box.client.api.wait(box.id)
        image, finding = verifier.snapshot(box, check=True)
        try:
            assert finding.tampered == ()
            assert box.client.images.get(image).id == image
        finally:
            box.client.images.remove(image, force=True)


# A root agent's own version of the image's ENTRYPOINT (in /app: the agent's to change, not a
# system location): what PID 1 runs when its container starts again. It watches the tests
# directory, which the image shares as a VOLUME with the verifier container (`volumes_from`),
# and rewrites the test as the verifier writes it.
WATCHING_ENTRY = """#!/bin/sh
(while true; do
  f=/tests/test_outputs.py
  if [ -f $f ] && ! grep -q forged $f; then printf 'def test_forged():\\n    pass\\n' > $f; fi
  /usr/bin/sleep 0.001
done) >/dev/null 2>&1 &
exec "$@"
"""
PLANT_SLEEP = f"cat > /app/entry.sh <<'SLEEPEOF'\n{WATCHING_ENTRY}SLEEPEOF\n"


def test_nothing_runs_in_a_root_agents_container_while_its_verdict_is_given(sandbox):
    from red_team import SCRIPT

    from endless_assets.sandbox.containers.identity import identity_dockerfile
    from endless_assets.sandbox.grading.bundle import Verifier, pack
    from endless_assets.sandbox.grading.script_route import script_request, script_verdict

    dockerfile = (
        f"FROM {sandbox.base.tag}\nWORKDIR /app\nVOLUME /tests\n"
        "RUN printf '#!/bin/sh\\nexec \"$@\"\\n' > /app/entry.sh && chmod 755 /app/entry.sh\n"
        'ENTRYPOINT ["/app/entry.sh"]\n'
    )
    build = sandbox.build(identity_dockerfile(dockerfile, "", ""), {}, network=False)
    assert build.ok, build.log
    test = secret_test("pass")
    spec = Verifier(test=test, script="test.sh", files={"test.sh": SCRIPT})

    # Naive: the agent's container started again before the verdict (the order before halt()).
    # A race (the watcher must rewrite the test before pytest reads it): any of five tries.
    naive = []
    for _ in range(5):
        with sandbox.container(build.tag, labels={"role": "naive-grader"}) as box:
            start_grader(box)
            box.exec_root(["sh", "-c", PLANT_SLEEP])
            image = verifier.commit(box)
            with verifier.verifier_container(box, image, box.restart) as checked:
                grader = grader_for(checked, verifier.PYCACHE, preload=False)
                request = script_request(checked, spec, 60, own_caches=False)
                reply = grader.ask(request, deadline=time.monotonic() + 120)
        naive.append(script_verdict(spec.script, reply, 0.0).passed)
        if naive[-1]:
            break
    assert naive[-1], "the watcher never rewrote the test where the container runs"

    with sandbox.container(build.tag, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-watching-sleep", "do nothing useful"),
            Scripted([PLANT_SLEEP]),
            pack(spec),
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
        # Stopped until something is to run in it (a rollout's container never starts again)
        assert box.halted and not box.running()
        assert box.exec_root(["true"]).exit_code == 0
        assert box.running() and not box.halted
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 0, rollout.verdict


def test_a_task_whose_image_makes_its_tests_and_logs_volumes_is_graded(sandbox):
    """The verifier empties a tests or reward directory that is a mount point (an image's
    VOLUME) instead of removing it, which the kernel refuses (EBUSY: a grader error, reward 0
    for every agent before)."""
    from red_team import SCRIPT

    from endless_assets.sandbox.containers.identity import identity_dockerfile
    from endless_assets.sandbox.grading.bundle import Verifier, pack

    dockerfile = f"FROM {sandbox.base.tag}\nWORKDIR /app\nVOLUME /tests /logs/verifier\n"
    build = sandbox.build(identity_dockerfile(dockerfile, "", ""), {}, network=False)
    assert build.ok, build.log
    test = "def test_out():\n    assert open('/app/out.txt').read() == 'done\\n'\n"
    graded = pack(Verifier(test=test, script="test.sh", files={"test.sh": SCRIPT}))
    with sandbox.container(build.tag, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-volumes", "write done to /app/out.txt"),
            Scripted(["echo stale > /tests/leftover && echo done > /app/out.txt"]),
            graded,
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 1, rollout.verdict
