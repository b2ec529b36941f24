"""A build's RUN steps are held to a task container's limits and the whole build to a budget: a
fork bomb, a memory bomb or a step that never ends fails that task's build, with the limit as
its reason, and leaves nothing behind (real Docker, no mocks).

The limits are small and passed explicitly (SMALL), the way the settings reach task containers
and builds alike (SandboxConfig.limits).
"""

from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.image import build_cgroup
from endless_assets.sandbox.image.images import build_context, build_task_image
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig

pytestmark = pytest.mark.docker

SMALL = Limits(memory="256m", cpus=0.5, pids=64)

# What a RUN step can hold at once and may use: it forks children that wait on a pipe until a
# fork fails (or 200 of them run), counts the processes of its container then (every process
# of the build's container is in its pid namespace), and prints its memory and CPU limits and
# its network interfaces. It fails, so that its output is the build's log.
PROBE = """\
import os

def first(*paths):
    for path in paths:
        if os.path.exists(path):
            return open(path).read().split()[0]
    return "?"

r, w = os.pipe()
forked, failed = 0, "no"
try:
    while forked < 200:
        if os.fork() == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        forked += 1
except OSError as exc:
    failed = exc.strerror
alive = len([p for p in os.listdir("/proc") if p.isdigit()])
print(f"processes {alive}, a fork failed: {failed}")
print("memory", first("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"))
print("cpu quota", first("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu.max"))
lines = open("/proc/net/dev").read().splitlines()[2:]
print("interfaces", " ".join(sorted(line.split(":")[0].strip() for line in lines)))
raise SystemExit(1)
"""


@pytest.fixture(scope="module")
def small(sandbox: Sandbox) -> Sandbox:
    """The session's engine with SMALL limits; builds there get a cgroup parent of ours."""
    if build_cgroup.hierarchies_for(sandbox.client) is None:
        pytest.skip("no cgroup parent for builds here: needs root and a local cgroupfs engine")
    return Sandbox(SandboxConfig(limits=SMALL))


def own_parents() -> list[str]:
    """The cgroup parents this process made that still exist."""
    found = build_cgroup.read_hierarchies()
    assert found is not None
    mine = f"{build_cgroup.PREFIX}-{os.stat('/proc/self/ns/pid').st_ino}-{os.getpid()}-"
    return [
        os.path.join(mount, name)
        for mount in found.mounts
        for name in os.listdir(mount)
        if name.startswith(mine)
    ]


def naive_build_log(sandbox: Sandbox, dockerfile: str, files: dict[str, str]) -> str:
    """The output of a build as docker-py's `api.build` makes it (no limits of ours)."""
    stream = sandbox.client.api.build(
        fileobj=build_context(dockerfile, files),
        custom_context=True,
        rm=True,
        forcerm=True,
        decode=True,
        network_mode="none",
    )
    return "".join(chunk.get("stream", "") + chunk.get("error", "") for chunk in stream)


def test_a_run_step_gets_a_task_containers_process_memory_and_cpu_limits_and_no_network(
    small: Sandbox,
):
    dockerfile = (
        f"FROM {small.base.tag}\n# {uuid.uuid4().hex}\nCOPY probe.py /probe.py\n"
        "RUN python3 /probe.py\n"
    )
    files = {"probe.py": PROBE}

    naive = naive_build_log(small, dockerfile, files)
    assert ", a fork failed: no" in naive, naive  # 200 children, and room for more
    assert "cpu quota -1" in naive or "cpu quota max" in naive, naive

    build = small.build(dockerfile, files, network=False)
    assert not build.ok
    assert f"processes {SMALL.pids}, a fork failed: Resource temporarily unavailable" in build.log
    assert f"memory {256 * 2**20}" in build.log, build.log
    assert f"cpu quota {int(SMALL.cpus * 100_000)}" in build.log, build.log
    assert "interfaces lo\n" in build.log, build.log
    assert not own_parents()


def test_a_fork_bomb_in_a_run_step_fails_that_build_and_not_the_others(small: Sandbox):
    run = uuid.uuid4().hex
    bomb = f"FROM {small.base.tag}\nRUN echo {run} && timeout 60 sh -c 'f(){{ f|f; }}; f'\n"
    # (forty processes of its own, which the bomb's count does not take from)
    normal = f"FROM {small.base.tag}\nRUN echo {run} && seq 40 | xargs -P 40 -n 1 true\n"
    together = threading.Barrier(2)

    def build(dockerfile: str):
        together.wait()
        return small.build(dockerfile, {}, network=False)

    with ThreadPoolExecutor(2) as pool:
        bombed, built = pool.map(build, [bomb, normal])

    assert not bombed.ok
    assert "Cannot fork" in bombed.log
    assert bombed.log.endswith(
        f"the build's processes reached their limit ({SMALL.pids}): a step could not fork"
    )
    assert built.ok, built.log
    small.client.ping()
    assert not own_parents()
    small.remove_image(built.tag)


def test_a_memory_bomb_in_a_run_step_fails_the_build_at_the_memory_limit(small: Sandbox):
    grow = "x = [b'x' * 2**20 for _ in iter(int, 1)]"  # a MiB more, forever
    dockerfile = (
        f'FROM {small.base.tag}\nRUN echo {uuid.uuid4().hex} && timeout 60 python3 -c "{grow}"\n'
    )

    build = small.build(dockerfile, {}, network=False)

    assert not build.ok
    assert "returned a non-zero code: 137" in build.log
    assert build.log.endswith("a step was killed (exit 137) at the build's memory limit (256m)")


def test_a_build_past_its_budget_is_cancelled_and_rejected_with_the_budget_as_its_reason(
    sandbox: Sandbox,
):
    run = uuid.uuid4().hex
    dockerfile = f"FROM {sandbox.base.tag}\nRUN yes {run}\n"  # prints forever

    build = build_task_image(
        sandbox.client,
        dockerfile,
        {},
        base_image_id=sandbox.base.image_id,
        network=False,
        limits=Limits(memory="256m", cpus=0.2, pids=64),
        budget=5,
    )

    assert not build.ok
    assert build.log.endswith("the build ran past its budget of 5 s and was cancelled")
    left = [c["Id"] for c in sandbox.client.api.containers(all=True) if run in c["Command"]]
    assert not left, "the cancelled step's container is still there"
