"""The server: OpenEnv's own FastAPI app (`create_fastapi_app`: /ws sessions for EnvClient,
/reset /step /state over HTTP, /schema, /metadata, /health, the task API) around the served
environment, run by uvicorn.

OpenEnv's server gives each WebSocket session its own environment and thread, refuses sessions
past `max_sessions` (CAPACITY_REACHED) and closes a session's environment when its client
disconnects. Idleness is the hub's to handle, not OpenEnv's reaper (which would close a session
whose client is alive but busy, a trainer generating, and leave that client a dead session): an
episode idle for longer than `idle_seconds` is abandoned, its session stays. A request the
environment refuses (serve/errors.py) is a 4xx naming what is wrong over HTTP.

At stop (SIGINT, SIGTERM) every live session's episode is abandoned, its container removed, and
the episode log written; after a `kill -9`, the containers carry this process's owner label, so
`endless sweep` or the next start's sandbox removes them.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig

from endless_assets.serve.environment import ENV_NAME, NoEpisode, TerminalEnvironment
from endless_assets.serve.errors import RequestError
from endless_assets.serve.hub import Hub
from endless_assets.serve.models import TerminalAction, TerminalObservation, TerminalState


def build_app(
    hub: Hub, *, idle_seconds: float | None = None, stopped: Callable[[], None] = lambda: None
) -> FastAPI:
    """OpenEnv's app over `hub`; at shutdown every session is stopped, then `stopped` runs."""
    app = create_fastapi_app(
        functools.partial(TerminalEnvironment, hub),
        TerminalAction,
        TerminalObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=hub.max_sessions),
        env_name=ENV_NAME,
        state_cls=TerminalState,
        mode="simulation",
    )

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        detail = str(exc)
        if isinstance(exc, NoEpisode) and request.url.path == "/step":
            detail += (
                " (OpenEnv's HTTP /reset and /step make an environment per request: run episodes "
                "over the WebSocket, /ws)"
            )
        status = exc.status if isinstance(exc, RequestError) else 400
        return JSONResponse({"detail": detail}, status_code=status)

    app.add_exception_handler(RequestError, refused)

    async def start_reaper() -> None:
        if idle_seconds is not None:
            hub.start_reaper(idle_seconds)

    async def stop_sessions() -> None:
        await asyncio.to_thread(hub.close)
        stopped()

    app.router.on_startup.append(start_reaper)
    app.router.on_shutdown.append(stop_sessions)
    return app


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound now (port 0: any free port); OSError if it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=2048)


def serve(
    hub: Hub,
    sock: socket.socket,
    *,
    idle_seconds: float | None = None,
    ready: Callable[[], None] = lambda: None,
    stopped: Callable[[], None] = lambda: None,
) -> None:
    """Serve until SIGINT or SIGTERM, then stop every session (`hub.close`) and call `stopped`.
    uvicorn raises the signal again once stopped: KeyboardInterrupt for SIGINT, and the end of
    the process for SIGTERM."""
    config = uvicorn.Config(
        build_app(hub, idle_seconds=idle_seconds, stopped=stopped),
        log_level="warning",
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_graceful_shutdown=30,
    )
    server = uvicorn.Server(config)
    ready()  # the socket accepts connections already; they are served once the loop runs
    try:
        server.run(sockets=[sock])
    finally:
        hub.close()  # (a no-op when the app's shutdown did it)
