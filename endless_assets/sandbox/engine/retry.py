"""Work a sandbox engine broke, tried again a bounded number of times (no Dagster here): after an
engine failure `recover` drains the engines that stopped answering and the work runs again, at
most `retries` more times. Not retried: a container its own image stopped (`ContainerExited`),
and a failure already retried where it happened (`RetriesExhausted`) unless an engine was
drained."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from endless_assets.sandbox.containers.startup import ContainerExited
from endless_assets.sandbox.engine.client import RetriesExhausted, SandboxError

T = TypeVar("T")


def with_engine_retries(
    call: Callable[[], T],
    *,
    retries: int,
    recover: Callable[[], Sequence[str] | None] | None = None,
    note: Callable[[BaseException, Sequence[str]], None] | None = None,
    errors: tuple[type[BaseException], ...] = (SandboxError,),
) -> T:
    """`call()`, tried again after an engine failure; `note(error, drained engines)` is told of
    each retry before it runs."""
    retries = max(0, retries)
    for n in range(retries + 1):
        try:
            return call()
        except ContainerExited:
            raise
        except errors as exc:
            if n == retries:
                raise
            drained = list((recover() if recover is not None else None) or [])
            if isinstance(exc, RetriesExhausted) and not drained:
                raise
            if note is not None:
                note(exc, drained)
    raise AssertionError("unreachable")
