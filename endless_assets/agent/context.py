"""Keeping a conversation inside the model's context: folding older turns into a summary.

The *transcript* is every message of the episode exactly as sent and received, never edited:
`[system, task, reply 1, observation 1, reply 2, observation 2, ...]`. The request for the next
turn is the transcript with its first `folded` turns replaced by a summary appended to the task
message (roles keep alternating, which strict chat templates require):

    fold(transcript, folded) = [system, task + summary of turns 1..folded,
                                reply folded+1, observation folded+1, ...]

The summary is a pure function of the folded messages (one line per turn: the command, its exit
code and the start of its output), so the exact request of any turn can be rebuilt from the stored
transcript and the turn's `folded_turns` (`request_for_turn`); the tests check this against what
the server received. Folding only ever grows within an episode (a stable prefix), and when it is
needed it folds at least half of the turns not yet folded, so it happens rarely.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from endless_assets.agent.replies import parse_reply

Message = dict[str, Any]
MESSAGE_OVERHEAD = 8  # characters per message for role and template tokens
SUMMARY_COMMAND_CHARS = 200
SUMMARY_OUTPUT_CHARS = 200
_EXIT = re.compile(r"\[exit code: ([^\]]+)\]\s*$")


def turns_in(transcript: Sequence[Message]) -> int:
    """Completed turns in a transcript (a reply and its observation each)."""
    return max(0, (len(transcript) - 2) // 2)


def fold(transcript: Sequence[Message], folded: int) -> list[Message]:
    """The messages to send: the transcript with its first `folded` turns summarized."""
    if folded <= 0:
        return [dict(m) for m in transcript]
    if folded > turns_in(transcript):
        raise ValueError(f"cannot fold {folded} turns of a transcript with {turns_in(transcript)}")
    system, task, *rest = transcript
    summary = summarize(rest[: 2 * folded])
    merged = {"role": task["role"], "content": f"{task['content']}\n\n{summary}"}
    return [dict(system), merged, *(dict(m) for m in rest[2 * folded :])]


def summarize(messages: Sequence[Message]) -> str:
    """One line per folded turn: what the agent ran, the exit code, the start of the output."""
    count = len(messages) // 2
    lines = [
        f"[Turns 1-{count} were folded into this summary to fit the context. Each line: the "
        "command, its exit code, and the start of its output.]"
    ]
    for i in range(count):
        reply = str(messages[2 * i].get("content") or "")
        observation = str(messages[2 * i + 1].get("content") or "")
        parsed = parse_reply(reply)
        if parsed.kind == "command":
            what = "$ " + _one_line(parsed.command, SUMMARY_COMMAND_CHARS)
        else:
            what = "(no command: the reply could not be used)"
        match = _EXIT.search(observation)
        code = match.group(1) if match else "-"
        output = observation[: match.start()] if match else observation
        head = _one_line(output, SUMMARY_OUTPUT_CHARS) or "(no output)"
        lines.append(f"{i + 1}. {what} -> exit {code}: {head}")
    return "\n".join(lines)


def request_for_turn(
    transcript: Sequence[Message], trajectory: Sequence[dict[str, Any]], index: int
) -> list[Message]:
    """Rebuild the exact messages sent for turn `index` from a stored rollout."""
    folded = int(trajectory[index].get("folded_turns", 0) or 0)
    return fold(transcript[: 2 + 2 * index], folded)


def _one_line(text: str, limit: int) -> str:
    flat = " ⏎ ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class TokenEstimator:
    """Characters per token, calibrated on the prompt sizes the server reports."""

    chars_per_token: float = 3.0  # conservative until the first reply reports usage

    def chars(self, messages: Sequence[Message]) -> int:
        return sum(len(str(m.get("content") or "")) + MESSAGE_OVERHEAD for m in messages)

    def tokens(self, messages: Sequence[Message]) -> int:
        return math.ceil(self.chars(messages) / self.chars_per_token)

    def calibrate(self, messages: Sequence[Message], prompt_tokens: int) -> None:
        if prompt_tokens > 0:
            self.chars_per_token = min(6.0, max(1.5, self.chars(messages) / prompt_tokens))

    def distrust(self) -> None:
        """The server said the prompt was too long: assume denser text from now on."""
        self.chars_per_token = max(1.0, self.chars_per_token * 0.75)


def choose_fold(
    transcript: Sequence[Message], folded: int, budget: int, estimator: TokenEstimator
) -> int | None:
    """How many turns to fold so the request fits `budget` tokens; None if nothing fits."""
    if estimator.tokens(fold(transcript, folded)) <= budget:
        return folded
    total = turns_in(transcript)
    at_least = folded + max(1, math.ceil((total - folded) / 2))
    for candidate in range(min(at_least, total), total + 1):
        if candidate > folded and estimator.tokens(fold(transcript, candidate)) <= budget:
            return candidate
    return None
