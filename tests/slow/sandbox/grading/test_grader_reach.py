"""What a test runs cannot reach the grader or the reward. A root agent's program, run by the test
(many tasks' point) or by a task's own script, runs as root in the verifier: one row per way it
could turn its 0 into a harness error (kill or stop the grader, or the container's `sleep`) or
into a 1 (write the reward file the verifier reads, now or from a process it leaves), each first
tried against the verifier as it was (`todays`: nothing fenced, a grader lost was a harness
error, reward.json read before reward.txt from a world-writable directory, a script's pytest
left the reward files to whatever it ran), where it earns 1 or a harness error, then against
ours, where it earns 0, scored. Both grading routes: our grader's pytest file, and the task's
own tests/test.sh.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from naive_verifier import reward_of, todays
from red_team import Scripted, secret_test

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.sandbox.grading import verdict
from endless_assets.sandbox.grading.bundle import Verifier, pack

REWARD = "if [ $? -eq 0 ]; then r=1; else r=0; fi\necho $r > /logs/verifier/reward.txt\n"
SCRIPT = "#!/bin/bash\ncd / && python3 -m pytest -q /tests/test_outputs.py\n" + REWARD
SCRIPT_RUNS_IT = "#!/bin/bash\n/app/solve.sh\ncd / && python3 -m pytest -q /tests/test_outputs.py\n"
SCRIPT_RUNS_IT += REWARD
LIMITS = EpisodeLimits(command_timeout=60, test_timeout=90)
RUN_IT = "subprocess.run(['/app/solve.sh'])"


def program(body: str) -> str:
    """The agent's program at /app/solve.sh, which the test (or the script) runs."""
    return (
        f"cat > /app/solve.sh <<'ENDOFFILE' && chmod 755 /app/solve.sh\n#!/bin/sh\n{body}ENDOFFILE"
    )


# The grader: the process whose command line is its source, started by `docker exec` (its parent
# is outside the container: 0); its test processes are forked from it.
KILL_GRADER = program(
    "for p in /proc/[0-9]*; do\n"
    "  if grep -qa preload_pytest $p/cmdline 2>/dev/null && grep -q '^PPid:.0$' $p/status; then\n"
    "    kill -9 ${p#/proc/}\n  fi\ndone\n"
)
KILL_SLEEP = program("pkill -9 -x sleep\n")
WRITE_REWARD = program("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.json\n")
# A reward directory of its own in the place of the script's: the script's later reward.txt goes
# there too, beside its reward.json.
OWN_LOGS = program(
    "mv /logs/verifier /logs/.old && mkdir /logs/verifier && echo 1 > /logs/verifier/reward.json\n"
)
# A process the program leaves (in a session of its own, under a new pid every moment: a kill
# aimed at the one listed finds it gone), which sets the reward back to 1 whenever the script
# writes 0: against the verifier as it was, a race it wins often.
LINGER = program(
    "nohup python3 -c \"\nimport os\nos.setsid()\np = '/logs/verifier/reward.txt'\n"
    "while True:\n    if os.fork():\n        os._exit(0)\n    try:\n"
    "        if open(p).read().strip() == '0':\n            open(p, 'w').write('1')\n"
    "    except OSError:\n        pass\n"
    '" >/dev/null 2>&1 &\n'
)


@dataclass(frozen=True)
class Route:
    commands: list[str]
    script: str = ""  # the task's own tests/test.sh ("": our grader runs the pytest file)
    today: int | None = None  # what the verifier as it was gives (None: a harness error)
    tries: int = 1  # (a race against the verifier as it was: any of these tries shows it)
    output: str = ""  # ours: the verdict's output says this


ROUTES: dict[str, Route] = {
    "the test runs the agent's program, which kills the grader": Route([KILL_GRADER]),
    "the test runs the agent's program, which kills the container's sleep": Route([KILL_SLEEP]),
    "test.sh's pytest runs the agent's program, which kills the grader": Route(
        [KILL_GRADER], script=SCRIPT
    ),
    "test.sh runs the agent's program itself, which kills the container's sleep": Route(
        [KILL_SLEEP], script=SCRIPT_RUNS_IT
    ),
    "test.sh's pytest runs the agent's program, which writes reward.json": Route(
        [WRITE_REWARD], script=SCRIPT, today=1, output="put back as it was before pytest ran"
    ),
    "test.sh's pytest runs the agent's program, which leaves a process to rewrite the reward": (
        Route([LINGER], script=SCRIPT, today=1, tries=12)
    ),
    "test.sh's pytest runs the agent's program, which puts a reward directory of its own": Route(
        [OWN_LOGS], script=SCRIPT, today=1
    ),
    # (the script's own reward.txt, written after, is read first, as Harbor reads them)
    "test.sh runs the agent's program itself, which writes reward.json": Route(
        [WRITE_REWARD], script=SCRIPT_RUNS_IT, today=1
    ),
}


def graded(script: str) -> str:
    test = secret_test(RUN_IT)
    if not script:
        return test
    return pack(Verifier(test=test, script="test.sh", files={"test.sh": script}))


def episode(sandbox, image: str, commands: list[str], test: str, role: str = "integrity"):
    with sandbox.container(image, labels={"role": role}) as box:
        assert box.agent.uid == 0
        return run_episode_in(
            box, EpisodeTask("et-grader-reach", "do the task"), Scripted(commands), test, LIMITS
        )


@pytest.mark.parametrize("name", list(ROUTES))
def test_what_a_test_runs_cannot_reach_the_grader_or_the_reward(
    sandbox, root_image, monkeypatch, name
):
    route = ROUTES[name]
    test = graded(route.script)
    rewards = []
    for _ in range(route.tries):
        with todays(monkeypatch):
            naive = episode(sandbox, root_image, route.commands, test, role="naive-grader")
        rewards.append(reward_of(naive))
        if rewards[-1] == route.today:
            break
    assert rewards[-1] == route.today, (rewards, naive.error, naive.verdict)

    rollout = episode(sandbox, root_image, route.commands, test)
    assert rollout.termination == "done", rollout.error  # scored, not a harness error
    assert rollout.reward == 0 and rollout.verdict.status == "failed", rollout.verdict
    assert route.output in rollout.verdict.output, rollout.verdict.output


@pytest.mark.parametrize("script", ["", SCRIPT], ids=["our grader", "test.sh"])
def test_a_grader_lost_while_the_test_ran_is_a_scored_zero_where_no_fence_is(
    sandbox, root_image, monkeypatch, script
):
    """Where the kernel cannot fence the test off (no Landlock signal scoping), the test's
    program can kill the grader: that is a 0, scored, never a harness error (which a retry
    would turn into a second chance the agent's program decides)."""
    with todays(monkeypatch, backstop=True):
        rollout = episode(sandbox, root_image, [KILL_GRADER], graded(script))
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 0 and rollout.verdict.status == "error", rollout.verdict
    assert "grading was disturbed while the test ran" in rollout.verdict.detail


def test_this_kernel_fences_tests_off(sandbox, root_image):
    """The fence needs Landlock's signal scoping (Linux 6.12): the machines we run on have it."""
    with sandbox.container(root_image, labels={"role": "integrity"}) as box:
        verdict.start_grader(box)
        assert box.fenced
