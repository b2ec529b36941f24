"""What a stage costs the machine, measured while it runs (the containers its sandbox started, the
engine's CPU), and the settings a batch's cost depends on (store/costs.py's Profile)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from endless_assets.agent.policies import NoopPolicy, OraclePolicy
from endless_assets.sandbox.engine.usage import engine_cpu_seconds
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.store.costs import Profile


class StageMeter:
    """Started with a stage: `metadata()` is what it used since (the step's metadata keys
    `containers_started`, `engine_cpu_seconds`, left out for a remote engine, and
    `items_wall_seconds`, the wall time of the stage's work on its items, inside `items()`: the
    rest of the step's wall time does not grow with the batch; `units_made`, the items worked
    on, not taken from a journal)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.urls = [spec.url for spec in sandbox.config.engine_specs]
        self._containers = sandbox.containers_started
        self._cpu = engine_cpu_seconds(self.urls)
        self.items_seconds = 0.0
        self._made: set[str] = set()
        self._lock = threading.Lock()

    def made(self, key: str) -> None:
        """A unit the stage made (rather than took from a journal); once per key."""
        with self._lock:
            self._made.add(key)

    @contextmanager
    def items(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.items_seconds += time.monotonic() - started

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "containers_started": self.sandbox.containers_started - self._containers,
            "items_wall_seconds": round(self.items_seconds, 3),
            "units_made": len(self._made),
        }
        cpu = engine_cpu_seconds(self.urls)
        if cpu is not None and self._cpu is not None:
            meta["engine_cpu_seconds"] = round(max(0.0, cpu - self._cpu), 2)
        return meta


def solver_model(settings: Settings) -> str:
    """The model column the solver's rollouts carry."""
    if settings.solver.policy == "chat":
        return settings.solver.model
    return NoopPolicy.model if settings.solver.policy == "noop" else OraclePolicy.model


def cost_profile(settings: Settings) -> Profile:
    """The settings a batch of `settings` costs by."""
    return Profile(
        generator=settings.generator.kind,
        generator_model=settings.generator.model if settings.generator.kind == "llm" else "",
        solver=settings.solver.policy,
        solver_model=solver_model(settings),
        k=settings.solver.attempts,
        soundness=settings.soundness.mode,
        soundness_repeats=settings.soundness.repeats if settings.soundness.mode != "off" else 0,
        auditor_model=settings.soundness.auditor_model if settings.soundness.mode == "full" else "",
        workers=settings.run.workers,
        tasks=settings.run.tasks,
        max_turns=settings.solver.max_turns,
    )
