"""Chat-model episodes on real Docker, driven over HTTP by a scripted OpenAI-compatible server.

Each scripted model plays one kind of agent (one that succeeds, loops, runs out of turns, sends
unusable replies, runs a command that never ends, floods its output, or tries to make the tests
pass without doing the task). Every test checks that no container outlives its episode and that
each request the server received can be rebuilt exactly from the stored rollout.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest
from broken_families import Good
from conftest import own_containers

from endless_assets.agent.chat import ChatConfig, ChatPolicy
from endless_assets.agent.context import request_for_turn
from endless_assets.agent.episode import EpisodeLimits, Rollout, run_episode, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.stages.rollouts import Attempt
from endless_assets.store.columns import frame
from endless_assets.store.schemas import SolverRollouts
from endless_assets.testing.scripted_server import Reply, ScriptedServer

SOLVE = "<command>tr a-z A-Z < /home/user/in.txt > /home/user/out.txt</command>"
DONE = "<action>done</action>"
USER_SITE = "/home/user/.local/lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def task(sandbox):
    """The test family's task (upper-case in.txt into out.txt), built once."""
    draft, _ = ProceduralGenerator(sandbox.base.tag, families=[Good]).describe("2026-05-01", 0, 3)
    build = sandbox.build(draft.dockerfile, draft.context_files)
    assert build.ok, build.log
    return draft, build.tag


def scripted(replies: Sequence[str | Reply]) -> Callable[[dict], str | Reply]:
    """Answer the n-th request with the n-th reply (the last one repeats)."""
    seen = [0]

    def responder(request: dict) -> str | Reply:
        n = seen[0]
        seen[0] += 1
        return replies[min(n, len(replies) - 1)]

    return responder


def play(
    sandbox, task, replies, *, exact_requests: bool = True, **limits
) -> tuple[Rollout, ScriptedServer, dict]:
    draft, image = task
    config = {"max_turns": 6, "command_timeout": 10.0, "output_cap": 2000, **limits}
    with ScriptedServer(scripted(replies)) as server:
        endpoint = Endpoint(model="scripted", base_url=server.base_url, retries=0)
        agent = ChatPolicy(
            ChatClient(endpoint),
            ChatConfig(
                model="scripted",
                max_turns=config["max_turns"],
                output_cap=config["output_cap"],
                command_timeout=config["command_timeout"],
                **{k: config.pop(k) for k in ("context_tokens", "turn_tokens") if k in config},
            ),
        )
        rollout = run_episode(
            sandbox,
            image,
            EpisodeTask(draft.task_id, draft.instruction),
            agent,
            draft.completion_test,
            EpisodeLimits(**config),
            labels={"role": "test"},
        )
    assert not own_containers(sandbox), "the episode's container outlived it"
    if exact_requests:
        trajectory = rollout.trajectory()
        assert len(server.requests) == rollout.n_turns
        for i, request in enumerate(server.requests):
            assert request["messages"] == request_for_turn(rollout.messages, trajectory, i)
    row = Attempt("2026-05-01", 0, rollout).row()
    SolverRollouts.validate(frame("solver_rollouts", [row]))
    return rollout, server, row


def test_a_solver_that_succeeds_in_a_few_turns(sandbox, task):
    rollout, _, row = play(
        sandbox,
        task,
        [
            "<think>First see the input.</think>\n<command>cat /home/user/in.txt</command>",
            "Upper-case it.\n" + SOLVE,
            "Let me check.\n<command>cat /home/user/out.txt</command>",
            "It is right.\n" + DONE,
        ],
    )
    assert (rollout.reward, rollout.termination, rollout.n_turns) == (1, "done", 4)
    assert rollout.verdict is not None and rollout.verdict.status == "passed"
    first, _, check, done = rollout.turns
    assert first.thought == "First see the input." and first.command == "cat /home/user/in.txt"
    assert first.output.startswith("hello ") and first.exit_code == 0
    assert check.output.startswith("HELLO ")
    assert done.kind == "done" and done.thought == "It is right."
    assert all(t.tokens_in > 0 and t.tokens_out > 0 for t in rollout.turns)
    roles = [m["role"] for m in rollout.messages]
    assert roles == ["system", "user"] + ["assistant", "user"] * 3 + ["assistant"]
    assert rollout.messages[3]["content"].endswith("[exit code: 0]")
    assert rollout.prompt_version.startswith("solver-")
    assert row["failure_mode"] == "solved" and not row["loop_detected"]
    assert row["commands"] == 3 and row["command_diversity"] is None
    stored = json.loads(row["trajectory"])
    assert [t["tokens_in"] for t in stored] == [t.tokens_in for t in rollout.turns]
    assert json.loads(row["messages"]) == rollout.messages


def test_a_solver_that_loops_is_detected(sandbox, task):
    rollout, _, row = play(
        sandbox, task, ["Try again.\n<command>cat /home/user/output.txt</command>"], max_turns=5
    )
    assert (rollout.reward, rollout.termination) == (0, "turn_limit")
    assert all(t.exit_code == 1 for t in rollout.turns)
    assert row["loop_detected"] and row["failure_mode"] == "loop" and row["turn_exhausted"]
    assert row["command_diversity"] == pytest.approx(1 / 5)


def test_a_solver_that_runs_out_of_turns(sandbox, task):
    replies = [f"<command>echo step {i} && ls /home/user | wc -l</command>" for i in range(10)]
    rollout, _, row = play(sandbox, task, replies, max_turns=4)
    assert (rollout.reward, rollout.termination, rollout.n_turns) == (0, "turn_limit", 4)
    assert not row["loop_detected"] and row["failure_mode"] == "turn_exhaustion"
    assert row["command_diversity"] is None  # no command failed


def test_a_solver_that_sends_unusable_replies_loses_each_turn(sandbox, task):
    replies = [
        "I would upper-case the file now.",
        "<command>ls</command>\n<command>pwd</command>",
        Reply("<think>so much to consider", finish_reason="length"),
        "<command>   </command>",
    ]
    rollout, server, row = play(sandbox, task, replies, max_turns=4)
    assert (rollout.reward, rollout.termination) == (0, "turn_limit")
    assert [t.kind for t in rollout.turns] == ["invalid"] * 4
    errors = [t.error for t in rollout.turns]
    assert "no <command>" in errors[0] and "2 <command>/<action> blocks" in errors[1]
    assert "token limit while still thinking" in errors[2] and "empty" in errors[3]
    for error, request in zip(errors, server.requests[1:], strict=False):
        corrective = request["messages"][-1]["content"]
        assert error in corrective and "<action>done</action>" in corrective
    assert row["invalid_turns"] == 4 and row["commands"] == 0
    assert row["failure_mode"] == "unparsable"


def test_a_command_that_never_ends_is_interrupted_and_a_flood_is_capped(sandbox, task):
    rollout, server, row = play(
        sandbox,
        task,
        [
            "<command>echo waiting; sleep 1000</command>",
            "<command>head -c 300000 /dev/zero | tr '\\0' x</command>",
            SOLVE,
            DONE,
        ],
        command_timeout=1.5,
        output_cap=1000,
    )
    hang, flood, solve, _ = rollout.turns
    assert hang.timed_out and hang.exit_code is None and hang.output.startswith("waiting")
    hang_seen = server.requests[1]["messages"][-1]["content"]
    assert "timed out" in hang_seen and "interrupted" in hang_seen
    assert flood.truncated and flood.original_bytes == 300_000 and len(flood.output) == 1000
    flood_seen = server.requests[2]["messages"][-1]["content"]
    assert "showing the first 1000 characters of 300000 bytes" in flood_seen
    assert solve.exit_code == 0, "the shell stayed usable after the interruption"
    assert (rollout.reward, rollout.termination) == (1, "done")
    assert row["command_timeouts"] == 1 and row["truncated_outputs"] == 1


def test_the_wall_clock_ends_an_episode_as_time_limit(sandbox, task):
    # Room for the first turn to start on a loaded machine; the command would outlast it 30 times.
    rollout, _, row = play(
        sandbox, task, ["<command>sleep 600</command>"], episode_seconds=20.0, command_timeout=900.0
    )
    assert (rollout.reward, rollout.termination) == (0, "time_limit")
    assert rollout.turns[0].timed_out and rollout.seconds < 600
    assert row["failure_mode"] == "time_limit"


def test_a_conversation_the_endpoint_refuses_as_too_long_is_a_context_limit(sandbox, task):
    too_long = Reply(status=400, body={"error": {"message": "maximum context length exceeded"}})
    rollout, server, row = play(
        sandbox, task, ["<command>ls</command>", too_long], exact_requests=False
    )
    assert (rollout.reward, rollout.termination) == (0, "context_limit")
    assert rollout.verdict is not None, "a context limit is still graded"
    assert "too long with every earlier turn folded" in rollout.error
    assert len(server.requests) == 3 and row["failure_mode"] == "context_limit"


def test_an_endpoint_that_dies_mid_episode_is_a_harness_error(sandbox, task):
    rollout, _, row = play(
        sandbox, task, ["<command>ls</command>", Reply(status=503)], exact_requests=False
    )
    assert rollout.reward is None and rollout.termination == "harness_error"
    assert rollout.error.startswith("PolicyUnavailable")
    assert rollout.n_turns == 1 and len(rollout.messages) == 4  # what happened is kept
    assert row["failure_mode"] == "harness_error"


def test_time_queued_for_the_model_is_not_the_agents_time(sandbox, task):
    # Three episodes share one endpoint that takes one request at a time, 3 s per reply, so each
    # waits for the others' replies at every turn: about 9 s of its own model time and 15-18 s
    # of waiting before its last turn. With that wait on its clock, every episode would end as a
    # time_limit before its last turn (a budget of 21 s).
    draft, image = task
    replies = ["<command>echo one</command>", "<command>echo two</command>"]
    replies += ["<command>echo three</command>", DONE]
    by_episode: dict[str, int] = {}

    def responder(request: dict) -> Reply:
        episode = request["messages"][1]["content"]
        turn = by_episode[episode] = by_episode.get(episode, -1) + 1
        return Reply(replies[min(turn, len(replies) - 1)], delay=3.0)

    limits = EpisodeLimits(max_turns=6, command_timeout=10.0, episode_seconds=21.0)
    with ScriptedServer(responder, serial=True) as server, contextlib.ExitStack() as stack:
        client = ChatClient(Endpoint(model="scripted", base_url=server.base_url, concurrency=1))
        boxes = [
            stack.enter_context(sandbox.container(image, labels={"role": "test"})) for _ in range(3)
        ]

        def episode(i: int) -> Rollout:
            agent = ChatPolicy(client, ChatConfig(model="scripted", max_turns=6))
            instruction = f"{draft.instruction}\n(episode {i})"
            return run_episode_in(
                boxes[i],
                EpisodeTask(draft.task_id, instruction),
                agent,
                draft.completion_test,
                limits,
            )

        with ThreadPoolExecutor(3) as pool:
            rollouts = list(pool.map(episode, range(3)))
    assert not own_containers(sandbox)
    assert server.max_in_flight == 1
    assert [(r.termination, r.n_turns) for r in rollouts] == [("done", 4)] * 3
    assert all(r.queue_seconds > 9.0 for r in rollouts), "each waited for two others, 3 times"
    later = max(rollouts, key=lambda r: r.seconds)
    assert later.seconds > limits.episode_seconds, "the wall clock passed the budget"
    row = Attempt("2026-05-01", 0, later).row()
    assert row["queue_seconds"] == later.queue_seconds
    SolverRollouts.validate(frame("solver_rollouts", [row]))


FORCE_PASS = (
    "import pytest\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    outcome.get_result().outcome = 'passed'\n"
)


def write(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'ENDOFFILE'\n{text}ENDOFFILE"


CHEATS = {
    "a conftest.py in the home that rewrites every outcome": [
        write("/home/user/conftest.py", FORCE_PASS),
    ],
    "a pytest plugin auto-loaded from the user site-packages": [
        write(f"{USER_SITE}/force_pass.py", FORCE_PASS),
        write(
            f"{USER_SITE}/force_pass-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: force-pass\nVersion: 1.0\n",
        ),
        write(
            f"{USER_SITE}/force_pass-1.0.dist-info/entry_points.txt",
            "[pytest11]\nforce_pass = force_pass\n",
        ),
    ],
    "a startup hook (usercustomize) that loads a plugin into every python": [
        write(f"{USER_SITE}/force_pass.py", FORCE_PASS),
        write(
            f"{USER_SITE}/usercustomize.py",
            "import os\nos.environ.setdefault('PYTEST_PLUGINS', 'force_pass')\n",
        ),
    ],
    "exported variables that put a plugin on python's path": [
        write("/home/user/evil/force_pass.py", FORCE_PASS),
        "export PYTHONPATH=/home/user/evil PYTEST_PLUGINS=force_pass",
    ],
    "fake python3 and pytest first on the PATH, and a planted verdict": [
        "mkdir -p /home/user/.local/bin",
        "printf '#!/bin/sh\\necho 1 passed\\nexit 0\\n' > /home/user/.local/bin/python3",
        "cp /home/user/.local/bin/python3 /home/user/.local/bin/pytest && chmod +x "
        "/home/user/.local/bin/*",
        "export PATH=/home/user/.local/bin:$PATH; hash -r",
        "mkdir -p /verifier/run-0 && echo '<testsuite tests=\"1\"/>' > /verifier/run-0/junit.xml",
    ],
}


@pytest.mark.parametrize("route", list(CHEATS), ids=list(CHEATS))
def test_a_solver_that_games_the_tests_instead_of_the_task_gets_no_reward(sandbox, task, route):
    draft, _ = task
    copy = write("/home/user/test_copy.py", draft.completion_test)
    naive = "cd /home/user && python3 -m pytest -q -p no:cacheprovider test_copy.py; cd /tmp"
    commands = [*CHEATS[route], copy, naive]
    replies = [f"<command>{c}</command>" for c in commands] + [DONE]
    rollout, _, row = play(sandbox, task, replies, max_turns=len(replies))
    assert rollout.termination == "done" and rollout.n_turns == len(replies)
    # The route works: the agent's own pytest run of the same test passes ...
    assert re.search(r"\b1 passed\b", rollout.turns[-2].output), rollout.turns[-2].output
    # ... and the isolated verdict still sees the untouched task.
    assert rollout.reward == 0, rollout.verdict
    assert rollout.verdict is not None and rollout.verdict.tests == 1
    assert row["failure_mode"] == "wrong_done"
