"""Sandbox engine commands: make the base image available, sweep containers, prune images; and
the run's check that every engine of the pool answers and accepts the run's limits."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.markup import escape

from endless_assets.cli.app import _fail, app, err, out, resolved_settings


def _sandbox(settings: Any):
    """The sandbox over the settings' engines. An engine of a pool that does not answer: one
    warning line; none answering (or an engine URL this machine cannot use): one error line,
    exit 2 (the fix is in the settings or the engine, named in the line)."""
    from endless_assets.sandbox.engine.client import SandboxError
    from endless_assets.sandbox.sandbox import Sandbox
    from endless_assets.settings import SettingsError

    try:
        config = settings.sandbox_config()  # the pipeline's resource builds the same one
        with _pool_warnings_on_stderr():
            return Sandbox(config)
    except (SandboxError, SettingsError) as exc:
        _fail(str(exc))


class _WarningLine(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        message = escape(record.getMessage())
        err.print(f"[yellow]warning:[/] {message}", soft_wrap=True, highlight=False)


@contextmanager
def _pool_warnings_on_stderr() -> Iterator[None]:
    """The engine pool's warnings at set-up (an engine left out), as this CLI's warning lines,
    each once (not also through the logging's own last-resort output)."""
    from endless_assets.sandbox.engine import engines

    logger = logging.getLogger(engines.__name__)
    handler, propagate = _WarningLine(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def check_engines(settings: Any) -> None:
    """Every engine answers (a pool goes on without one that does not, with one warning), and
    accepts a container with the run's limits (a disk budget it cannot enforce, more CPUs than
    a remote engine has would make every container fail)."""
    from endless_assets.sandbox.containers.container import task_container
    from endless_assets.sandbox.engine.client import SandboxError
    from endless_assets.sandbox.image.base_image import base_image_tag

    sandbox = _sandbox(settings)
    for engine in sandbox.pool.engines:
        if engine not in sandbox.pool.up:
            err.print(f"[yellow]warning:[/] sandbox engine {engine.name} is down: not used")
    tag = base_image_tag()
    holding = [e for e in sandbox.pool.up if e.has_image(tag)]
    if not holding:
        err.print(
            f"the base image {tag} is not built yet: the run builds it first "
            "(about a minute; `endless setup` does it alone)"
        )
        return
    for engine in holding:
        try:
            with task_container(
                engine.client, tag, limits=sandbox.config.limits, labels={"role": "check"}
            ):
                pass
        except SandboxError as exc:
            where = f" (engine {engine.name})" if len(sandbox.pool.engines) > 1 else ""
            _fail(f"{exc}{where}", code=2 if "disk" in str(exc) else 1)


@app.command()
def setup() -> None:
    """Build the base image if this recipe has not been built, and copy it to every engine of
    the pool (`docker_hosts`) that lacks it. One process at a time builds it on an engine (the
    engine's lock): another one waits, saying whom for, then uses what it built."""
    from endless_assets.sandbox.engine.client import SandboxError
    from endless_assets.sandbox.image.base_image import ensure_base_image

    sandbox = _sandbox(resolved_settings())
    try:
        first = sandbox.pool.up[0]
        image = ensure_base_image(first.client, progress=lambda m: err.print(m))
        names = sandbox.ensure_base()
    except SandboxError as exc:
        _fail(str(exc), code=1)
    state = "built" if image.built else "present"
    out.print(f"base image {image.tag} {state}; on engine(s): {', '.join(names)}")


def _all_option(help: str) -> Any:
    return Annotated[bool, typer.Option("--all", help=help)]


def _on_every_engine(work: Callable[[Any], Any], settings: Any = None) -> list[Any]:
    """`work(client)` on every engine of the pool that answers."""
    return [work(engine.client) for engine in _sandbox(settings or resolved_settings()).pool.up]


@app.command()
def sweep(all_containers: _all_option("also containers of live processes") = False) -> None:
    """Remove leftover task containers (those whose creating process is gone; services too)
    and episode networks, on every engine, and release the disk budgets mounted for them;
    remove the engine locks of dead processes; mark the runs whose process is gone failed and
    free their Dagster pool slots."""
    from endless_assets.cli.runs import reap_dead_runs
    from endless_assets.sandbox.engine import leftovers

    # (the sandbox swept once already as it started: counted in the totals)
    _on_every_engine(lambda client: leftovers.sweep(client, everything=all_containers))
    done = leftovers.totals()
    loops = f", detached {done.loops} loop device(s)" if done.loops else ""
    locks = f", removed {done.locks} engine lock(s) of dead processes" if done.locks else ""
    locks += f", removed {done.networks} episode network(s)" if done.networks else ""
    runs = reap_dead_runs()
    failed = f", marked {runs} run(s) whose process is gone failed" if runs else ""
    out.print(
        f"removed {done.containers} container(s), released {done.mounts} disk budget(s)"
        f"{loops}{locks}{failed}"
    )
    for line in done.left:
        err.print(f"[yellow]warning:[/] the engine kept {escape(line)}; the next sweep tries again")


@app.command()
def prune(everything: _all_option("also the images of kept tasks") = False) -> None:
    """Remove cached task images (rebuilt from their Dockerfiles when needed again), on every
    engine."""
    from endless_assets.cli.app import lake
    from endless_assets.sandbox.image.images import prune_task_images
    from endless_assets.store.catalog import query

    settings = resolved_settings()
    keep: set[str] = set()
    if not everything:
        kept = query(lake(settings), "select distinct image_tag from filtered_dataset where kept")
        keep = set(kept["image_tag"].to_list())
    removed = sum(_on_every_engine(lambda client: prune_task_images(client, keep), settings))
    out.print(f"removed {removed} cached task image(s); kept {len(keep)} of kept tasks")
