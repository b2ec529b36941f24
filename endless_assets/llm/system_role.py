"""Chat templates that refuse the system role, and what to send them instead.

Some chat templates (Gemma's, older Mistral ones) raise on a `system` message. The server answers
that with a 400 naming the template's complaint (vLLM, llama.cpp) or, where the exception is not
caught (transformers serve), a bare 500 "Internal Server Error" that looks transient. So an error
that may be that one (`may_be_refusal`: it speaks of the system role or the template, or says
nothing at all) on a request with a system message is checked once per endpoint with two
one-token probes: the same shape with and without a system message. If only the one without it
is answered, the template refuses the system role, and from then on every request to that
endpoint carries the system text at the top of its first user message.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Messages = list[dict[str, Any]]
PROBE_SYSTEM: Messages = [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "Hello."},
]
PROBE_USER: Messages = [{"role": "user", "content": "Hello."}]
FOLDED = "folded into the first user message"
_WORDING = ("system", "template", "role")
_BARE = ("", "internal server error", "bad request", "unprocessable entity")


def may_be_refusal(status: int | None, message: str) -> bool:
    """Whether an error could be a template refusing the system role (then worth a probe)."""
    text = message.strip().lower()
    if status in (400, 422):
        return any(word in text for word in _WORDING)
    return status == 500 and (text in _BARE or any(word in text for word in _WORDING))


def has_system(messages: Messages) -> bool:
    return any(m.get("role") == "system" for m in messages)


def fold_system(messages: Messages) -> Messages:
    """The system messages' text put before the first user message's (roles keep alternating)."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    for message in rest:
        if message.get("role") == "user":
            message["content"] = f"{system}\n\n{message.get('content') or ''}"
            return rest
    return [{"role": "user", "content": system}, *rest]


class SystemRole:
    """Whether one endpoint's template takes a system message: None until an error asks."""

    def __init__(self) -> None:
        self.accepted: bool | None = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        if self.accepted is None:
            return "sent as a system message (never questioned)"
        return "sent as a system message" if self.accepted else FOLDED

    def prepare(self, messages: Messages) -> Messages:
        if self.accepted is False and has_system(messages):
            return fold_system(messages)
        return messages

    def check(self, probe: Callable[[Messages], bool]) -> bool:
        """Whether the system role is refused, asked once (`probe(messages)` says whether a
        one-token request with those messages was answered). Undecided (both probes failed, the
        server is in trouble) counts as accepted and is asked again next time."""
        with self._lock:
            if self.accepted is None:
                if probe(PROBE_SYSTEM):
                    self.accepted = True
                elif probe(PROBE_USER):
                    self.accepted = False
            return self.accepted is False


_roles: dict[tuple[str, str], SystemRole] = {}
_roles_guard = threading.Lock()


def system_role_for(base_url: str, model: str) -> SystemRole:
    key = (base_url, model)
    with _roles_guard:
        return _roles.setdefault(key, SystemRole())
