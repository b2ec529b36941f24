"""What the soundness stage costs per task, next to the validation stage on the same tasks.

For one task of each procedural family (or --families), after building its image, it runs stage
III (`check_completion_test`) and then the soundness stage (`check_soundness`) on it, and records
for each the wall time and the CPU it caused, in three parts that belong to the run alone:

- containers: every task container's cgroup (the grader, pytest, the agent's commands, the
  restores), read just before the container is removed;
- engine: each container's containerd shim, with the runc processes it reaped (one per exec);
- harness: this process (threads, and the mkfs/mount of each container's disk budget).

The engine daemons' own CPU (dockerd, containerd) is printed apart: other work on the machine
shares them. The soundness stage's cost is then split by what its containers spent on each
kind of job (each job's cgroup CPU, from its outcome): the shortcut probes (with their
confirmations), the ablations, and the rest (the controls, the lanes' containers, graders,
snapshots). Design target: shortcut probes <= 1.5x the validation stage.

    .venv/bin/python bench/soundness_cost.py [--families a,b] [--seed 0] [--rounds 1]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.containers.snapshot import container_cpu_seconds
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.stages.completion import check_completion_test
from endless_assets.stages.environment import build_environment
from endless_assets.stages.soundness.stage import check_soundness

TICK = os.sysconf("SC_CLK_TCK")
RUNS = ("the validation stage", "soundness")
PARTS = ("shortcuts", "ablations", "controls")


def _proc_cpu(pid: str) -> float:
    """utime + stime + cutime + cstime of a process, in seconds (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / TICK


def shim_cpu(container_id: str) -> float:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
        except OSError:
            continue
        if args and b"containerd-shim" in args[0] and container_id.encode() in args:
            return _proc_cpu(pid)
    return 0.0


def daemons_cpu() -> float:
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if comm in ("dockerd", "containerd"):
            total += _proc_cpu(pid)
    return total


def harness_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class MeteredSandbox(Sandbox):
    """A sandbox that adds up, per container, its cgroup's CPU and its shim's."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.containers_cpu = self.engine_cpu = 0.0
        self.containers = 0

    @contextlib.contextmanager
    def container(
        self, image: str, labels: dict[str, str] | None = None
    ) -> Iterator[TaskContainer]:
        with super().container(image, labels) as box:
            try:
                yield box
            finally:
                cpu, shim = container_cpu_seconds(box) or 0.0, shim_cpu(box.id)
                with self._lock:
                    self.containers_cpu += cpu
                    self.engine_cpu += shim
                    self.containers += 1


@dataclass
class Cost:
    wall: float
    containers: float
    engine: float
    harness: float
    daemons: float
    n_containers: int

    @property
    def cpu(self) -> float:
        return self.containers + self.engine + self.harness


def measure(sandbox: MeteredSandbox, run) -> tuple[Cost, object]:
    sandbox.containers_cpu = sandbox.engine_cpu = 0.0
    sandbox.containers = 0
    h0, d0, w0 = harness_cpu(), daemons_cpu(), time.perf_counter()
    result = run()
    wall = time.perf_counter() - w0
    cost = Cost(
        wall,
        sandbox.containers_cpu,
        sandbox.engine_cpu,
        harness_cpu() - h0,
        daemons_cpu() - d0,
        sandbox.containers,
    )
    return cost, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="", help="comma-separated (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1, help="runs per task (medians)")
    parser.add_argument("--repeats", type=int, default=3, help="soundness_repeats")
    args = parser.parse_args()
    wanted = set(filter(None, args.families.split(",")))
    sandbox = MeteredSandbox()
    rows: dict[str, dict[str, Cost]] = {}
    header = f"{'task':<18} {'run':<10} {'wall s':>7} {'CPU-s':>7} {'cont':>6} {'engine':>7}"
    print(header + f" {'harness':>8} {'daemons':>8} {'boxes':>6}")
    for family in ALL_FAMILIES:
        if wanted and family.name not in wanted:
            continue
        rows[family.name] = _bench_task(sandbox, family, args)
        for name in (*RUNS, *PARTS):
            c = rows[family.name][name]
            print(
                f"{family.name:<18} {name:<10} {c.wall:>7.2f} {c.cpu:>7.3f} {c.containers:>6.3f} "
                f"{c.engine:>7.3f} {c.harness:>8.3f} {c.daemons:>8.3f} {c.n_containers:>6}",
                flush=True,
            )
    _summary(rows)


def _bench_task(sandbox: MeteredSandbox, family, args) -> dict[str, Cost]:
    gen = ProceduralGenerator(sandbox.base.tag, families=[family])
    draft, _ = gen.describe("bench-soundness", args.seed, args.seed)
    env = build_environment(draft, gen, sandbox)
    assert env.status == "ok", env.reject_reason
    image = env.image_tag
    jobs = {
        "the validation stage": functools.partial(
            check_completion_test, draft, image, gen, sandbox
        ),
        "soundness": functools.partial(
            check_soundness, draft, image, sandbox, repeats=args.repeats
        ),
    }
    samples: dict[str, list[Cost]] = {name: [] for name in (*RUNS, *PARTS)}
    for _ in range(args.rounds):
        for name in RUNS:
            cost, result = measure(sandbox, jobs[name])
            assert result.status == "ok", (name, result.reject_reason)
            samples[name].append(cost)
        spent = {
            kind: sum(p.cpu_seconds or 0.0 for p in result.probes if p.kind == kind)
            for kind in ("shortcut", "ablation")
        }
        samples["shortcuts"].append(_part(spent["shortcut"]))
        samples["ablations"].append(_part(spent["ablation"]))
        rest = cost.cpu - spent["shortcut"] - spent["ablation"]
        samples["controls"].append(_part(rest, cost.wall, cost.n_containers))
    return {name: _median(values) for name, values in samples.items()}


def _part(cpu: float, wall: float = 0.0, boxes: int = 0) -> Cost:
    return Cost(wall, cpu, 0.0, 0.0, 0.0, boxes)


def _median(costs: list[Cost]) -> Cost:
    return Cost(
        *(statistics.median(getattr(c, f) for c in costs) for f in Cost.__dataclass_fields__)
    )


def _summary(rows: dict[str, dict[str, Cost]]) -> None:
    if not rows:
        return
    print(
        "\nper task, mean over tasks (CPU-s = containers + engine + harness; ratio to the "
        "validation stage)"
    )
    base = statistics.mean(r["the validation stage"].cpu for r in rows.values())
    base_wall = statistics.mean(r["the validation stage"].wall for r in rows.values())
    for name in ("the validation stage", *PARTS, "soundness"):
        cpu = statistics.mean(r[name].cpu for r in rows.values())
        line = f"  {name:<10} {cpu:>7.3f} CPU-s ({cpu / base:.2f}x)"
        if name in RUNS:
            wall = statistics.mean(r[name].wall for r in rows.values())
            line += f"   wall {wall:>6.2f} s ({wall / base_wall:.2f}x)"
        print(line)


if __name__ == "__main__":
    main()
