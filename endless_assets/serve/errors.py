"""What the server refuses, each with the HTTP status it is answered with: one line naming what is
wrong. Over HTTP the app answers `{"detail": line}` with that status (app.py), never a bare 500;
over the WebSocket, OpenEnv's server sends the same line as its EXECUTION_ERROR.
"""

from __future__ import annotations


class RequestError(Exception):
    """A request the server refuses; `status` is its HTTP status."""

    status = 400


class BadRequest(RequestError, ValueError):
    """The request names something the server does not have (a task, an index, a split) or gives
    a value of the wrong type."""

    status = 400


class NotNow(RequestError, RuntimeError):
    """The request does not fit the session's episode (no episode yet, or it is over)."""

    status = 409


class Unavailable(RequestError, RuntimeError):
    """The server cannot take the request now (every session place is taken, it is stopping)."""

    status = 503
