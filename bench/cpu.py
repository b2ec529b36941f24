"""Where a bench's CPU went, machine-wide: this process, the engine's daemons, everything else.

`CpuMeter` snapshots /proc/stat (the whole machine's busy time) and the CPU of long-lived
processes by name (dockerd, containerd, the container shims, podman) at start and stop. What the
machine spent that is not in those, nor in this process, is "the rest": the short-lived processes
of each container (runc, the init, the shells, the grader and pytest) and whatever else ran (a
scripted model server in another process is named with `others`).

    with CpuMeter(others={"model server": pid}) as meter:
        ...
    print(meter.report(per=episodes, unit="episode"))
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
DAEMONS = ("dockerd", "containerd", "containerd-shim-runc-v2", "podman", "conmon")


def machine_busy() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / TICK


def _process_cpu(pid: int) -> float:
    """utime + stime of a process and its reaped children (seconds); 0 if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / TICK


def _daemons() -> dict[str, float]:
    totals: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name in DAEMONS:
            totals[name] = totals.get(name, 0.0) + _process_cpu(int(entry.name))
    return totals


class CpuMeter:
    def __init__(self, others: dict[str, int] | None = None) -> None:
        self.others = others or {}

    def __enter__(self) -> CpuMeter:
        self._start = self._snapshot()
        self._wall = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self._wall
        end = self._snapshot()
        # (a shim that exited took its CPU with it: its start figure is dropped, not subtracted)
        self.spent = {
            key: max(0.0, value - self._start.get(key, 0.0)) for key, value in end.items()
        }

    def _snapshot(self) -> dict[str, float]:
        snap = {"machine": machine_busy(), "this process": time.process_time()}
        snap.update(_daemons())
        for name, pid in self.others.items():
            snap[name] = _process_cpu(pid)
        return snap

    def report(self, per: int, unit: str) -> str:
        spent = dict(self.spent)
        machine = spent.pop("machine")
        rest = machine - sum(spent.values())
        parts = [f"{name} {value / per * 1000:.0f}" for name, value in sorted(spent.items())]
        parts.append(f"the rest (containers' processes, runc) {rest / per * 1000:.0f}")
        cores = machine / self.wall
        return (
            f"machine CPU per {unit}: {machine / per * 1000:.0f} ms "
            f"({cores:.2f} of {os.cpu_count()} cores busy): " + ", ".join(parts) + " ms"
        )
