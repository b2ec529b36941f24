"""What the container engines of this host have spent in CPU, from /proc and the cgroups (for
store/costs.py, `endless run --plan`): their daemons' (the shims alive at the time) and their
containers' cgroup parents' (which count removed children too). Another process's containers
on the same engine count too; a remote engine cannot be seen: None."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

# (a process's comm is its name cut to 15 characters: containerd-shim-runc-v2 reads containerd-shim)
DAEMONS = ("dockerd", "containerd", "containerd-shim", "podman", "conmon")
# The cgroup parents engines put containers (and build steps) under, with their unit: cgroup v1
# counts nanoseconds in cpuacct.usage, v2 microseconds in cpu.stat's usage_usec.
PARENTS = (
    ("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage", 1e-9),
    ("/sys/fs/cgroup/cpu,cpuacct/docker/cpuacct.usage", 1e-9),
    ("/sys/fs/cgroup/cpuacct/libpod_parent/cpuacct.usage", 1e-9),
    ("/sys/fs/cgroup/cpu,cpuacct/libpod_parent/cpuacct.usage", 1e-9),
    ("/sys/fs/cgroup/docker/cpu.stat", 1e-6),
    ("/sys/fs/cgroup/libpod_parent/cpu.stat", 1e-6),
)
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def is_local(urls: Iterable[str]) -> bool:
    """Whether every engine URL ("" = DOCKER_HOST or the local socket) is on this host."""
    for url in urls:
        resolved = url or os.environ.get("DOCKER_HOST", "")
        if resolved and not resolved.startswith("unix://"):
            return False
    return True


def engine_cpu_seconds(urls: Iterable[str] = ("",)) -> float | None:
    """CPU-seconds the engines of this host have used so far (a counter: take the difference
    over a stage); None when an engine is remote or no engine process can be seen here."""
    if not is_local(urls):
        return None
    daemons, seen = _daemons_cpu()
    if not seen:
        return None
    return daemons + _containers_cpu()


def _daemons_cpu() -> tuple[float, bool]:
    total, seen = 0.0, False
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return 0.0, False
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            if name not in DAEMONS:
                continue
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15]) / _TICK  # utime stime cutime cstime
        seen = seen or name in ("dockerd", "podman", "conmon")
    return total, seen


def cgroup_cpu(path: str, scale: float) -> float | None:
    """The CPU seconds a cgroup's file says (cpuacct.usage, or cpu.stat's usage_usec, `scale`
    seconds each); None where it cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    if not path.endswith("cpu.stat"):
        return int(text.strip()) * scale
    usage = [
        v for k, _, v in (line.partition(" ") for line in text.splitlines()) if k == "usage_usec"
    ]
    return int(usage[0]) * scale if usage else None


def _containers_cpu() -> float:
    return sum(cgroup_cpu(path, scale) or 0.0 for path, scale in PARENTS)
