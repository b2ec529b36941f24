"""A root agent (an imported task's image with no USER) cannot forge its reward either. One row
per route, each first tried against the verifier as it was before system locations were held
against the reference solution (`todays_reward`: a verifier container of a snapshot of the
agent's, checked only against what the first grader had loaded, writable, with the stand-ins
that ran `python3` by name and started pytest as the script asked), where it earns 1, then
against ours (a whole episode), where it earns 0, scored: a verdict, never a harness error.

The forging library (hostile_libs.py) is what a policy paid only for reward would write: its
constructor, once in any Python process, makes every outcome report say nothing failed and the
process exit 0.
"""

from __future__ import annotations

import subprocess
import time

import docker.errors
import pytest
from hostile_libs import compile_forger, plant
from red_team import Scripted, secret_test
from root_routes import (
    ROUTES,
    SHIM,
    Route,
    graded,
    write,
)

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.grading import offline, offline_pytest, verdict, verifier
from endless_assets.sandbox.grading.bundle import Verifier, allow
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.grading.script_route import script_request, script_verdict
from endless_assets.sandbox.grading.verdict import grader_for, parse_verdict, start_grader


@pytest.fixture(scope="module")
def forgers(tmp_path_factory) -> dict[str, bytes]:
    work = tmp_path_factory.mktemp("hostile")
    return {
        "forger": compile_forger(work),
        "sqlite_forger": compile_forger(work, needs="libsqlite3.so.0.8.6"),
    }


@pytest.fixture(scope="module")
def images(sandbox, root_image) -> dict[str, str]:
    dockerfile = f"FROM {sandbox.base.tag}\nWORKDIR /app\nENV PYTHONPATH=/app\n"
    build = sandbox.build(identity_dockerfile(dockerfile, "", ""), {}, network=False)
    assert build.ok, build.log
    return {"root": root_image, "pythonpath": build.tag}


def commands_of(route: Route, forgers: dict[str, bytes]) -> list[str]:
    planted = {name: f"/tmp/.{name}.so" for name in forgers}
    commands = [plant(data, planted[name]) for name, data in forgers.items()]
    return commands + [c.format(**planted) for c in route.commands]


def todays_reward(box: TaskContainer, commands: list[str], completion_test: str) -> int:
    """The verifier before: the check held the agent's changes only against what the first
    grader had loaded, the verifier's files were writable, the stand-ins ran python3 by name."""
    from endless_assets.sandbox.grading import bundle

    spec = bundle.unpack(completion_test) or Verifier(test=completion_test)
    start_grader(box, completion_test)
    with ShellSession(box) as shell:
        for command in commands:
            shell.run(command, timeout=60)
    box.system = []  # (what the first grader loaded, no system location besides)
    finding = verifier.check_changes(box, {})
    if finding.tampered:
        return 0
    image = verifier.commit(box)
    prefix = "" if finding.own_caches else verifier.PYCACHE
    with verifier.verifier_container(box, image, box.halt, read_only=False) as checked:
        grader = grader_for(checked, prefix, preload=not spec.script)
        deadline = time.monotonic() + 120
        if not spec.script:
            request = {"id": "t", "filename": spec.test_name, "test": spec.test, "timeout": 60}
            request.update(agent_uid=0, stop_agent=False, verifier=True, env=checked.image_env)
            reply = grader.ask(request, deadline=deadline)
            return int(parse_verdict(reply["exit_code"], reply["counts"], "", 0.0).passed)
        request = script_request(checked, spec, 60, own_caches=finding.own_caches)
        path = checked.image_env.get("PATH", offline.DEFAULT_PATH)
        ours = offline_pytest.stand_ins()
        shims = offline.shims("python3", path)
        request["shims"] = {n: t for n, t in shims.items() if n not in ours}
        reply = grader.ask(request, deadline=deadline)
    return int(script_verdict(spec.script, reply, 0.0).passed)


@pytest.mark.parametrize("name", list(ROUTES))
def test_a_root_agents_route_that_forged_a_reward_earns_zero_scored(
    sandbox, images, forgers, monkeypatch, name
):
    route = ROUTES[name]
    commands = commands_of(route, forgers)
    test = graded(route)
    image = images[route.image]
    with (
        sandbox.container(image, labels={"role": "naive-grader"}) as box,
        monkeypatch.context() as patch,
    ):
        # (the first grader described only what it loaded, not every library grading could)
        patch.setattr(verdict, "LOADS", "ENDLESS_NOT_ASKED")
        assert box.agent.uid == 0
        naive = todays_reward(box, commands, test)
    assert naive == 1, "the route does not work against the verifier as it was"

    with sandbox.container(image, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-root-integrity", "do nothing useful"),
            Scripted(commands),
            test,
            EpisodeLimits(command_timeout=60, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error  # scored, not a harness error
    assert rollout.reward == 0, rollout.verdict
    if route.tampered:
        assert rollout.verdict.status == "tampered", rollout.verdict
        assert route.tampered in rollout.verdict.detail, rollout.verdict.detail


# -- identities: numbers, never names looked up in the agent's /etc/passwd --------------------

PASSWD_DODGES = {
    "root renamed in /etc/passwd": "sed -i 's/^root:/rooty:/' /etc/passwd",
    "root's line deleted from /etc/passwd": "sed -i '/^root:/d' /etc/passwd",
}


@pytest.mark.parametrize("name", list(PASSWD_DODGES))
def test_a_root_agent_that_edits_etc_passwd_gets_its_zero_not_a_harness_error(
    sandbox, root_image, name
):
    command = PASSWD_DODGES[name]
    with sandbox.container(root_image, labels={"role": "naive-grader"}) as box:
        start_grader(box)
        box.exec_root(["sh", "-c", command])
        image = verifier.commit(box)
        api = box.client.api
        created = api.create_container(image, ["true"], user="root", network_disabled=True)
        try:  # the verifier as it was: created as the user named "root"
            with pytest.raises(docker.errors.APIError, match="unable to find user root"):
                api.start(created["Id"])
        finally:
            api.remove_container(created["Id"], force=True)
            box.client.images.remove(image, force=True)

    with sandbox.container(root_image, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-passwd", "write done to /app/out.txt"),
            Scripted([command]),
            "def test_out():\n    assert open('/app/out.txt').read() == 'done\\n'\n",
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 0 and rollout.verdict.status == "failed", rollout.verdict


def test_an_etc_passwd_that_is_a_fifo_is_tampering_not_a_hung_verifier(sandbox, root_image):
    fifo = "rm /etc/passwd && mkfifo /etc/passwd"
    with sandbox.container(root_image, labels={"role": "naive-grader"}) as box:
        box.exec_root(["sh", "-c", fifo])
        # The engine opens /etc/passwd to start any process in the container: it waits for a
        # writer that never comes (bounded here only so that the test ends).
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(["docker", "exec", box.id, "true"], timeout=20, capture_output=True)

    with sandbox.container(root_image, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-fifo", "do nothing useful"),
            Scripted([fifo]),
            secret_test("pass"),
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 0 and rollout.verdict.status == "tampered", rollout.verdict
    assert "/etc/passwd is no longer a regular file" in rollout.verdict.detail


# -- what the reference solution changes, an honest agent may change ---------------------------

INSTALL = (
    "printf '#!/bin/sh\\necho hello\\n' > /usr/local/bin/greet && chmod 755 /usr/local/bin/greet"
    " && mkdir -p /usr/local/lib/python3.11/dist-packages/greetlib"
    " && echo 'X = 1' > /usr/local/lib/python3.11/dist-packages/greetlib/__init__.py"
)
INSTALLED = (
    "import subprocess\n\n\ndef test_installed():\n"
    "    assert subprocess.run(['greet'], capture_output=True, text=True).stdout == 'hello\\n'\n"
    "    import greetlib\n\n    assert greetlib.X == 1\n"
)


def test_an_agent_may_change_what_the_reference_changes_and_nothing_else(sandbox, root_image):
    limits = EpisodeLimits(command_timeout=30, test_timeout=60)
    task = EpisodeTask("et-install", "install greet")
    with sandbox.container(root_image, labels={"role": "reference"}) as box:
        reference = run_episode_in(box, task, Scripted([INSTALL]), INSTALLED, limits, learn=True)
    assert reference.reward == 1, reference.verdict
    changes = reference.verdict.system_changes
    assert "/usr/local/bin/greet" in changes
    module = "/usr/local/lib/python3.11/dist-packages/greetlib/__init__.py"
    assert len(changes[module]) == 64  # grading loads it: its sha256
    test = allow(INSTALLED, changes)

    def reward(commands: list[str]) -> tuple[int | None, str]:
        with sandbox.container(root_image, labels={"role": "integrity"}) as box:
            rollout = run_episode_in(box, task, Scripted(commands), test, limits)
        assert rollout.termination == "done", rollout.error
        return rollout.reward, rollout.verdict.detail if rollout.verdict else ""

    assert reward([INSTALL]) == (1, "")  # the same changes: an honest agent
    more, why = reward([INSTALL, write("/usr/local/bin/helper", SHIM, "755")])
    assert more == 0 and "/usr/local/bin/helper" in why, why
    other, why = reward([INSTALL, f"echo 'X = 1  # mine' > {module}"])
    assert other == 0 and "is not the reference solution's" in why, why


def test_what_the_reference_changes_is_tampering_where_the_test_does_not_carry_it(
    sandbox, root_image
):
    with sandbox.container(root_image, labels={"role": "reference"}) as box:
        start_grader(box, INSTALLED)
        box.exec_root(["sh", "-c", INSTALL])
        strict = run_pytest(box, INSTALLED, timeout=60)
    assert strict.status == "tampered" and "/usr/local/bin/greet" in strict.detail
