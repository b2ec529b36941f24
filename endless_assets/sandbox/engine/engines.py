"""A pool of sandbox engines: Docker (or Podman's Docker-compatible API) on one or many hosts.

`docker_hosts` lists engine URLs, each with an optional slot count (`unix:///run/a.sock=4,
ssh://me@gpu1=8`); empty: the one engine `docker_host`. Work goes to the engine with the most
free capacity, preferring one that holds the image. `recover()` (before any retry of work an
engine failed) drains the engines that stopped answering, or waits for one when none answers."""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import docker.errors
from docker import DockerClient
from docker.utils import parse_host

from endless_assets.sandbox.engine import podman
from endless_assets.sandbox.engine.client import (
    ENGINE_WAIT_SECONDS,
    PING_SECONDS,
    EngineConfigError,
    ImageMissing,
    SandboxError,
    client_for,
    connect,
)
from endless_assets.sandbox.engine.lock import engine_lock

log = logging.getLogger(__name__)

MAX_CAPACITY = 1024  # of one engine: containers at once, far above what one machine runs
_CAPACITY = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class EngineSpec:
    url: str  # "" = DOCKER_HOST or the local socket
    capacity: int  # builds and containers at once on it (docker_hosts' `=N`, its "slots")

    @property
    def name(self) -> str:
        return self.url or "local"


def parse_hosts(text: str, default_capacity: int) -> tuple[EngineSpec, ...]:
    """`docker_hosts` as engine specs. ValueError naming the entry that is wrong, and how."""
    specs: list[EngineSpec] = []
    seen: dict[str, str] = {}  # engine_key -> the URL as written first
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        url, sep, number = (part.strip() for part in entry.partition("="))
        if not url:
            raise ValueError(f"{entry!r} has no engine URL before its '='")
        if "=" in number:
            raise ValueError(f"{entry!r} has more than one '=' (an engine URL, then =slots)")
        capacity = default_capacity
        if sep:
            if not _CAPACITY.fullmatch(number) or not 1 <= int(number) <= MAX_CAPACITY:
                raise ValueError(
                    f"{entry!r}: the slot count after '=' must be a whole number from 1 to "
                    f"{MAX_CAPACITY}"
                )
            capacity = int(number)
        try:
            key = engine_key(url)
        except Exception as exc:  # DockerException, or ValueError for a bad port
            raise ValueError(f"{entry!r} is not an engine URL ({exc})") from None
        if key in seen:
            if seen[key] == url:
                raise ValueError(f"{url!r} is listed twice")
            raise ValueError(f"{seen[key]!r} and {url!r} are one engine, listed twice")
        seen[key] = url
        specs.append(EngineSpec(url, capacity))
    if text.strip() and not specs:
        raise ValueError("it lists no engine URL")
    return tuple(specs)


def engine_key(url: str) -> str:
    """The engine `url` points at, however it is written: docker-py's reading of it, a unix
    socket's path made canonical (`unix://var/run/docker.sock` is `unix:///var/run/...`)."""
    host = parse_host(url)
    if host.startswith("http+unix://"):
        return "unix://" + os.path.realpath("/" + host.removeprefix("http+unix://").lstrip("/"))
    return host


@dataclass(eq=False)
class Engine:
    spec: EngineSpec
    client: DockerClient
    active: int = 0  # builds and containers placed here now
    placed: int = 0  # ever
    up: bool = True
    down_reason: str = ""
    images: set[str] = field(default_factory=set)  # tags known to be here

    @property
    def name(self) -> str:
        return self.spec.name

    def has_image(self, tag: str) -> bool:
        if tag in self.images:
            return True
        try:
            self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            return False
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxError(f"engine {self.name} failed to look up {tag}: {exc}") from exc
        self.images.add(tag)
        return True


def answers(url: str) -> bool:
    """Whether the engine at `url` answers a ping within PING_SECONDS."""
    try:
        client = client_for(url, PING_SECONDS)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # docker-py's, requests' (timeouts, connection refused), OSError...
        return False


class EnginePool:
    """Engines, their load, and which of them are up. One per process per list of engines."""

    def __init__(self, specs: tuple[EngineSpec, ...]) -> None:
        self.specs = specs
        self._lock = threading.Lock()
        self.engines: list[Engine] = []
        self.unused: dict[str, str] = {}  # engine -> why it did not answer at set-up
        for spec in specs:
            try:
                self.engines.append(Engine(spec, connect(spec.url)))
            except EngineConfigError:
                raise
            except SandboxError as exc:
                if len(specs) == 1:
                    raise SandboxError(f"{exc}. {engine_hint()}") from exc
                self.unused[spec.name] = str(exc)
                log.warning(f"sandbox engine {spec.name} is not used: {exc}")
        if not self.engines:
            raise SandboxError(
                f"no sandbox engine answers ({'; '.join(self.unused.values())}). {engine_hint()}"
            )

    @property
    def up(self) -> list[Engine]:
        return [e for e in self.engines if e.up]

    def _pick(self, image: str, only: list[Engine] | None) -> Engine:
        candidates = [e for e in (only if only is not None else self.engines) if e.up]
        if not candidates:
            raise SandboxError(
                "no sandbox engine is up: "
                + "; ".join(f"{e.name}: {e.down_reason}" for e in self.engines)
            )

        def key(e: Engine) -> tuple:
            full = e.active >= e.spec.capacity
            return (full, not (image and image in e.images), e.active / e.spec.capacity, e.placed)

        return min(candidates, key=key)

    @contextmanager
    def lease(self, image: str = "", only: list[Engine] | None = None) -> Iterator[Engine]:
        """An engine for one build or container, held until the block ends: the one with the
        most free capacity, preferring one that holds `image`; among `only` when given."""
        with self._lock:
            engine = self._pick(image, only)
            engine.active += 1
            engine.placed += 1
        try:
            yield engine
        finally:
            with self._lock:
                engine.active -= 1

    def drain(self, engine: Engine, reason: str) -> None:
        with self._lock:
            if engine.up and len(self.engines) > 1:
                engine.up, engine.down_reason = False, reason
                log.warning(f"sandbox engine {engine.name} drained: {reason}")

    def recover(self, wait_seconds: float = ENGINE_WAIT_SECONDS) -> list[str]:
        """Drain every engine that does not answer now; when none does, wait up to
        `wait_seconds` for any to come back. Returns the names of the engines drained now."""
        drained = []
        for engine in self.up:
            if not answers(engine.spec.url):
                self.drain(engine, "stopped answering")
                drained.append(engine.name)
        if self.up and any(answers(e.spec.url) for e in self.up):
            return drained
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            for engine in self.engines:
                if answers(engine.spec.url):
                    with self._lock:
                        engine.up, engine.down_reason = True, ""
                    return drained
            time.sleep(0.5)
        raise SandboxError("no sandbox engine answers: " + ", ".join(e.name for e in self.engines))

    def report(self) -> list[dict]:
        """Per engine (those that did not answer at set-up last), for run metadata."""
        rows = [(e.spec, e.placed, e.up, e.down_reason) for e in self.engines]
        rows += [(s, 0, False, self.unused[s.name]) for s in self.specs if s.name in self.unused]
        return [
            {"engine": s.name, "slots": s.capacity, "placed": n, "up": up, "down_reason": why}
            for s, n, up, why in rows
        ]


def engine_hint() -> str:
    """What to fix when no engine answers."""
    if os.environ.get("ENDLESS_DOCKER_HOSTS", "").strip():
        return "Check the engines of ENDLESS_DOCKER_HOSTS."
    return "Run scripts/ensure-docker.sh or set DOCKER_HOST."


_pools: dict[tuple[EngineSpec, ...], EnginePool] = {}
_pools_lock = threading.Lock()


def pool_for(specs: tuple[EngineSpec, ...]) -> EnginePool:
    """The process's pool for these engines (shared by every stage and thread)."""
    with _pools_lock:
        if specs not in _pools:
            _pools[specs] = EnginePool(specs)
        return _pools[specs]


@functools.cache
def _copy_lock(tag: str, target: str) -> threading.Lock:
    return threading.Lock()


def copy_image(source: Engine, target: Engine, tag: str) -> None:
    """Stream `tag` from one engine to another (docker save | docker load: the same id, so task
    images built on it get the same tags everywhere), one copy at a time across processes (the
    target engine's lock: lock.py)."""
    with _copy_lock(tag, target.name):
        if target.has_image(tag):
            return
        with engine_lock(target.client, f"copy-{tag}"):
            target.images.discard(tag)
            if target.has_image(tag):  # copied by another process meanwhile
                return
            try:
                podman.copy_image(source.client, target.client, tag)  # Docker or Podman
            except docker.errors.ImageNotFound as exc:  # removed from the source meanwhile
                source.images.discard(tag)
                raise ImageMissing(
                    f"copying {tag} from engine {source.name} to {target.name}: {exc}"
                ) from exc
            except (docker.errors.DockerException, OSError) as exc:
                raise SandboxError(
                    f"copying {tag} from engine {source.name} to {target.name} failed: {exc}"
                ) from exc
        target.images.add(tag)
