"""The persistent shell: state persists, timeouts interrupt, output is capped honestly."""

from __future__ import annotations

import time

from endless_assets.agent.episode import run_episode_in
from endless_assets.agent.policies import EpisodeTask, NoopPolicy
from endless_assets.sandbox.containers.shell import ShellSession


def test_state_persists_across_commands(container):
    with ShellSession(container) as sh:
        assert sh.run("cd /tmp && export GREETING=hello && f() { echo fn-$1; }").exit_code == 0
        result = sh.run("echo $GREETING $PWD; f ok; whoami")
        assert result.output == "hello /tmp\nfn-ok\nuser\n"
        assert result.exit_code == 0


def test_exit_codes_and_stderr_are_reported(container):
    with ShellSession(container) as sh:
        result = sh.run("ls /definitely-missing")
        assert result.exit_code == 2
        assert "No such file or directory" in result.output
        assert sh.run("false").exit_code == 1


def test_output_without_trailing_newline_is_exact(container):
    with ShellSession(container) as sh:
        assert sh.run("printf 'a\\nb'").output == "a\nb"
        assert sh.run("printf 'é€ ünïcode'").output == "é€ ünïcode"


def test_syntax_error_does_not_break_the_session(container):
    with ShellSession(container) as sh:
        result = sh.run("echo 'unterminated")
        assert result.exit_code == 2
        assert sh.run("echo still-here").output == "still-here\n"


def test_commands_cannot_read_the_protocol_stream(container):
    with ShellSession(container) as sh:
        assert sh.run("cat").output == ""  # stdin is /dev/null, not the framing
        assert sh.run("read -r line; echo got:$line").output == "got:\n"
        assert sh.run("echo next").output == "next\n"


def test_agent_locale_changes_do_not_break_framing(container):
    with ShellSession(container) as sh:
        sh.run("export LC_ALL=C LANG=C")
        assert sh.run("echo 'é€ after C locale'").output == "é€ after C locale\n"


def test_timeout_interrupts_the_command_and_keeps_the_shell(container):
    with ShellSession(container) as sh:
        sh.run("cd /tmp && KEEP=1")
        result = sh.run("echo started; sleep 600", timeout=1.5)
        assert result.timed_out
        assert result.exit_code is None
        assert result.output.startswith("started")
        assert not result.shell_restarted
        # the interrupted sleep is gone; the shell and its state are intact
        after = sh.run("echo $KEEP $PWD; pgrep -u user -x sleep || echo no-sleep")
        assert after.output == "1 /tmp\nno-sleep\n"


def test_background_jobs_survive_a_later_timeout(container):
    with ShellSession(container) as sh:
        sh.run("sleep 300 & echo $! > /tmp/bg.pid")
        assert sh.run("sleep 600", timeout=1).timed_out
        alive = sh.run("kill -0 $(cat /tmp/bg.pid) && echo alive")
        assert alive.output == "alive\n"


def test_a_busy_builtin_loop_restarts_the_shell_in_the_same_directory(container):
    with ShellSession(container) as sh:
        sh.run("cd /var")
        result = sh.run("while true; do :; done", timeout=1)
        assert result.timed_out and result.shell_restarted
        assert "restarted" in result.note
        assert sh.run("pwd").output == "/var\n"


def test_exit_starts_a_new_shell(container):
    with ShellSession(container) as sh:
        sh.run("cd /etc")
        result = sh.run("exit 3")
        assert result.shell_restarted
        assert sh.run("pwd; echo ok").output == "/etc\nok\n"


def test_output_is_capped_and_original_size_reported(container):
    with ShellSession(container, output_cap=1000) as sh:
        result = sh.run("seq 1 100000")
        expected = "".join(f"{i}\n" for i in range(1, 100001))
        assert result.truncated
        assert len(result.output) == 1000
        assert result.output == expected[:1000]
        assert result.original_bytes == len(expected)
        assert sh.run("echo fine").output == "fine\n"


def test_a_flood_is_cut_by_the_timeout(container):
    with ShellSession(container, output_cap=500) as sh:
        result = sh.run("yes flood", timeout=1)
        assert result.timed_out and result.truncated
        assert len(result.output) == 500
        assert result.original_bytes > 500
        assert sh.run("echo calm").output == "calm\n"


def test_the_agent_is_not_root_and_has_no_network(container):
    with ShellSession(container) as sh:
        assert sh.run("id -u").output == "1000\n"
        assert sh.run("echo $HOME").output == "/home/user\n"
        assert sh.run("cat /proc/net/dev | grep -c ':'").output == "1\n"  # only lo
        assert sh.run("touch /etc/x").exit_code != 0
        assert sh.run("ls /verifier").exit_code != 0


def test_a_runaway_writer_is_stopped_at_the_file_size_cap(sandbox):
    from endless_assets.sandbox.containers.container import Limits
    from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig

    small = Sandbox(SandboxConfig(limits=Limits(file_size_mb=8)))
    with small.container(small.base.tag) as box, ShellSession(box) as sh:
        result = sh.run("yes endless > /home/user/big; echo rc=$?; stat -c %s /home/user/big")
        assert "rc=153" in result.output  # 128 + SIGXFSZ
        assert result.output.strip().endswith(str(8 * 1024 * 1024))


def shells_started(container, since: float) -> int:
    """How many agent shells the engine was asked to start in `container` since `since`."""
    events = container.client.api.events(
        since=since,
        until=time.time() + 1,
        filters={"container": container.id, "event": "exec_create"},
        decode=True,
    )
    return sum("bash --noprofile --norc -c IFS=" in e.get("Action", "") for e in events)


def test_a_lazy_shell_starts_at_its_first_command_and_a_do_nothing_episode_starts_none(
    container,
):
    since = time.time() - 1
    with ShellSession(container, lazy=True) as sh:
        assert shells_started(container, since) == 0
        assert sh.run("echo started; whoami").output == "started\nuser\n"
        assert shells_started(container, since) == 1
    rollout = run_episode_in(
        container, EpisodeTask("t", "do nothing", ""), NoopPolicy(), "def test_x(): pass\n"
    )
    assert (rollout.termination, rollout.reward) == ("done", 1)
    assert shells_started(container, since) == 1  # the episode that ran no command: none
    eager = ShellSession(container)
    eager.close()
    assert shells_started(container, since) == 2  # (what the count sees: an eager shell)
