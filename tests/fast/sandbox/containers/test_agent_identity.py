"""Who the agent is in a task container (real Docker): an imported task's agent, oracle and
do-nothing control run as its task.toml's user, else its image's USER (root when unset), in its
image's WORKDIR; our own tasks keep `user` (uid 1000) in /home/user. The tests see the image's
environment at grading; a task graded by its own script is graded offline."""

from __future__ import annotations

import time
import uuid

import pytest

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask, NoopPolicy, OraclePolicy
from endless_assets.sandbox.containers.container import AgentUnknown
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.engine.client import OWNER_LABEL, owner_tag
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.grade import run_pytest

LIMITS = EpisodeLimits(command_timeout=60)
WHO = "echo $(id -un) $(id -u) $PWD $HOME"


def image(sandbox, body: str, agent_user: str = "", workdir: str = "") -> str:
    dockerfile = identity_dockerfile(f"FROM {sandbox.base.tag}\n{body}", agent_user, workdir)
    build = sandbox.build(dockerfile, {}, network=False)
    assert build.ok, build.log
    return build.tag


def who(sandbox, tag: str) -> str:
    with sandbox.container(tag, labels={"role": "identity"}) as box, ShellSession(box) as shell:
        return shell.run(WHO).output.strip()


def test_our_own_tasks_keep_user_1000_in_home_user(sandbox):
    assert who(sandbox, sandbox.base.tag) == "user 1000 /home/user /home/user"


def test_an_image_without_a_user_runs_its_agent_as_root_in_its_workdir(sandbox):
    assert who(sandbox, image(sandbox, "WORKDIR /app\n")) == "root 0 /app /root"


def test_an_image_user_is_the_agent(sandbox):
    body = "RUN useradd -m -u 1500 builder\nUSER builder\nWORKDIR /home/builder/src\n"
    assert who(sandbox, image(sandbox, body)) == "builder 1500 /home/builder/src /home/builder"


def test_the_task_tomls_agent_user_and_workdir_win_over_the_images(sandbox):
    body = "RUN useradd -m -u 1600 worker && mkdir /srv/w\nUSER nobody\nWORKDIR /app\n"
    tag = image(sandbox, body, agent_user="worker", workdir="/srv/w")
    assert who(sandbox, tag) == "worker 1600 /srv/w /home/worker"


def test_an_agent_user_the_image_lacks_rejects_the_task_naming_it(sandbox):
    tag = image(sandbox, "WORKDIR /app\n", agent_user="ghost")
    with pytest.raises(AgentUnknown, match="the agent user 'ghost' does not exist"):
        with sandbox.container(tag, labels={"role": "identity"}):
            pass


def test_a_root_agents_relative_paths_work_and_it_is_graded_in_a_verifier_container(sandbox):
    """The oracle writes `solution.py` relative to /app (EvoEval's shape); the test, the noop
    and the oracle all see the same identity, and the verdicts come from a snapshot."""
    tag = image(sandbox, "WORKDIR /app\n")
    test = "def test_solution():\n    assert open('/app/solution.py').read() == 'x = 1\\n'\n"
    task = EpisodeTask("et-root", "write solution.py", "echo 'x = 1' > solution.py")
    with sandbox.container(tag, labels={"role": "identity"}) as box:
        assert run_pytest(box, test, stop_agent=False).status == "failed"
        assert run_episode_in(box, task, NoopPolicy(), test, LIMITS).reward == 0
        oracle = run_episode_in(box, task, OraclePolicy(), test, LIMITS)
        assert oracle.reward == 1, oracle.verdict
        mine = {"label": f"{OWNER_LABEL}={owner_tag()}"}  # other workers' snapshots come and go
        left = sandbox.client.images.list(name="endless-verifier", filters=mine)
    assert left == []  # every snapshot removed after its verdict


ENV_TEST = """\
import os
import subprocess


def test_the_images_environment():
    assert subprocess.run(["mytool"], capture_output=True, text=True).stdout == "tool-ok\\n"
    assert os.environ["TEST_DIR"] == "/tests"
    assert "PYTEST_ADDOPTS" not in os.environ
"""


@pytest.mark.parametrize("agent_user", ["", "user"])
def test_the_images_environment_is_the_tests_environment_at_grading(sandbox, agent_user):
    body = (
        "RUN mkdir -p /opt/tool/bin && printf '#!/bin/sh\\necho tool-ok\\n' > /opt/tool/bin/mytool"
        " && chmod 755 /opt/tool/bin/mytool\n"
        "ENV PATH=/opt/tool/bin:$PATH TEST_DIR=/tests PYTEST_ADDOPTS=--collect-only\n"
    )
    tag = image(sandbox, body, agent_user=agent_user, workdir="/home/user" if agent_user else "")
    with sandbox.container(tag, labels={"role": "identity"}) as box:
        verdict = run_pytest(box, ENV_TEST, stop_agent=False)
    assert verdict.passed, verdict.output


BOILERPLATE = """#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
uv venv .tbench-testing
source .tbench-testing/bin/activate
uv pip install pytest==8.4.1
{extra}
uv run pytest $TEST_DIR/test_outputs.py -rA
if [ $? -eq 0 ]; then reward=1; else reward=0; fi
echo $reward > /logs/verifier/reward.txt
"""
PASSING = "def test_ok():\n    assert True\n"


@pytest.mark.parametrize(
    ("extra", "status", "needs"),
    [
        ("", "passed", ""),
        ("pip install pytest", "passed", ""),
        (
            "apt-get install -y gcc-multilib",
            "failed",
            "apt-get install -y gcc-multilib: not installed in the image: gcc-multilib",
        ),
        (
            "uv pip install numpy-endless-absent || exit 1",
            "failed",  # it failed before writing a reward: reward 0, and the step is named
            "uv pip install numpy-endless-absent: not installed in the image",
        ),
        ("curl -fsSL https://example.invalid/data.csv -o data.csv || exit 1", "failed", "curl"),
        ("exit 0", "error", ""),  # a script that exits 0 without a reward is broken
    ],
)
def test_a_test_script_grades_offline_and_a_step_that_needs_the_network_is_named(
    sandbox, extra, status, needs
):
    tag = image(sandbox, "WORKDIR /app\nENV TEST_DIR=/tests\n")
    script = BOILERPLATE.format(extra=extra)
    if extra.startswith("apt-get"):  # a failing step the script goes past: its reward decides
        script = script.replace("assert True", "assert False")
    spec = bundle.Verifier(
        test=PASSING.replace("True", "False") if "apt-get" in extra else PASSING,
        script="test.sh",
        files={"test.sh": script},
    )
    with sandbox.container(tag, labels={"role": "identity"}) as box:
        verdict = run_pytest(box, bundle.pack(spec), stop_agent=False)
    assert verdict.status == status, verdict.output
    assert needs in verdict.needs_network and bool(needs) == bool(verdict.needs_network)


def files_read(sandbox, container_id: str, since: float) -> int:
    """How many files the engine handed out of this container (its `archive-path` events)."""
    filters = {"event": "archive-path", "container": container_id}
    events = sandbox.client.events(since=since, until=time.time(), filters=filters, decode=True)
    return len(list(events))


def test_an_images_identity_is_read_in_its_first_container_and_kept_for_the_next(sandbox):
    """Reading /etc/passwd and /etc/group through the engine starts two of its archive helpers
    (~0.1 CPU-s) per container; the identity of an image is the same in every container."""
    tag = image(sandbox, f"RUN useradd -m -u 1700 keeper\nUSER keeper\nENV RUN={uuid.uuid4()}\n")
    reads, uids = [], []
    for _ in range(2):
        since = time.time()
        with sandbox.container(tag, labels={"role": "identity"}) as box:
            uids.append(box.agent.uid)
            reads.append(files_read(sandbox, box.id, since))
    assert uids == [1700, 1700]
    assert reads == [2, 0]
