"""What an endpoint said when it refused: the message of its error body, whatever its shape.

OpenAI-compatible servers disagree on the shape of an error body:

    {"error": {"message": "...", "type": ...}}   OpenAI, vLLM, llama.cpp
    {"error": "..."}                             Ollama, transformers serve (503)
    {"detail": "..."} or {"detail": [{"msg"}]}   FastAPI apps (transformers serve, many proxies)
    {"message": "..."}                           others
    Internal Server Error                        plain text (an uncaught exception)

The `openai` SDK keeps only the first shape in its exception text ("Error code: 400"), so a
context-length refusal or a bad model name from the others reaches the rows as a bare status.
`server_message` reads the body whatever its shape; `describe` is what rows and logs store.
"""

from __future__ import annotations

import json
from typing import Any

import openai

MESSAGE_KEYS = ("message", "detail", "error", "msg", "errors", "reason")
LIMIT = 500
# Statuses meaning the server is saturated (as opposed to broken or refusing this request).
OVERLOADED = (429, 503, 529)


def server_message(exc: BaseException) -> str:
    """The server's own words from an API error's body ("" if there are none)."""
    if not isinstance(exc, openai.APIStatusError):
        return ""
    try:
        text = exc.response.text
    except Exception:  # a streamed body that was closed unread
        text = ""
    text = (text or "").strip()
    if not text:
        return _message_in(exc.body)
    try:
        body = json.loads(text)
    except ValueError:
        return _clip(" ".join(text.split()))
    return _message_in(body) or _clip(text)


def _message_in(value: Any, depth: int = 0) -> str:
    if depth > 4 or value is None:
        return ""
    if isinstance(value, str):
        return _clip(value.strip())
    if isinstance(value, list):
        parts = [_message_in(item, depth + 1) for item in value]
        return _clip("; ".join(p for p in parts if p))
    if isinstance(value, dict):
        for key in MESSAGE_KEYS:
            if key in value:
                found = _message_in(value[key], depth + 1)
                if found:
                    return found
        return ""
    return _clip(str(value))


def _clip(text: str) -> str:
    return text if len(text) <= LIMIT else text[: LIMIT - 3] + "..."


def status_of(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def describe(exc: BaseException | None) -> str:
    """One line for rows and logs: the error's kind, its status and the server's message."""
    if exc is None:
        return "unknown error"
    status = status_of(exc)
    if status is not None:
        message = server_message(exc)
        text = f"{type(exc).__name__}: HTTP {status}" + (f": {message}" if message else "")
    else:
        text = f"{type(exc).__name__}: {exc}"
    return _clip(" ".join(text.split()))


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, openai.APITimeoutError)


def is_overload(exc: BaseException) -> bool:
    """The server said it is saturated, or could not be reached at all."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in OVERLOADED
    return isinstance(exc, openai.APIConnectionError) and not is_timeout(exc)


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 425, 429) or exc.status_code >= 500
    return False


def is_refusal(exc: BaseException) -> bool:
    """The server refused this request as such (too long, a bad parameter): retrying the same
    request cannot help, and the reason is about the request, not the endpoint."""
    return isinstance(exc, openai.APIStatusError) and exc.status_code in (400, 413, 422)
