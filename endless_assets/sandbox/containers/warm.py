"""Containers started before they are needed: an episode takes one whose start and grader start
are already paid, instead of waiting for both.

A caller says how many containers of an image it will want (`expect`); up to `size` spares,
over all images, are started in the background for the earliest demand, each with its grader
resident, exactly as an episode's own container would be before the agent's first command. A
spare is a fresh container that nothing has run in: taking one changes no isolation guarantee of
the verdict. A taker that finds no spare ready starts its own and leaves the demand for the next
one, so at most `size` spares go unused; `close()` (the end of the stage) removes them.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.engine.client import SandboxError

log = logging.getLogger(__name__)

Opened = tuple[ExitStack, TaskContainer]  # the container, and what closing it releases


class WarmPool:
    def __init__(self, open_container: Callable[[str], Opened], size: int) -> None:
        self._open = open_container
        self.size = max(0, size)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a spare is ready, or a start failed
        self._wanted: OrderedDict[str, int] = OrderedDict()  # image -> containers still wanted
        self._spares: dict[str, list[Opened]] = {}
        self._starting: dict[str, int] = {}
        self._closed = False
        self._threads = ThreadPoolExecutor(max(1, self.size), thread_name_prefix="warm")
        self.taken = self.started = self.wasted = 0

    def expect(self, image: str, count: int) -> None:
        """`count` more containers of `image` will be asked for (in the order of these calls)."""
        if self.size == 0 or count <= 0:
            return
        with self._lock:
            self._wanted[image] = self._wanted.get(image, 0) + count
        self._fill()

    def take(self, image: str) -> Opened | None:
        """A started container of `image`, or None (then the caller starts its own)."""
        with self._lock:
            spares = self._spares.get(image)
            if not spares:
                return None  # the demand stays: the next taker of this image may find one
            spare = spares.pop(0)
            self.taken += 1
            self._wanted[image] -= 1
            if self._wanted[image] <= 0 and not self._starting.get(image):
                del self._wanted[image]
        self._fill()
        return spare

    def ready(self, image: str, count: int, timeout: float = 120.0) -> bool:
        """Wait until `count` spares of `image` are ready (False: not within `timeout`, or fewer
        are being started)."""
        with self._changed:
            return (
                self._changed.wait_for(
                    lambda: (
                        len(self._spares.get(image, [])) >= count
                        or len(self._spares.get(image, [])) + self._starting.get(image, 0) < count
                    ),
                    timeout,
                )
                and len(self._spares.get(image, [])) >= count
            )

    def _held(self) -> int:
        return sum(len(s) for s in self._spares.values()) + sum(self._starting.values())

    def _fill(self) -> None:
        """Start spares for the earliest demand not yet covered, up to `size` in all."""
        with self._lock:
            if self._closed:
                return
            for image, wanted in list(self._wanted.items()):
                have = len(self._spares.get(image, [])) + self._starting.get(image, 0)
                while have < wanted and self._held() < self.size:
                    self._starting[image] = self._starting.get(image, 0) + 1
                    self._threads.submit(self._start, image)
                    have += 1
                if self._held() >= self.size:
                    return

    def _start(self, image: str) -> None:
        try:
            opened = self._open(image)
        except SandboxError as exc:  # the taker starts its own; the engine's fault shows there
            log.info(f"warm container of {image} not started: {exc}")
            opened = None
        with self._lock:
            self._starting[image] -= 1
            keep = opened is not None and not self._closed and self._wanted.get(image, 0) > 0
            if keep:
                self._spares.setdefault(image, []).append(opened)
                self.started += 1
            self._changed.notify_all()
        if opened is not None and not keep:
            self._discard(opened)

    def _discard(self, opened: Opened) -> None:
        self.wasted += 1
        try:
            opened[0].close()
        except SandboxError as exc:
            log.warning(f"removing an unused warm container failed: {exc}")

    def close(self) -> None:
        """Remove every spare (none is left running when the stage ends)."""
        with self._lock:
            self._closed = True
        self._threads.shutdown(wait=True)
        with self._lock:
            spares = [s for group in self._spares.values() for s in group]
            self._spares.clear()
            self._wanted.clear()
        for opened in spares:
            self._discard(opened)
