"""How every stage runs its items (no Dagster here): on a bounded thread pool, each item tried
again after an engine failure (`ENGINE_RETRIES`, after the engines that stopped answering are
drained: sandbox/engine/retry.py), finished rows journaled so a rerun resumes."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

from endless_assets.generation import TaskGenerator
from endless_assets.models import HARNESS_ERROR
from endless_assets.sandbox.engine.retry import with_engine_retries
from endless_assets.settings import Settings
from endless_assets.store.journal import Journal, Resumable, fingerprint

T = TypeVar("T")
R = TypeVar("R")

ENGINE_RETRIES = 2  # tries again of one task's work that a sandbox engine broke


def now() -> datetime:
    """When a row was made (its `created_at`)."""
    return datetime.now(UTC)


class Log(Protocol):
    """Where progress goes: a `logging.Logger`, or a Dagster context's `log`."""

    def info(self, msg: str) -> object: ...
    def warning(self, msg: str) -> object: ...
    def error(self, msg: str) -> object: ...


def run_parallel(
    items: Sequence[T],
    work: Callable[[T], R],
    on_error: Callable[[T, BaseException], R],
    *,
    log: Log,
    workers: int,
    label: str,
    engine_retries: int = ENGINE_RETRIES,
    recover: Callable[[], list[str]] | None = None,
) -> list[R]:
    """Run `work` over items on a bounded thread pool, logging progress; keeps input order.

    An item a sandbox engine broke (SandboxError) is tried again, at most `engine_retries` times,
    after `recover` drained the engines that stopped answering. Any other exception becomes the
    item's error row (`on_error`): one bad task never loses the batch."""

    def retried(exc: BaseException, drained: Sequence[str]) -> None:
        where = f"; drained engine(s) {', '.join(drained)}" if drained else ""
        log.warning(f"{label}: retrying after an engine failure{where}: {exc}")

    def attempt(item: T) -> R:
        return with_engine_retries(
            lambda: work(item), retries=engine_retries, recover=recover, note=retried
        )

    results: list[R | None] = [None] * len(items)
    if not items:
        return []
    started = time.monotonic()
    step = max(1, len(items) // 10)
    done = 0
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=label)
    try:
        futures = {pool.submit(attempt, item): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            i = futures[future]
            try:
                results[i] = future.result()
            except Exception as exc:
                log.error(f"{label}: item {i} failed: {''.join(traceback.format_exception(exc))}")
                results[i] = on_error(items[i], exc)
            done += 1
            if done % step == 0 or done == len(items):
                elapsed = time.monotonic() - started
                log.info(f"{label}: {done}/{len(items)} done in {elapsed:.1f} s")
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): the items not started never start
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [r for r in results if r is not None]


def resumable(
    data_dir: Path,
    settings: Settings,
    table: str,
    batch: str,
    generator: TaskGenerator,
    *,
    key: str = "task_id",
    made_from: object = None,
) -> Resumable:
    """The journal of the describe to validation stages (store/journal.py): each finished row,
    keyed by `key`, is reused by a rerun under the same settings (`Settings.made()`: not where or
    how fast the work runs) and the same `made_from` (the describe stage's draw)."""
    parts: tuple = (settings.made(), generator.name, generator.model, generator.version)
    scope = fingerprint(*parts, *([made_from] if made_from is not None else []))
    return Resumable(
        Journal(data_dir, table, batch, scope),
        item_key=lambda item: str(item if key == "index" else item.task_id),
        row_key=lambda row: str(row[key]),
        finished=lambda row: row["status"] != HARNESS_ERROR,
    )
