"""The Sandbox takes its own CPU slot for builds, container starts and verdicts: no caller holds
it for them, none can forget it, and a holder that fails frees it."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest

from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.sandbox import CpuSlot, Sandbox, SandboxConfig

TEST = "def test_ok():\n    assert True\n"


def until(condition, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def one_slot(sandbox) -> Sandbox:
    """A sandbox with one CPU slot, on the session's engine and base image."""
    box = Sandbox(SandboxConfig(cpu_slots=1))
    assert box.base.image_id == sandbox.base.image_id
    return box


def test_the_thread_holding_the_cpu_slot_enters_it_again_and_a_failing_holder_frees_it():
    slot = CpuSlot(1)
    with slot, slot:  # (a verdict inside a container held for its life: no deadlock)
        assert slot.holders == 1
    assert slot.holders == 0

    def fail() -> None:
        with contextlib.suppress(RuntimeError), slot:
            raise RuntimeError("the holder dies")

    worker = threading.Thread(target=fail)
    worker.start()
    worker.join()
    assert slot.holders == 0
    with slot:  # free again
        assert slot.taken == 3


def test_two_threads_at_once_never_hold_more_cpu_slots_than_there_are():
    slot = CpuSlot(2)
    trying, go = [], threading.Event()

    def hold() -> None:
        trying.append(1)
        with slot:
            go.wait()

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for thread in threads:
        thread.start()
    until(lambda: len(trying) == 4 and slot.holders == 2)
    go.set()
    for thread in threads:
        thread.join()
    assert slot.peak == 2 and slot.taken == 4 and slot.holders == 0


def test_a_build_a_start_and_a_verdict_each_take_the_slot_without_the_caller(one_slot):
    cpu = one_slot.cpu
    taken = cpu.taken
    build = one_slot.build(f"FROM {one_slot.base.tag}\nRUN echo {uuid.uuid4().hex}\n", {})
    assert build.ok, build.log
    assert cpu.taken == taken + 1
    with one_slot.container(build.tag) as box:
        assert cpu.taken == taken + 2 and cpu.holders == 0  # left once the container started
        assert run_pytest(box, TEST, stop_agent=False).passed
        assert cpu.taken == taken + 3 and cpu.holders == 0
    one_slot.remove_image(build.tag)


def test_a_failed_start_frees_the_slot_and_a_held_container_grades_inside_its_own(one_slot):
    cpu = one_slot.cpu
    with pytest.raises(SandboxError):
        with one_slot.container(f"endless-absent:{uuid.uuid4().hex[:8]}"):
            pass
    assert cpu.holders == 0
    with one_slot.container(one_slot.base.tag, hold_cpu=True) as box:
        assert cpu.holders == 1
        assert run_pytest(box, TEST, stop_agent=False).passed  # one slot: re-entered
    assert cpu.holders == 0


def test_two_episodes_at_once_on_one_cpu_slot_start_and_grade_one_at_a_time(one_slot):
    cpu = one_slot.cpu
    passed: list[bool] = []

    def episode() -> None:
        with one_slot.container(one_slot.base.tag) as box:
            passed.append(run_pytest(box, TEST, stop_agent=False).passed)

    threads = [threading.Thread(target=episode) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert passed == [True, True]
    assert cpu.peak == 1
