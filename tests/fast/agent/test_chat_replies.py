"""Reply parsing: what real chat models send, and what is refused with a reason."""

from __future__ import annotations

import pytest

from endless_assets.agent.replies import clean_text, parse_reply


@pytest.mark.parametrize(
    ("reply", "command"),
    [
        ("<command>ls -la</command>", "ls -la"),
        ("I will look around first.\n<command>ls -la /home/user</command>", "ls -la /home/user"),
        ("<COMMAND>ls</COMMAND>", "ls"),
        ('<command id="1">pwd</command >', "pwd"),
        ("<command>\n```bash\ncat a.txt | sort\n```\n</command>", "cat a.txt | sort"),
        ("<command>`wc -l f`</command>", "wc -l f"),
        (
            "<command>cat > s.sh <<'EOF'\n#!/bin/sh\necho \"$1\"\nEOF</command>",
            "cat > s.sh <<'EOF'\n#!/bin/sh\necho \"$1\"\nEOF",
        ),
        ("<command>echo `date` and `id`</command>", "echo `date` and `id`"),
        ("<think>maybe <command>rm -rf /</command>? no.</think><command>ls</command>", "ls"),
        ("pondering... <command>bad</command> no wait</think>\n<command>ls</command>", "ls"),
        ("<thinking>plan</thinking>\n<command>grep -c x f</command>", "grep -c x f"),
        # A server that stops at "</command>" leaves the last block unclosed.
        ("Let me check.\n<command>head -n 3 data.csv", "head -n 3 data.csv"),
        # Thinking tags inside a command are part of it.
        (
            "<command>grep -E '<think>|</think>' chat.log</command>",
            "grep -E '<think>|</think>' chat.log",
        ),
        ("<command>sed -i 's#</think>##' chat.log</command>", "sed -i 's#</think>##' chat.log"),
        (
            "<think>an XML file</think><command>echo '<reasoning>' > a.xml</command>",
            "echo '<reasoning>' > a.xml",
        ),
        ("<command>grep -c '<thinking>' chat.log", "grep -c '<thinking>' chat.log"),
        # ... but a command tag mentioned in template thinking is still thinking.
        ("I reply with a <command> tag.</think>\n<command>ls</command>", "ls"),
    ],
)
def test_commands_real_models_send_are_accepted(reply, command):
    parsed = parse_reply(reply, finish_reason="stop")
    assert parsed.kind == "command", parsed.error
    assert parsed.command == command


@pytest.mark.parametrize(
    "reply",
    [
        "<action>done</action>",
        "All files are in place.\n<action> DONE </action>",
        "<command>done</command>",
        "<think>verify? yes, verified</think><action>done</action>",
    ],
)
def test_done_in_every_accepted_form(reply):
    assert parse_reply(reply).kind == "done"


@pytest.mark.parametrize(
    ("reply", "finish", "reason"),
    [
        ("I think I should list the files.", "stop", "no <command>"),
        ("", "stop", "no <command>"),
        ("<command>ls</command>\n<command>pwd</command>", "stop", "2 <command>/<action> blocks"),
        ("<command>ls</command> then <action>done</action>", "stop", "2 <command>/<action>"),
        ("<command>   </command>", "stop", "empty"),
        ("<action>submit</action>", "stop", "unknown action 'submit'"),
        ("Long reasoning and then <command>cat very_long", "length", "token limit before its"),
        ("So much to say", "length", "token limit before any <command>"),
        ("<think>still thinking about <command>ls</command>", "length", "while still thinking"),
        ("<think>never closed", "stop", "ended inside its thinking"),
        ("<command>ls</command> <command>cat x", "stop", "2 <command>/<action> blocks"),
    ],
)
def test_unusable_replies_are_refused_with_a_reason(reply, finish, reason):
    parsed = parse_reply(reply, finish_reason=finish)
    assert parsed.kind == "invalid"
    assert reason in parsed.error


def test_the_thought_keeps_reasoning_thinking_and_prose():
    parsed = parse_reply(
        "<think>inner</think>Outer prose.\n<command>ls</command>", reasoning="server reasoning"
    )
    assert parsed.kind == "command"
    assert parsed.thought == "server reasoning\n\ninner\n\nOuter prose."


def test_a_complete_command_survives_the_token_limit():
    parsed = parse_reply("<command>ls</command> and then I would", finish_reason="length")
    assert parsed.kind == "command" and parsed.command == "ls"


def test_a_lone_surrogate_becomes_a_replacement_character():
    parsed = parse_reply("<command>echo caf\ud800 \U0001f600</command>", reasoning="hm\udcff")
    assert parsed.kind == "command" and parsed.command == "echo caf\ufffd \U0001f600"
    assert parsed.thought == "hm\ufffd"
    parsed.command.encode("utf-8")  # would raise on a surrogate
    assert clean_text("a\ud83d\ude00b") == "a\U0001f600b"  # a pair is one character


def test_a_reflection_block_is_thought_for_the_solver_as_for_the_generator():
    reply = parse_reply(
        "<reflection>try <command>rm -rf x</command></reflection><command>ls</command>"
    )
    assert reply.command == "ls" and "rm -rf x" in reply.thought
