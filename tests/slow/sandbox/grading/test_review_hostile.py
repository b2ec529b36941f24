"""An outside review: a hostile or buggy agent, and a scripted model, against the real harness.

Every test asserts the behaviour the README promises (or that a careful harness should have).
Tests marked `# BUG:` fail on the code as reviewed; the others are probes that already pass.
All of them use real Docker through the project's own API; nothing is mocked.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence

import pytest
from broken_families import Good
from conftest import own_containers

from endless_assets.agent.chat import ChatConfig, ChatPolicy
from endless_assets.agent.episode import (
    EpisodeLimits,
    Rollout,
    observation_text,
    run_episode,
    run_episode_in,
)
from endless_assets.agent.policies import Action, EpisodeTask
from endless_assets.agent.replies import parse_reply
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.families.git_history import GitHistory
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.grading.verdict import start_grader, stop_agent
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.stages.rollouts import Attempt
from endless_assets.store.columns import frame
from endless_assets.store.schemas import SolverRollouts
from endless_assets.testing.scripted_server import Reply, ScriptedServer

DONE = "<action>done</action>"


# -- helpers ---------------------------------------------------------------------------------------
def heredoc(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'ENDOFFILE'\n{text}ENDOFFILE"


def agent(container, *commands: str, timeout: float = 10) -> list:
    """Run commands as the agent in one shell session; the grader is resident first (as in an
    episode)."""
    start_grader(container)
    with ShellSession(container) as sh:
        return [sh.run(c, timeout=timeout) for c in commands]


class Scripted:
    """A policy that runs fixed commands, then says done."""

    name, model, prompt_version = "scripted", "fixed", ""

    def __init__(self, *commands: str) -> None:
        self.commands = list(commands)

    def reset(self, task) -> None:
        self.queue = list(self.commands)

    def act(self, observation):
        if self.queue:
            return Action("command", command=self.queue.pop(0))
        return Action("done")

    def messages(self):
        return []


def scripted(replies: Sequence[str | Reply]) -> Callable[[dict], str | Reply]:
    seen = [0]

    def responder(request: dict) -> str | Reply:
        n = seen[0]
        seen[0] += 1
        return replies[min(n, len(replies) - 1)]

    return responder


def chat_episode(
    sandbox, image: str, task_id: str, instruction: str, test: str, replies, **limits
) -> tuple[Rollout, ScriptedServer]:
    config = {"max_turns": 6, "command_timeout": 10.0, "output_cap": 2000, **limits}
    with ScriptedServer(scripted(replies)) as server:
        endpoint = Endpoint(model="scripted", base_url=server.base_url, retries=0)
        policy = ChatPolicy(
            ChatClient(endpoint),
            ChatConfig(
                model="scripted",
                max_turns=config["max_turns"],
                output_cap=config["output_cap"],
                command_timeout=config["command_timeout"],
            ),
        )
        rollout = run_episode(
            sandbox,
            image,
            EpisodeTask(task_id, instruction),
            policy,
            test,
            EpisodeLimits(**config),
            labels={"role": "test"},
        )
    assert not own_containers(sandbox), "the episode's container outlived it"
    return rollout, server


@pytest.fixture(scope="module")
def good(sandbox):
    """The test family's task (upper-case in.txt into out.txt), built once."""
    draft, _ = ProceduralGenerator(sandbox.base.tag, families=[Good]).describe("2026-05-01", 0, 3)
    build = sandbox.build(draft.dockerfile, draft.context_files)
    assert build.ok, build.log
    return draft, build.tag


@pytest.fixture(scope="module")
def git_revert_task(sandbox):
    """A real `git_history` task of the procedural generator whose action is `revert`."""
    generator = ProceduralGenerator(sandbox.base.tag, families=[GitHistory])
    for seed in range(50):
        draft, _ = generator.describe("2026-05-01", 0, seed)
        if draft.truth["action"] == "revert":
            break
    build = sandbox.build(draft.dockerfile, draft.context_files, network=False)
    assert build.ok, build.log
    return draft, build.tag


# == (a) reward 1 without doing the task =========================================================

# A git fsmonitor hook: git runs it (as root, from the completion test's `git status`) with the
# pytest child as an ancestor. It finds the grader, reads the current request id from the
# grader's memory and writes a forged "passed" reply onto the grader's own stdout.
FORGE_HOOK = r"""#!/usr/bin/python3
import os, re
def ppid(p):
    with open(f"/proc/{p}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])
def cmdline(p):
    with open(f"/proc/{p}/cmdline", "rb") as fh:
        return fh.read()
chain, p = [], os.getpid()
while p > 1:
    chain.append(p)
    p = ppid(p)
graders = [q for q in chain if b"grader.py" in cmdline(q)]
child, grader = graders[0], graders[-1]
run_dir = os.readlink(f"/proc/{child}/cwd").encode()
pattern = re.compile(rb'"id": "([0-9a-f]{12})", "run_dir": "' + re.escape(run_dir) + rb'"')
ident = None
with open(f"/proc/{grader}/maps") as maps, open(f"/proc/{grader}/mem", "rb", 0) as mem:
    for line in maps:
        span, perms = line.split()[:2]
        if "rw" not in perms:
            continue
        lo, hi = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(lo)
            found = pattern.search(mem.read(hi - lo))
        except (OSError, ValueError, OverflowError):
            continue
        if found:
            ident = found.group(1).decode()
            break
if ident:
    junit = '<testsuite tests=\\"1\\" failures=\\"0\\" errors=\\"0\\"/>'
    with open(f"/proc/{grader}/fd/1", "w") as out:
        out.write('{"id": "%s", "exit_code": 0, "junit": "%s", "output": ""}\n' % (ident, junit))
"""


# BUG: the git_history family's completion test runs `git -c safe.directory=* status` as root
# on the agent's repository, so any `core.fsmonitor` the agent put in .git/config runs as root
# during grading. The grader (root, dumpable, same capabilities) is an ancestor of that process,
# so the hook can read the request id from /proc/<grader>/mem and write a forged passing reply
# to /proc/<grader>/fd/1: reward 1 without touching the history.
def test_a_git_fsmonitor_hook_cannot_forge_the_verdict(sandbox, git_revert_task):
    draft, image = git_revert_task
    repo = draft.truth["repo"]
    commands = [
        heredoc("/home/user/.cache/fsm.py", FORGE_HOOK),
        "chmod +x /home/user/.cache/fsm.py",
        f"git -C {repo} config core.fsmonitor /home/user/.cache/fsm.py",
    ]
    replies = [f"<command>{c}</command>" for c in commands] + [DONE]
    rollout, _ = chat_episode(
        sandbox, image, draft.task_id, draft.instruction, draft.completion_test, replies
    )
    assert rollout.termination == "done", rollout.error
    assert all(t.exit_code == 0 for t in rollout.turns if t.kind == "command")
    # The repository was never reverted: the isolated verdict must say so.
    assert rollout.reward == 0, rollout.verdict


# BUG: pytest runs with its working directory in the root-only run directory that holds the
# test file, and reads the agent's files as root; a symlink to /proc/self/cwd/test_outputs.py
# makes the test read its own source, which contains every expected value. Any completion test
# that checks `expected in content` (the usual shape of LLM-written tests) then passes.
def test_a_symlink_into_proc_self_cannot_make_the_test_read_its_own_source(container):
    agent(container, "ln -s /proc/self/cwd/test_outputs.py /home/user/report.txt")
    test = (
        "def test_report():\n"
        "    content = open('/home/user/report.txt').read()\n"
        "    assert 'errors=17' in content\n"
    )
    verdict = run_pytest(container, test)
    assert not verdict.passed, verdict.output


# BUG: the README says the reward is 1 "only if at least one test ran", but parse_verdict counts
# skipped tests as run. A completion test that skips when a precondition is gone (a common
# shape of LLM-written tests) is passed by deleting the precondition instead of doing the work.
def test_a_verdict_where_every_test_was_skipped_is_not_a_pass(container):
    test = (
        "import os, pytest\n\n"
        "def test_report():\n"
        "    if not os.path.exists('/home/user/app.db'):\n"
        "        pytest.skip('the database is missing')\n"
        "    assert open('/home/user/report.txt').read() == 'done'\n"
    )
    agent(container, "touch /home/user/app.db")
    assert run_pytest(container, test).status == "failed"  # the honest starting point
    agent(container, "rm /home/user/app.db")
    verdict = run_pytest(container, test)
    assert not verdict.passed, verdict.summary()


def test_a_fifo_in_place_of_the_output_is_a_timeout_not_a_pass_or_harness_error(container):
    agent(container, "mkfifo /home/user/out.txt")
    test = "def test_x():\n    assert open('/home/user/out.txt').read() == 'x'\n"
    verdict = run_pytest(container, test, timeout=2)
    assert not verdict.passed and verdict.status == "timeout"


def test_a_symlink_to_a_root_only_file_does_not_pass_an_equality_test(container):
    agent(container, "ln -s /etc/shadow /home/user/out.txt; ln -s /verifier /home/user/v")
    test = "def test_x():\n    assert open('/home/user/out.txt').read().strip() == 'HELLO'\n"
    verdict = run_pytest(container, test)
    assert verdict.status == "failed"


# == (b) wrong or misleading results ===============================================================


# BUG: the grader returns at most 200,000 characters of junit.xml; a larger report (here a
# suite of 1,200 passing parametrized cases) is cut, fails to parse, counts as 0 tests and
# 1 error, and an honest, fully passing run is recorded as `no_tests` with reward 0.
def test_a_large_passing_suite_is_a_pass(container):
    test = (
        "import pytest\n\n"
        "@pytest.mark.parametrize('case', [f'{i:04d}-' + 'x' * 200 for i in range(1200)])\n"
        "def test_case(case):\n"
        "    assert case\n"
    )
    verdict = run_pytest(container, test)
    assert verdict.passed, verdict.summary()
    assert verdict.tests == 1200


# BUG: a test killed by the kernel's OOM killer (here: it reads a sparse file the agent made
# bigger than the container's memory) exits with SIGKILL, which the grader reports as 137 and
# parse_verdict maps to `timeout`, although it died after seconds of a generous timeout.
def test_a_test_killed_for_memory_is_not_reported_as_a_timeout():
    small = Sandbox(SandboxConfig(limits=Limits(memory="256m")))
    with small.container(small.base.tag, labels={"role": "test"}) as box:
        agent(box, "truncate -s 400M /home/user/out.txt")
        started = time.monotonic()
        verdict = run_pytest(
            box, "def test_x():\n    assert open('/home/user/out.txt').read() == 'x'\n", timeout=60
        )
        assert time.monotonic() - started < 30
    assert not verdict.passed
    assert verdict.status != "timeout", verdict.summary()


# BUG: a misconfigured `turn_tokens` that the endpoint refuses (HTTP 400 "max_tokens is too
# large ... at most 1024 completion tokens") contains the word "token", so chat.py takes it for
# a context overflow; on the first turn nothing can be folded and the episode ends as
# `context_limit` and is graded: reward 0 for every attempt, and every task rejected as
# `unsolved`, instead of a harness_error that reruns.
def test_an_endpoint_refusing_max_tokens_on_the_first_turn_is_a_harness_error(sandbox, good):
    draft, image = good
    refused = Reply(
        status=400,
        body={
            "error": {
                "message": "max_tokens is too large: 4096. This model supports at most 1024 "
                "completion tokens, whereas you provided 4096.",
                "type": "invalid_request_error",
            }
        },
    )
    rollout, _ = chat_episode(
        sandbox, image, draft.task_id, draft.instruction, draft.completion_test, [refused]
    )
    assert rollout.n_turns == 0
    assert rollout.termination == "harness_error" and rollout.reward is None, (
        rollout.termination,
        rollout.reward,
        rollout.error,
    )


def test_a_fork_bomb_in_a_timed_out_command_is_graded_not_a_harness_error(container):
    bomb = (
        "for i in 1 2 3 4; do env -u ENDLESS_CMD setsid sh -c "
        "'while :; do sleep 1000 & done' >/dev/null 2>&1 & done; sleep 1000"
    )
    test = "def test_x():\n    assert open('/home/user/a').read().strip() == '42'\n"
    policy = Scripted(bomb, "echo 42 > /home/user/a")
    rollout = run_episode_in(
        container, EpisodeTask("t", "x"), policy, test, EpisodeLimits(command_timeout=2)
    )
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 1


# A parent that never gives up a pid: it forks whenever one is free (sh would die of a failed fork).
FILL_PIDS_THEN_EXIT = (
    "env -u ENDLESS_CMD setsid python3 -c $'import os\\nwhile 1:\\n try:\\n  "
    'os.fork() or os.execvp("sleep", ["sleep", "1000"])\\n except OSError: pass\' '
    ">/dev/null 2>&1 & "
    "p=/sys/fs/cgroup/pids; [ -d $p ] || p=/sys/fs/cgroup; "  # cgroup v1 or v2
    "while :; do read -r n < $p/pids.current; read -r m < $p/pids.max; [ $n -ge $m ] && break; "
    "done; exit"
)


def test_a_shell_that_exits_while_the_pids_limit_is_full_comes_back_with_the_bomb_killed(
    container,
):
    start_grader(container)
    # Naive: nothing frees a pid, so no new shell can start. (A race: under load the new shell
    # can take the pid the old one freed before the bomb does; a naive start stranded in any
    # of five tries shows the problem.)
    stranded = False
    for _ in range(5):
        try:
            with ShellSession(container) as sh:
                sh.run(FILL_PIDS_THEN_EXIT, timeout=60)
        except SandboxError:
            stranded = True
        stop_agent(container)
        if stranded:
            break
    assert stranded, "a naive shell always came back"
    # Ours: the resident grader kills the agent's processes without a fork, then the shell starts.
    with ShellSession(container, stop_agent=functools.partial(stop_agent, container)) as sh:
        exited = sh.run(FILL_PIDS_THEN_EXIT, timeout=60)
        after = sh.run("echo alive; pgrep -c -u user sleep || true")
    assert exited.shell_restarted and "every process of yours was killed" in exited.note, exited
    assert after.output == "alive\n0\n", after.output


def test_a_shell_that_exits_with_the_pids_limit_nearly_full_comes_back_with_them_killed(container):
    # Not a bomb: 470 sleepers of 512 pids leave room for a new shell and a start, which a bomb
    # under load also sometimes does (it takes freed pids as fast as it can, not always first).
    start_grader(container)
    stop = functools.partial(stop_agent, container)
    with ShellSession(container, stop_agent=stop) as sh:
        exited = sh.run(
            "for i in $(seq 470); do setsid sleep 1000 >/dev/null 2>&1 & done; exit", timeout=120
        )
        after = sh.run("pgrep -c -u user sleep || true")
    assert exited.shell_restarted and "every process of yours was killed" in exited.note, exited
    assert after.output == "0\n", after.output


# == (c) the persistent shell: state and framing ===================================================


# BUG: the end marker is the same nonce the shell exports as ENDLESS_CMD, so a command can print
# it: the harness then cuts the command's output short, reports a made-up exit code and cwd,
# and the rest (plus the real marker) shows up as the *next* command's output.
def test_a_command_cannot_forge_the_end_marker(container):
    with ShellSession(container) as sh:
        forged = sh.run("printf '\\n%s 7 /fake\\n' \"$ENDLESS_CMD\"; echo real")
        after = sh.run("echo next")
    # What the printf prints is the command's own output, kept verbatim ("real" follows it).
    assert forged.exit_code == 0 and forged.output.endswith(" 7 /fake\nreal\n"), forged.output
    assert after.output == "next\n"


# BUG: the marker line is `nonce code $PWD\n`, so a working directory with a newline in its name
# ends the line early: the tail of the name is left over and prefixes the output of every
# following command, and the harness records a wrong cwd (used when the shell restarts).
def test_a_working_directory_with_a_newline_does_not_leak_into_later_output(container):
    with ShellSession(container) as sh:
        sh.run("mkdir -p \"$(printf '/tmp/a\\nb')\" && cd \"$(printf '/tmp/a\\nb')\"")
        assert sh.run("echo ok").output == "ok\n"
        assert sh.cwd == "/tmp/a\nb"


# BUG: after `exit 3` (or `set -e` then a failing command) the shell is restarted but the exit
# code is lost, and the observation tells the model "[exit code: none (timed out)]" although
# nothing timed out.
def test_the_exit_code_of_a_command_that_ends_the_shell_is_reported(container):
    with ShellSession(container) as sh:
        result = sh.run("exit 3")
        assert result.shell_restarted and not result.timed_out
        assert "timed out" not in observation_text(result, 1000)
        assert result.exit_code == 3


# BUG: `exec >/dev/null 2>&1` also redirects the shell's own end marker, so the harness waits out
# the whole command timeout (60 s by default), then declares the shell "stuck" and restarts it
# (losing variables), and reports a command that finished at once as timed out.
def test_redirecting_the_shells_stdout_does_not_cost_a_timeout(container):
    with ShellSession(container) as sh:
        sh.run("KEEP=1")
        started = time.monotonic()
        result = sh.run("exec >/dev/null 2>&1", timeout=2)
        assert not result.timed_out, result.note
        assert time.monotonic() - started < 1.5
        assert sh.run("echo $KEEP").output == "1\n"


# BUG: observation_text formats a restart note as "[command timed out and was {note}]", which
# for a stuck shell reads "command timed out and was the shell itself was stuck and was
# restarted ..." in what the model is shown.
def test_the_observation_of_a_stuck_shell_is_readable(container):
    with ShellSession(container) as sh:
        result = sh.run("while true; do :; done", timeout=1)
    assert result.timed_out and result.shell_restarted
    seen = observation_text(result, 1000)
    assert "was the shell itself" not in seen, seen


# BUG: every command runs as `eval "$cmd" </dev/null`, which needs a free file descriptor; after
# `ulimit -n 4` every later command fails with "Too many open files" before it runs, including
# `ulimit -n 1024` and `exit`, and the shell is never restarted: the episode is bricked. In a
# real terminal builtins and plain commands keep working.
def test_a_low_open_files_limit_does_not_brick_the_shell(container):
    with ShellSession(container) as sh:
        sh.run("ulimit -n 4")
        assert sh.run("echo hi").output == "hi\n"


# BUG: with `set -x` the harness's own framing (`__endless_run`, `builtin read`, the end-marker
# printf with its nonce) is traced into every observation.
def test_xtrace_does_not_show_the_harness_framing(container):
    with ShellSession(container) as sh:
        sh.run("set -x")
        output = sh.run("echo traced").output
    assert "traced" in output
    assert "__endless" not in output and "__ENDLESS_END_" not in output, output


def test_state_and_framing_survive_hostile_but_harmless_commands(container):
    with ShellSession(container, output_cap=5000) as sh:
        sh.run("cd /tmp && KEEP=1")
        # text that looks like a marker, without the nonce
        looks = sh.run("echo __ENDLESS_END_0123456789abcdef01234567 0 /; echo x")
        assert looks.output == "__ENDLESS_END_0123456789abcdef01234567 0 /\nx\n"
        # NUL and invalid UTF-8 are kept / replaced, not mis-framed
        assert sh.run("printf 'a\\0b\\377c\\n'").output == "a\x00b\ufffdc\n"
        # an extremely long single line
        long = sh.run("head -c 3000000 /dev/zero | tr '\\0' x")
        assert long.truncated and long.original_bytes == 3_000_000 and len(long.output) == 5000
        # empty and whitespace-only commands, unicode, set -u, pipefail
        assert sh.run("").exit_code == 0 and sh.run("  \n ").exit_code == 0
        assert sh.run("echo 'ünï €'").output == "ünï €\n"
        assert sh.run("set -u -o pipefail; echo $KEEP").output == "1\n"
        assert sh.run("echo $PWD").output == "/tmp\n"
        # NUL in the command itself is dropped, the rest runs
        assert sh.run("echo a\x00b").output == "ab\n"
        # a file descriptor the agent opens for itself
        assert sh.run("exec 3>/tmp/log3; echo three >&3; cat /tmp/log3").output == "three\n"


def test_ignored_sigint_exec_and_exit_traps_are_recovered(container):
    with ShellSession(container) as sh:
        sh.run("cd /var")
        stubborn = sh.run("trap '' INT; sleep 100", timeout=1)
        assert stubborn.timed_out and sh.run("echo ok").output == "ok\n"
        replaced = sh.run("exec sleep 100", timeout=1)
        assert replaced.timed_out and replaced.shell_restarted
        assert sh.run("pwd").output == "/var\n"
        sh.run("trap 'echo bye' EXIT")
        bye = sh.run("exit")
        assert bye.shell_restarted and bye.output == "bye\n"
        assert sh.run("pwd").output == "/var\n"


def test_an_unreadable_home_and_cwd_do_not_stop_the_shell_restarting(container):
    with ShellSession(container) as sh:
        sh.run("mkdir /tmp/d && cd /tmp/d && chmod 000 /tmp/d /home/user")
        assert sh.run("exit").shell_restarted
        assert sh.run("echo alive").output == "alive\n"


def test_background_processes_do_not_outlive_the_episode_into_the_verdict(container):
    test = (
        "import time\n\n"
        "def test_x():\n"
        "    time.sleep(1.5)\n"
        "    assert open('/home/user/a').read().strip() == '42'\n"
    )
    policy = Scripted(
        "nohup setsid sh -c 'sleep 1; echo 42 > /home/user/a' >/dev/null 2>&1 &",
        "env -u ENDLESS_CMD sh -c 'sleep 1; echo 42 > /home/user/a' >/dev/null 2>&1 &",
    )
    rollout = run_episode_in(container, EpisodeTask("t", "x"), policy, test)
    assert rollout.termination == "done" and rollout.reward == 0


# == (d) replies a real OpenAI-compatible server can send ==========================================


# BUG: a JSON reply may carry a lone surrogate escape ("\ud800", e.g. from a proxy that cut a
# UTF-16 string); the command is encoded with errors="surrogateescape", which only covers
# U+DC80-U+DCFF, so ShellSession.run raises UnicodeEncodeError out of run_episode: the episode
# is lost (a harness_error at stage level) for what is the model's fault.
def test_a_lone_surrogate_in_a_model_command_does_not_crash_the_episode(sandbox, good):
    draft, image = good
    replies = ["<command>echo caf\ud800 > /home/user/out.txt</command>", DONE]
    rollout, _ = chat_episode(
        sandbox, image, draft.task_id, draft.instruction, draft.completion_test, replies
    )
    assert rollout.termination == "done" and rollout.reward == 0


# BUG: `<think>`/`</think>` inside a command (grep for it, sed it out of a model's log, write an
# XML file with a <reasoning> element) is taken for the start of a thinking block, so a
# well-formed single command is rejected as "the reply ended inside its thinking".
def test_a_think_tag_inside_a_command_is_part_of_the_command():
    parsed = parse_reply("<command>grep -c '<think>' /home/user/chat.log</command>")
    assert parsed.kind == "command", parsed.error
    assert parsed.command == "grep -c '<think>' /home/user/chat.log"


TOOL_CALL = Reply(
    body={
        "id": "chatcmpl-tool",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
)
NO_USAGE_NULL_FINISH = Reply(
    body={
        "id": "chatcmpl-bare",
        "object": "chat.completion",
        "created": 1,
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "<command>tr a-z A-Z < /home/user/in.txt > /home/user/out.txt"
                    "</command>",
                },
                "finish_reason": None,
            }
        ],
    }
)


def test_tool_calls_null_content_no_usage_and_binary_output_are_handled(sandbox, good):
    draft, image = good
    replies = [
        TOOL_CALL,
        "<command>printf 'bin\\0ary\\377\\n'</command>",
        "<command>ls</command>\n<command>pwd</command>",
        NO_USAGE_NULL_FINISH,
        Reply("<command>cat /home/user/out.txt</command>", reasoning="checking"),
        DONE,
    ]
    rollout, server = chat_episode(
        sandbox, image, draft.task_id, draft.instruction, draft.completion_test, replies
    )
    kinds = [t.kind for t in rollout.turns]
    assert kinds == ["invalid", "command", "invalid", "command", "command", "done"]
    assert rollout.turns[1].output == "bin\x00ary\ufffd\n"
    assert rollout.turns[4].thought == "checking"
    assert (rollout.termination, rollout.reward) == ("done", 1)
    # the null content went back to the server as an empty assistant message, roles alternate
    assert server.requests[1]["messages"][2] == {"role": "assistant", "content": ""}
    row = Attempt("2026-05-01", 0, rollout).row()
    SolverRollouts.validate(frame("solver_rollouts", [row]))
