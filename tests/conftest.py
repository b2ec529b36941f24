"""Shared fixtures: a real Docker sandbox on the real base image, and a leak check.

Every test session (each xdist worker is one) ends by asserting that no container created by
this process is left behind: the sandbox must remove every container whatever happened.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_server import postgres  # noqa: F401  (the fixture, for every test module)

from endless_assets.sandbox.engine.client import OWNER_LABEL, PROJECT_LABEL, SandboxError, owner_tag
from endless_assets.sandbox.sandbox import Sandbox


def own_containers(sandbox: Sandbox) -> list[str]:
    found = sandbox.client.containers.list(
        all=True,
        filters={"label": [f"{PROJECT_LABEL}=endless", f"{OWNER_LABEL}={owner_tag()}"]},
        ignore_removed=True,  # (removed between the listing and its inspection: gone)
    )
    return [c.name for c in found]


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    box = Sandbox()
    _ = box.base  # builds the base image on first use (about a minute), then reuses it
    return box


@pytest.fixture(scope="session")
def root_image(sandbox: Sandbox) -> str:
    """A task image whose agent is root (no USER, as many imported tasks): graded in verifier
    containers."""
    from endless_assets.sandbox.containers.identity import identity_dockerfile

    dockerfile = identity_dockerfile(f"FROM {sandbox.base.tag}\nWORKDIR /app\n", "", "")
    build = sandbox.build(dockerfile, {}, network=False)
    assert build.ok, build.log
    return build.tag


# The tiers are folders, each laid out like the package: tests/fast (the inner loop, README
# "Quick start") and tests/slow (modules whose tests take more than about 25 s together on 2
# cores: they make batches, start servers or run other harnesses). CI runs both. The `slow`
# marker follows the folder, so `-m "not slow"` still selects the fast tier.
SLOW = Path(__file__).resolve().parent / "slow"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def no_container_outlives_the_session():
    yield
    try:
        box = Sandbox()
    except SandboxError:
        return  # no engine: nothing can have been left behind
    leftovers = own_containers(box)
    assert not leftovers, f"containers left behind by this test process: {leftovers}"


@pytest.fixture(autouse=True)
def no_dagster_instance_stays_open():
    """A Dagster instance opened and never closed (a schedule or sensor context built without
    `with`) stays the process's definitions-state store after it is gone; every later
    `materialize` in the worker then fails. Fail the test that left it open instead."""
    from dagster._core.storage.defs_state.base import _current_storage

    before = _current_storage.get()
    yield
    assert _current_storage.get() is before, "this test left a Dagster instance open"


@pytest.fixture
def container(sandbox: Sandbox):
    with sandbox.container(sandbox.base.tag, labels={"role": "test"}) as box:
        yield box
    assert not own_containers(sandbox), "a test container was not removed"
