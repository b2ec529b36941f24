"""Repair feedback made stable: the same failure reads the same on every run."""

from __future__ import annotations

import re

# Parts of build logs and pytest output that change from run to run without meaning anything:
# fed back verbatim they would make every repair prompt new, and the reply cache useless.
_VOLATILE = (
    (
        re.compile(
            r"(---> (?:Running in )?|intermediate container |Successfully built )[0-9a-f]{12}"
        ),
        r"\1<id>",
    ),
    (re.compile(r"/verifier/run-[0-9a-f]+/"), "/verifier/run-<id>/"),
    (re.compile(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?"), "in <time>"),
)


def stable_feedback(text: str) -> str:
    """Feedback with container ids, temporary paths and timings masked."""
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text
