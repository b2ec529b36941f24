"""What a build's limits cost: task-image builds with and without a cgroup parent of ours.

Builds of the base image one at a time, each new (a COPY of a file no earlier build had, so no
cache hit), alternating three ways: docker-py's `api.build` as builds were made before they had
limits ("plain"), the build API's memory and CPU limits only ("api", as on an engine where no
cgroup parent can be made), and those with a cgroup parent holding the pids and memory limits
("cgroup", what a local engine gets). Prints the median wall time of each and the machine's
CPU time per build (all processes, from /proc/stat: run it on an otherwise idle machine), for
a one-COPY build and for one with a RUN step (whose container is made under the parent). Then
the parent alone: made, limits written, removed (no engine involved).

    .venv/bin/python bench/build_limits.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

from docker import DockerClient

from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.engine.client import connect
from endless_assets.sandbox.image import build_cgroup
from endless_assets.sandbox.image.build_limits import BuildLimits
from endless_assets.sandbox.image.images import build_context, build_task_image
from endless_assets.sandbox.sandbox import Sandbox

LIMITS = Limits()  # the defaults, as task containers get them


def cpu_seconds() -> float:
    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:]
    busy = sum(int(x) for i, x in enumerate(fields[:8]) if i not in (3, 4))  # not idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def plain(client: DockerClient, dockerfile: str, files: dict[str, str]) -> str:
    """A build as docker-py makes it (no limits of ours); the image's id."""
    stream = client.api.build(
        fileobj=build_context(dockerfile, files),
        custom_context=True,
        rm=True,
        forcerm=True,
        decode=True,
        network_mode="none",
    )
    built = ""
    for chunk in stream:
        assert "error" not in chunk, chunk
        built = (chunk.get("aux") or {}).get("ID", built)
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    sandbox = Sandbox()
    base = sandbox.base
    with_parent = sandbox.client
    found = build_cgroup.hierarchies_for(with_parent)
    if found is None:
        raise SystemExit("no cgroup parent can be made here (root and a local cgroupfs engine)")
    without = connect("")  # the same engine, through a client whose builds get no parent:
    build_cgroup._usable[without] = None  # the API's limits only
    images: list[str] = []

    def ours(client: DockerClient, dockerfile: str, files: dict[str, str]) -> str:
        result = build_task_image(
            client, dockerfile, files, base_image_id=base.image_id, network=False, limits=LIMITS
        )
        assert result.ok, result.log
        return result.tag

    ways = {
        "plain": lambda d, f: plain(with_parent, d, f),
        "api": lambda d, f: ours(without, d, f),
        "cgroup": lambda d, f: ours(with_parent, d, f),
    }
    print(f"{'build':<10} {'way':<7} {'runs':>5} {'wall ms':>8} {'CPU-s':>7}")
    for kind, step in (("one COPY", ""), ("COPY+RUN", "RUN true\n")):
        walls: dict[str, list[float]] = {w: [] for w in ways}
        cpus: dict[str, list[float]] = {w: [] for w in ways}
        for _ in range(args.runs):
            for way, build in ways.items():
                dockerfile = f"FROM {base.tag}\nCOPY x /x\n{step}"
                files = {"x": uuid.uuid4().hex}
                cpu0, wall0 = cpu_seconds(), time.perf_counter()
                images.append(build(dockerfile, files))
                walls[way].append(time.perf_counter() - wall0)
                cpus[way].append(cpu_seconds() - cpu0)
        for way in ways:
            print(
                f"{kind:<10} {way:<7} {args.runs:>5} {statistics.median(walls[way]) * 1000:>8.0f} "
                f"{statistics.mean(cpus[way]):>7.3f}"
            )
    for image in images:
        with_parent.images.remove(image, noprune=False)
    times = []
    for _ in range(100):
        wall0 = time.perf_counter()
        group = build_cgroup.BuildCgroup(found, BuildLimits.of(LIMITS), own_cgroup=False)
        group.create()
        group.remove(with_parent, wait=True)
        times.append(time.perf_counter() - wall0)
    print(f"the parent alone (made, limits set, removed): {statistics.median(times) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
