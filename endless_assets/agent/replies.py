"""Reading a chat model's reply: its thought, then one `<command>` or `<action>done</action>`.

What is accepted (all of it tested in tests/test_chat_replies.py):
- Thinking, either in the server's separate reasoning field, in `<think>…</think>` (also
  `<thinking>`, `<reasoning>`), after a bare `</think>` whose opening tag was in the chat
  template, or as plain prose around the tag. Tags inside thinking are ignored.
- `<command>…</command>`: tag names are case-insensitive and may carry attributes; the command may
  be wrapped in a Markdown code fence or in single backticks, which are removed. Multi-line
  commands are kept as they are.
- `<action>done</action>` or `<command>done</command>`: the episode ends.
- An unclosed last `<command>` when the server stopped normally (servers that use `</command>`
  as a stop sequence cut it off): the rest of the reply is the command.

Everything else is invalid, with a reason the agent is shown: no block, more than one block, an
empty command, an unknown action, a reply cut off by the token limit before its command closed,
thinking that never ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ReplyKind = Literal["command", "done", "invalid"]

_THINK = re.compile(r"<(think|thinking|reasoning)\b[^>]*>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)\b[^>]*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)\s*>", re.IGNORECASE)
_BLOCK = re.compile(r"<(command|action)\b[^>]*>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)
_OPEN_COMMAND = re.compile(r"<command\b[^>]*>", re.IGNORECASE)
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)
FORMAT_HINT = "Reply with exactly one <command>...</command>, or <action>done</action>"


@dataclass(frozen=True)
class ParsedReply:
    kind: ReplyKind
    command: str = ""
    thought: str = ""
    error: str = ""


def parse_reply(text: str, *, reasoning: str = "", finish_reason: str = "") -> ParsedReply:
    """Parse one reply. `finish_reason` is the server's ("stop", "length", ...)."""
    thoughts = [reasoning.strip()] if reasoning.strip() else []
    body, thinking, unfinished = _split_thinking(text or "")
    thoughts += thinking
    cut_off = finish_reason == "length"
    if unfinished:
        thoughts.append(unfinished)
        reason = "the reply ended inside its thinking, before any command"
        if cut_off:
            reason = "the reply hit the token limit while still thinking, before any command"
        return ParsedReply("invalid", thought=_join(thoughts), error=reason)

    blocks = list(_BLOCK.finditer(body))
    opened = _OPEN_COMMAND.search(body, blocks[-1].end() if blocks else 0)
    tail_command = body[opened.end() :] if opened else None
    prose = _BLOCK.sub(" ", body[: opened.start()] if opened else body)
    thought = _join([*thoughts, prose.strip()])

    if tail_command is not None:
        if cut_off:
            return ParsedReply(
                "invalid",
                thought=thought,
                error="the reply hit the token limit before its </command> (keep commands "
                "and thinking shorter)",
            )
        if blocks:
            return ParsedReply(
                "invalid",
                thought=thought,
                error=f"the reply has {len(blocks) + 1} <command>/<action> blocks; send exactly "
                "one",
            )
        return _command(tail_command, thought)

    if not blocks:
        error = "the reply has no <command>...</command> and no <action>done</action>"
        if cut_off:
            error = "the reply hit the token limit before any <command> (keep thinking shorter)"
        return ParsedReply("invalid", thought=thought, error=error)
    if len(blocks) > 1:
        return ParsedReply(
            "invalid",
            thought=thought,
            error=f"the reply has {len(blocks)} <command>/<action> blocks; send exactly one",
        )
    tag, content = blocks[0].group(1).lower(), blocks[0].group(2)
    if tag == "action":
        if content.strip().lower() == "done":
            return ParsedReply("done", thought=thought)
        return ParsedReply(
            "invalid",
            thought=thought,
            error=f"unknown action {content.strip()[:80]!r}; the only action is done",
        )
    return _command(content, thought)


def _command(content: str, thought: str) -> ParsedReply:
    command = _unwrap(content)
    if command.strip().lower() == "done":
        return ParsedReply("done", thought=thought)
    if not command.strip():
        return ParsedReply("invalid", thought=thought, error="the <command> block is empty")
    return ParsedReply("command", command=command, thought=thought)


def _unwrap(content: str) -> str:
    """Remove a Markdown fence or single backticks around the whole command; keep the rest."""
    text = content.strip("\n").strip()
    fenced = _FENCE.match(text)
    if fenced:
        return fenced.group(1).strip("\n")
    if len(text) >= 2 and text[0] == text[-1] == "`" and "`" not in text[1:-1]:
        return text[1:-1].strip()
    return text


def _split_thinking(text: str) -> tuple[str, list[str], str]:
    """(text outside thinking, closed thinking blocks, unfinished thinking or "")."""
    thinking: list[str] = []
    close = _THINK_CLOSE.search(text)
    opening = _THINK_OPEN.search(text)
    if close and (opening is None or opening.start() > close.start()):
        # The opening tag was part of the chat template: everything before `</think>` is thought.
        thinking.append(text[: close.start()].strip())
        text = text[close.end() :]

    def keep(match: re.Match[str]) -> str:
        thinking.append(match.group(2).strip())
        return " "

    text = _THINK.sub(keep, text)
    opening = _THINK_OPEN.search(text)
    if opening:
        return text[: opening.start()], thinking, text[opening.end() :].strip()
    return text, thinking, ""


def _join(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)
