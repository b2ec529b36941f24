"""The verdict comes from pytest's own report and nothing the agent leaves behind changes it."""

from __future__ import annotations

import pytest
from verdict_cases import CHEATS, TEST

from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.grading.grade import run_pytest


def agent(container, *commands: str) -> None:
    with ShellSession(container) as sh:
        for command in commands:
            sh.run(command, timeout=10)


def test_honest_work_passes(container):
    agent(container, "echo 42 > /home/user/answer.txt")
    verdict = run_pytest(container, TEST)
    assert verdict.passed and verdict.status == "passed"
    assert (verdict.tests, verdict.failures, verdict.errors) == (1, 0, 0)


def test_untouched_state_fails_by_assertion(container):
    verdict = run_pytest(container, TEST)
    assert not verdict.passed and verdict.status == "failed"
    assert verdict.exit_code == 1


def test_collection_error_is_an_error_not_a_failure(container):
    verdict = run_pytest(container, "import not_a_module\n\ndef test_x():\n    pass\n")
    assert verdict.status == "error" and not verdict.passed


def test_a_file_without_tests_never_passes(container):
    verdict = run_pytest(container, "X = 1\n")
    assert verdict.status == "no_tests" and not verdict.passed


def test_a_hanging_test_times_out(container):
    verdict = run_pytest(container, "import time\n\ndef test_x():\n    time.sleep(60)\n", timeout=2)
    assert verdict.status == "timeout" and not verdict.passed


@pytest.mark.parametrize("commands", list(CHEATS.values()), ids=list(CHEATS))
def test_agent_cannot_make_the_tests_pass_without_the_work(container, commands):
    agent(container, *commands)
    verdict = run_pytest(container, TEST)
    assert not verdict.passed, verdict.output
    assert verdict.tests == 1


def test_the_same_tricks_leave_honest_work_passing(container):
    agent(container, *CHEATS["pytest.ini and pyproject with addopts that deselect everything"])
    agent(container, "echo 42 > /home/user/answer.txt")
    assert run_pytest(container, TEST).passed


def test_the_agent_cannot_read_the_tests_during_the_episode(container):
    run_pytest(container, TEST)  # leaves a previous run's directory behind
    with ShellSession(container) as sh:
        listing = sh.run("ls -R /verifier; cat /verifier/*/test_outputs.py")
    assert listing.exit_code != 0
    assert "test_answer" not in listing.output


@pytest.mark.parametrize(
    "cheat",
    [
        "conftest that rewrites every outcome to passed",
        "sitecustomize and a .pth in the user site that patch open()",
        "exported environment variables aimed at python and pytest",
    ],
)
def test_control_the_cheats_do_fool_a_naive_pytest_run(container, cheat):
    """Without the verdict's isolation these cheats work, so the test above means something."""
    with ShellSession(container) as sh:
        for command in CHEATS[cheat]:
            sh.run(command, timeout=10)
        sh.run(f"cat > /home/user/test_copy.py <<'EOF'\n{TEST}\nEOF")
        naive = sh.run("cd /home/user && python3 -m pytest -q -p no:cacheprovider test_copy.py")
    assert "1 passed" in naive.output, naive.output


def test_a_fork_bomb_left_running_does_not_stop_the_grader(container):
    agent(
        container,
        "echo 42 > /home/user/answer.txt",
        "bomb() { while true; do sleep 1000 & done; }; (bomb &) ; sleep 1",
    )
    verdict = run_pytest(container, TEST)
    assert verdict.passed, verdict.output
    with ShellSession(container) as sh:
        assert sh.run("pgrep -u user -c sleep || true").output.strip() == "0"


class Scripted:
    """A policy that runs fixed commands, then says done."""

    name, model, prompt_version = "scripted", "fixed", ""

    def __init__(self, *commands: str) -> None:
        self.commands = list(commands)

    def reset(self, task) -> None:
        self.queue = list(self.commands)

    def act(self, observation):
        from endless_assets.agent.policies import Action

        if self.queue:
            return Action("command", command=self.queue.pop(0))
        return Action("done")

    def messages(self):
        return []


def test_a_fork_bomb_that_escapes_the_command_timeout_still_gets_graded(container):
    """The bomb drops the harness's process tag and fills the process limit; the grader, resident
    since before the first command, still stops it and grades (no harness error)."""
    from endless_assets.agent.episode import EpisodeLimits, run_episode_in
    from endless_assets.agent.policies import EpisodeTask

    bomb = (
        "for i in 1 2 3 4; do env -u ENDLESS_CMD setsid sh -c "
        "'while :; do sleep 1000 & done' >/dev/null 2>&1 & done; sleep 3; echo launched"
    )
    policy = Scripted("echo 42 > /home/user/answer.txt", bomb)
    task = EpisodeTask("et-bomb", "write 42")
    rollout = run_episode_in(container, task, policy, TEST, EpisodeLimits(command_timeout=10))
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 1 and rollout.verdict.passed
