"""One object holding what every stage needs from Docker: the engines, the base image, limits.

The engines are a pool (engines.py): with one engine (the default) everything happens there, as
it always did; with `docker_hosts`, each build and each container goes to the engine with the
most free capacity, and a task image is built on the engine that runs it, from the recipe its first
build left here (the same tag everywhere: the base image is copied between engines, id intact).
An engine that holds the recipe's base already keeps it, whoever built it: a base built from the
same recipe is the same base, and nothing here removes an image another process may use. An
image removed under the work (`endless prune` elsewhere) is brought back and the work retried.
The sandbox takes its own CPU slot (`CpuSlot`) for builds, container starts and verdicts.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field

from docker import DockerClient

from endless_assets.models import Service, content_hash
from endless_assets.sandbox.containers.container import Limits, TaskContainer, task_container
from endless_assets.sandbox.containers.services import running_services
from endless_assets.sandbox.containers.warm import Opened, WarmPool
from endless_assets.sandbox.engine.client import ImageMissing, SandboxError, engine_failure
from endless_assets.sandbox.engine.engines import Engine, EngineSpec, copy_image, pool_for
from endless_assets.sandbox.engine.leftovers import sweep_containers
from endless_assets.sandbox.grading.verdict import start_grader
from endless_assets.sandbox.image.base_image import BaseImage, base_image_tag, ensure_base_image
from endless_assets.sandbox.image.images import BuildResult, build_task_image, image_tag_for


@dataclass(frozen=True)
class SandboxConfig:
    docker_host: str | None = None  # None: DOCKER_HOST or the local socket
    limits: Limits = field(default_factory=Limits)
    build_network: bool = True  # RUN steps may reach package registries; run time never may
    # host:port a build's network may reach although this host's or its LAN's (build_relay.py)
    build_network_allow: tuple[str, ...] = ()
    build_timeout: float = 600
    test_timeout: float = 180
    # An engine pool (engines.parse_hosts); empty: the one engine of `docker_host`.
    engines: tuple[EngineSpec, ...] = ()
    # Containers started ahead of demand (warm.py), at most this many at once; 0: none.
    warm: int = 0
    # CPU slots: builds, container starts and verdicts at once through this sandbox (the
    # `workers` setting), so many episodes can wait on a model while a small machine stays
    # responsive; 0: unbounded. (An engine's capacity is EngineSpec.capacity.)
    cpu_slots: int = 0

    @property
    def engine_specs(self) -> tuple[EngineSpec, ...]:
        return self.engines or (EngineSpec(self.docker_host or "", 1),)


@dataclass(frozen=True)
class _Recipe:
    dockerfile: str
    context_files: dict[str, str]
    network: bool


class CpuSlot:
    """At most `count` threads at once in a sandbox's CPU-heavy moments: a build, a container's
    start, a verdict, and the whole life of a container asked for with `hold_cpu`. The Sandbox
    takes it itself (callers never do); the thread holding it may enter it again. 0: no bound.
    `waited`: seconds spent waiting for it; `taken`: how often; `peak`: the most holders at once."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._free = threading.BoundedSemaphore(count if count > 0 else 1 << 30)
        self._mine = threading.local()
        self._lock = threading.Lock()
        self.holders = self.peak = self.taken = 0
        self.waited = 0.0

    def __enter__(self) -> None:
        depth = getattr(self._mine, "depth", 0)
        if depth == 0:
            started = time.monotonic()
            self._free.acquire()
            with self._lock:
                self.waited += time.monotonic() - started
                self.holders += 1
                self.taken += 1
                self.peak = max(self.peak, self.holders)
        self._mine.depth = depth + 1

    def __exit__(self, *exc: object) -> None:
        self._mine.depth -= 1
        if self._mine.depth == 0:
            with self._lock:
                self.holders -= 1
            self._free.release()


_swept: set[str] = set()
_recipes: dict[str, _Recipe] = {}  # task image tag -> how it was built (for other engines)
# A task image built with services (`Sandbox.build`) -> each service and its image's tag.
_services: dict[str, tuple[tuple[Service, str], ...]] = {}
_recipes_lock = threading.Lock()


class Sandbox:
    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.pool = pool_for(self.config.engine_specs)
        self._bases: dict[str, BaseImage] = {}
        self._base_recipes: dict[str, str | None] = {}  # base tag -> its recipe
        self._base_lock = threading.Lock()
        self.warm = WarmPool(self._open_warm, self.config.warm)
        # Taken here for builds, container starts and verdicts; a caller holds it only to keep
        # it across several of them (a soundness lane's containers).
        self.cpu = CpuSlot(self.config.cpu_slots)
        self.containers_started = 0  # task containers this sandbox started (warm ones included)
        self._counted = threading.Lock()
        for engine in self.pool.up:
            if engine.name not in _swept:
                # Containers of processes that died (a killed run) are removed once per process.
                _swept.add(engine.name)
                sweep_containers(engine.client)

    @property
    def client(self) -> DockerClient:
        """The first engine that is up (what single-engine tools and tests talk to)."""
        return self.pool.up[0].client if self.pool.up else self.pool.engines[0].client

    @property
    def base(self) -> BaseImage:
        return self.base_for(None)

    def base_for(self, recipe: str | None) -> BaseImage:
        """The base image of `recipe` (None: the setting's): an engine's that holds it, else
        built on the first engine that is up (by one process at a time: the engine's lock);
        other engines receive a copy when they first need it."""
        key = base_image_tag(recipe)
        with self._base_lock:
            if key not in self._bases:
                holders = [e for e in self.pool.up if e.has_image(key)]
                engine = (holders or self.pool.up or self.pool.engines)[0]
                base = ensure_base_image(engine.client, recipe=recipe)
                engine.images.add(base.tag)
                self._bases[key] = base
                self._base_recipes[key] = recipe
            return self._bases[key]

    def ensure_base(self, recipe: str | None = None) -> list[str]:
        """The base image on every engine that is up (`endless setup`); their names."""
        base = self.base_for(recipe)
        for engine in self.pool.up:
            self._bring(engine, base.tag)
        return [e.name for e in self.pool.up]

    def _bring(self, engine: Engine, tag: str) -> None:
        """Make `tag` present on `engine`: there already (whatever its id: a base image another
        process built from the same recipe is the same base, and never removed), else copied
        from an engine that holds it; a base image that no engine holds any more (removed
        under the run) is built again."""
        if engine.has_image(tag):
            return
        sources = [e for e in self.pool.up if e is not engine and tag in e.images]
        sources = sources or [e for e in self.pool.up if e is not engine and _holds(e, tag)]
        if sources:
            copy_image(sources[0], engine, tag)
            return
        if tag not in self._base_recipes:
            raise ImageMissing(f"image {tag} not found on engine {engine.name} nor on any other")
        base = ensure_base_image(engine.client, recipe=self._base_recipes[tag])
        engine.images.add(base.tag)

    def build(
        self,
        dockerfile: str,
        context_files: dict[str, str],
        *,
        network: bool = True,
        services: Sequence[Service] = (),
        service_network: bool | None = None,
    ) -> BuildResult:
        """Build (or reuse) a task image. RUN steps get a network (the registries, never this
        host: image/build_network.py) only when the caller asks (`network`) and the
        configuration allows it (`build_network`). With `services`, their images too (with a
        network as `service_network` asks: None, as `network`), and the task's image is one of
        its own (a label names them) whose containers start them."""
        if services:
            wanted = network if service_network is None else service_network
            return self._build_with(dockerfile, context_files, network, services, wanted)
        network = network and self.config.build_network
        base = self.base
        tag = image_tag_for(dockerfile, context_files, base.image_id)
        with self.cpu, self.pool.lease(tag) as engine:
            result = self._build_on(engine, dockerfile, context_files, network)
        if result.ok:
            with _recipes_lock:
                _recipes[result.tag] = _Recipe(dockerfile, dict(context_files), network)
        return result

    def _build_with(
        self,
        dockerfile: str,
        context_files: dict[str, str],
        network: bool,
        services: Sequence[Service],
        service_network: bool,
    ) -> BuildResult:
        built, seconds = [], 0.0
        for service in services:  # each with the build limits a task's gets
            result = self.build(service.dockerfile, service.context_files, network=service_network)
            seconds += result.seconds
            if not result.ok:
                log = f"service {service.name}: {result.log}"
                return dataclasses.replace(result, log=log, seconds=seconds)
            built.append((service, result.tag))
        marker = content_hash(*(s.model_dump_json() for s in services), *(t for _, t in built))
        labelled = f"{dockerfile.rstrip()}\nLABEL endless.services={marker}\n"
        result = self.build(labelled, context_files, network=network)
        if result.ok:
            with _recipes_lock:
                _services[result.tag] = tuple(built)
        return dataclasses.replace(result, seconds=result.seconds + seconds)

    def _build_on(
        self,
        engine: Engine,
        dockerfile: str,
        context_files: dict[str, str],
        network: bool,
    ) -> BuildResult:
        base = self.base
        self._bring(engine, base.tag)
        try:
            with engine_failure(f"engine {engine.name}"):  # (retried elsewhere)
                result = build_task_image(
                    engine.client,
                    dockerfile,
                    context_files,
                    base_image_id=base.image_id,
                    network=network,
                    network_allow=self.config.build_network_allow,
                    timeout=self.config.build_timeout,
                    limits=self.config.limits,  # a build's RUN steps get a container's limits
                )
        except SandboxError:
            self._check_base(engine, base.tag)
            raise
        if result.ok:
            engine.images.add(result.tag)
        else:
            self._check_base(engine, base.tag)
        return result

    def _check_base(self, engine: Engine, tag: str) -> None:
        """After a build failed: ImageMissing (tried again, the base brought back first) when
        the base image left the engine under it (another process removed it), which is no
        fault of the Dockerfile's. An engine that cannot say leaves the failure as it was."""
        engine.images.discard(tag)
        try:
            gone = not engine.has_image(tag)
        except SandboxError:
            return
        if gone:
            raise ImageMissing(f"the base image {tag} left engine {engine.name} during a build")

    def _ensure_image(self, engine: Engine, image: str) -> None:
        """`image` on `engine`: already there, built there from its recipe, or copied."""
        if engine.has_image(image):
            return
        with _recipes_lock:
            recipe = _recipes.get(image)
        if recipe is None:
            self._bring(engine, image)
            return
        result = self._build_on(engine, recipe.dockerfile, recipe.context_files, recipe.network)
        if not result.ok:
            raise SandboxError(
                f"{image} did not build on engine {engine.name}: {result.log[-500:]}"
            )

    def remove_image(self, tag: str) -> None:
        """Remove `tag` from every engine that is up (a no-op where it is absent)."""
        for engine in self.pool.up:
            engine.images.discard(tag)
            try:
                engine.client.images.remove(tag, force=True, noprune=False)
            except Exception:  # absent there, or the engine refused: nothing to undo
                continue

    def recover(self) -> list[str]:
        """Before retrying work an engine failed: forget which images the engines were seen to
        hold (one may have been removed since: it is looked up, rebuilt or copied again), and
        drain the engines that stopped answering (or wait for one, when none answers). The
        names of the engines drained now."""
        for engine in self.pool.engines:
            engine.images.clear()
        with self._base_lock:
            self._bases.clear()
        return self.pool.recover()

    @contextmanager
    def container(
        self,
        image: str,
        labels: dict[str, str] | None = None,
        *,
        warm: bool = False,
        hold_cpu: bool = False,
    ) -> Iterator[TaskContainer]:
        """A fresh container of `image`, removed when the block ends. `warm`: one started ahead
        (`expect`), grader resident, when there is one (its labels are the warm pool's). Its
        start and its verdicts take a CPU slot; `hold_cpu`: its whole life does (checks that
        run commands back to back, no model waited on in between)."""
        with self.cpu if hold_cpu else nullcontext():
            opened = self.warm.take(image) if warm else None
            stack, box = opened or self._open(image, labels)
            with stack:
                yield box

    def expect(self, image: str, count: int = 1) -> None:
        """`count` containers of `image` will be asked for with warm=True: start them now."""
        self.warm.expect(image, count)

    def close(self) -> None:
        """Remove the warm containers nobody took (at the end of a stage)."""
        self.warm.close()

    def _open(self, image: str, labels: dict[str, str] | None) -> Opened:
        stack = ExitStack()
        try:
            with self.cpu:
                engine = stack.enter_context(self.pool.lease(image))
                self._ensure_image(engine, image)
                with _recipes_lock:
                    services = _services.get(image, ())
                ready = None
                if services:  # all on the engine of the agent's container, started in parallel
                    for _, tag in services:
                        self._ensure_image(engine, tag)
                    running = running_services(engine.client, services, dict(labels or {}))
                    ready = stack.enter_context(running)
                network = ready.network if ready else ""
                try:
                    box = self._start(stack, engine, image, labels, network)
                except ImageMissing:  # removed since it was seen (`endless prune`): bring it back
                    engine.images.discard(image)
                    self._ensure_image(engine, image)
                    box = self._start(stack, engine, image, labels, network)
                box.services = ready
            with self._counted:
                self.containers_started += 1
        except BaseException:
            with suppress(SandboxError):  # the engine that just failed may fail the removal too
                stack.close()
            raise
        box.cpu_slot = self.cpu  # its verdicts take it (grade.run_pytest)
        return stack, box

    def _start(
        self,
        stack: ExitStack,
        engine: Engine,
        image: str,
        labels: dict[str, str] | None,
        network: str = "",
    ) -> TaskContainer:
        limits = self.config.limits
        with engine_failure(f"engine {engine.name}"):
            return stack.enter_context(
                task_container(engine.client, image, limits=limits, labels=labels, network=network)
            )

    def _open_warm(self, image: str) -> Opened:
        with self.cpu:
            stack, box = self._open(image, {"role": "warm"})
            try:
                start_grader(box)  # as an episode does before the agent's first command
            except BaseException:
                stack.close()
                raise
        return stack, box


def _holds(engine: Engine, tag: str) -> bool:
    """Whether `engine` holds `tag` (looked up where it is not known); False when it cannot
    say."""
    try:
        return engine.has_image(tag)
    except SandboxError:
        return False
