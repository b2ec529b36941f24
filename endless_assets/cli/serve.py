"""`endless serve`: the kept tasks as an OpenEnv environment for RL trainers (docs/serving.md)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from endless_assets.cli.app import _fail, app, err, failing, lake, resolved_settings


@app.command()
def serve(
    where: Annotated[
        str,
        typer.Option(
            help="SQL condition over filtered_dataset's kept rows (plus `difficulty` and "
            "`learnable`), e.g. \"category = 'log analysis' and pass_rate < 0.5\""
        ),
    ] = "",
    batch: Annotated[list[str] | None, typer.Option("--batch", "-b", help="repeatable")] = None,
    category: Annotated[list[str] | None, typer.Option(help="repeatable")] = None,
    difficulty: Annotated[
        list[str] | None, typer.Option(help="easy | medium | hard | unsolved (repeatable)")
    ] = None,
    learnable: Annotated[
        bool, typer.Option(help="only tasks some but not all scored attempts solved")
    ] = False,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on (0: any free port)")] = 8000,
    max_sessions: Annotated[
        int, typer.Option(help="environment sessions at once (each holds one container)")
    ] = 32,
    idle_seconds: Annotated[
        float,
        typer.Option(
            help="an episode whose session made no call for this long is abandoned, its "
            "container removed (the session stays)"
        ),
    ] = 600.0,
    seed: Annotated[int, typer.Option(help="seed of the sampler of resets without a task")] = 0,
    max_turns: Annotated[int | None, typer.Option(help="actions per episode")] = None,
    command_timeout: Annotated[float | None, typer.Option(help="seconds per command")] = None,
    episode_seconds: Annotated[float | None, typer.Option(help="seconds per episode")] = None,
) -> None:
    """Serve kept tasks as an OpenEnv environment (WebSocket /ws, HTTP, /schema).

    reset starts a task's container and returns its instruction; step runs one shell command;
    {"done": true}, the step budget or the time budget grades and returns the reward. An
    infrastructure failure is `infra_error`, never a reward. Every episode lands in the lake's
    served_episodes table. Stops on Ctrl-C or SIGTERM, removing every container."""
    from endless_assets.cli.engines import _sandbox
    from endless_assets.serve.app import listen
    from endless_assets.serve.app import serve as run_server
    from endless_assets.serve.hub import Hub
    from endless_assets.serve.record import EpisodeLog
    from endless_assets.serve.tasks import SelectionError, TaskSet, select_tasks, selection_filter

    if not 0 <= port <= 65535:
        _fail(f"--port must be 0-65535, got {port}")
    if max_sessions < 1:
        _fail(f"--max-sessions must be at least 1, got {max_sessions}")
    if not idle_seconds > 0:
        _fail(f"--idle-seconds must be more than 0, got {idle_seconds}")
    settings = resolved_settings(
        max_turns=max_turns, command_timeout=command_timeout, episode_seconds=episode_seconds
    )
    data = lake(settings)
    condition = selection_filter(where, batch, category, difficulty, learnable)
    with failing(SelectionError):
        tasks = TaskSet(select_tasks(data, condition), seed=seed)
    try:
        sock = listen(host, port)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sandbox = _sandbox(settings)  # (after a kill -9, this start removes what that server left)
    limits = settings.solver.limits()
    hub = Hub(sandbox, tasks, limits, max_sessions=max_sessions, episodes=EpisodeLog(data))
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host

    def ready() -> None:
        # One line on stdout, flushed: scripts wait for it (it carries the port when --port 0).
        sys.stdout.write(
            f"serving {len(tasks)} task(s) at http://{shown}:{bound_port} "
            f"(OpenEnv: ws://{shown}:{bound_port}/ws), at most {max_sessions} session(s)\n"
        )
        sys.stdout.flush()

    def stopped() -> None:
        err.print(f"endless serve stopped: {hub.summary()}, in {data.root / 'served_episodes'}")

    try:
        run_server(hub, sock, idle_seconds=idle_seconds, ready=ready, stopped=stopped)
    except KeyboardInterrupt:  # (uvicorn raises the SIGINT it handled once it has stopped)
        raise typer.Exit(0) from None
