"""Reading a chat model's reply: its thought, then one `<command>` or `<action>done</action>`.

What is accepted (all of it tested in tests/fast/agent/test_chat_replies.py):
- Thinking, either in the server's separate reasoning field, in `<think>…</think>` (also
  `<thinking>`, `<reasoning>`), after a bare `</think>` whose opening tag was in the chat
  template, or as plain prose around the tag. Tags inside thinking are ignored, and thinking
  tags inside a `<command>`/`<action>` block are part of the command (`grep '<think>' log`).
- Any text: lone surrogates (a JSON reply may carry "\ud800") become U+FFFD (`clean_text`), so
  what is parsed, run and stored is always valid Unicode.
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
from typing import TYPE_CHECKING, Literal

from endless_assets.agent.policies import Action
from endless_assets.generation.parsing import REASONING_TAGS

if TYPE_CHECKING:
    from endless_assets.llm.client import ChatReply

ReplyKind = Literal["command", "done", "invalid"]

_THINK_OPEN = re.compile(r"<(" + "|".join(REASONING_TAGS) + r")\b[^>]*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(" + "|".join(REASONING_TAGS) + r")\s*>", re.IGNORECASE)
_BLOCK = re.compile(r"<(command|action)\b[^>]*>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)
_BLOCK_OPEN = re.compile(r"<(command|action)\b[^>]*>", re.IGNORECASE)
_OPEN_COMMAND = re.compile(r"<command\b[^>]*>", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)
FORMAT_HINT = "Reply with exactly one <command>...</command>, or <action>done</action>"


@dataclass(frozen=True)
class ParsedReply:
    kind: ReplyKind
    command: str = ""
    thought: str = ""
    error: str = ""


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (pairs are joined): encodable as
    UTF-8, so it can be sent to the shell and stored in Parquet."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def reply_action(reply: ChatReply, folded_turns: int = 0) -> Action:
    """A chat reply as the agent's next action (`raw` is the reply's text, cleaned so that it
    can be run and stored)."""
    text = clean_text(reply.text)
    parsed = parse_reply(text, reasoning=reply.reasoning, finish_reason=reply.finish_reason)
    return Action(
        parsed.kind,
        command=parsed.command,
        thought=parsed.thought,
        raw=text,
        error=parsed.error,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
        seconds=reply.seconds,
        folded_turns=folded_turns,
        finish_reason=reply.finish_reason,
    )


def parse_reply(text: str, *, reasoning: str = "", finish_reason: str = "") -> ParsedReply:
    """Parse one reply. `finish_reason` is the server's ("stop", "length", ...)."""
    text, reasoning = clean_text(text or ""), clean_text(reasoning or "")
    thoughts = [reasoning.strip()] if reasoning.strip() else []
    body, thinking, unfinished = _split_thinking(text)
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

    def invalid(error: str) -> ParsedReply:
        return ParsedReply("invalid", thought=thought, error=error)

    if tail_command is not None and cut_off:
        return invalid(
            "the reply hit the token limit before its </command> (keep commands and thinking "
            "shorter)"
        )
    count = len(blocks) + (tail_command is not None)
    if count > 1:
        return invalid(f"the reply has {count} <command>/<action> blocks; send exactly one")
    if tail_command is not None:
        return _command(tail_command, thought)
    if not blocks:
        if cut_off:
            return invalid(
                "the reply hit the token limit before any <command> (keep thinking shorter)"
            )
        return invalid("the reply has no <command>...</command> and no <action>done</action>")
    tag, content = blocks[0].group(1).lower(), blocks[0].group(2)
    if tag == "action" and content.strip().lower() != "done":
        return invalid(f"unknown action {content.strip()[:80]!r}; the only action is done")
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
    """(text outside thinking, closed thinking blocks, unfinished thinking or "").

    Read left to right: whichever opens first, a thinking tag or a `<command>`/`<action>` block,
    runs to its own closing tag, and tags of the other kind inside it are its content."""
    thinking: list[str] = []
    close = _THINK_CLOSE.search(text)
    opening = _THINK_OPEN.search(text)
    if (
        close
        and (opening is None or opening.start() > close.start())
        and not _inside_block(text, close.start())
    ):
        # The opening tag was part of the chat template: everything before `</think>` is thought.
        thinking.append(text[: close.start()].strip())
        text = text[close.end() :]

    body: list[str] = []
    pos = 0
    while opening := _THINK_OPEN.search(text, pos):
        block = _BLOCK_OPEN.search(text, pos, opening.start())
        if block:  # a command block comes first: a thinking tag inside it is part of it
            end = _closing(block.group(1)).search(text, block.end())
            if end is None:  # an unclosed last command: the rest of the reply
                break
            body.append(text[pos : end.end()])
            pos = end.end()
            continue
        end = _closing(opening.group(1)).search(text, opening.end())
        body.append(text[pos : opening.start()])
        if end is None:
            return "".join(body), thinking, text[opening.end() :].strip()
        thinking.append(text[opening.end() : end.start()].strip())
        body.append(" ")
        pos = end.end()
    body.append(text[pos:])
    return "".join(body), thinking, ""


def _closing(tag: str) -> re.Pattern[str]:
    return re.compile(rf"</{tag}\s*>", re.IGNORECASE)


def _inside_block(text: str, at: int) -> bool:
    """Whether position `at` lies inside a well-formed `<command>`/`<action>` block: the last
    block opened before it is closed after it, with no other block opening in between."""
    opens = list(_BLOCK_OPEN.finditer(text, 0, at))
    if not opens:
        return False
    close = _closing(opens[-1].group(1))
    if close.search(text, opens[-1].end(), at):
        return False
    end = close.search(text, at)
    return end is not None and not _BLOCK_OPEN.search(text, at, end.start())


def _join(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p)
