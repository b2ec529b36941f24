"""The verifier container's read-only system locations (verifier.py): what a test, a task's script
or any program they run cannot change while grading, whoever runs it."""

from __future__ import annotations

import os

# Docker's own read-only paths, which a container's ReadonlyPaths replaces (so: kept).
ENGINE_DEFAULTS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
# Files the loader reads if they exist: where the image has none, a read-only empty file is
# mounted at its path, so that nothing creates one while grading (a preload library would then
# load into every program started after).
EMPTY_WHERE_ABSENT = ("/etc/ld.so.preload",)
EMPTY_FILE = "/run/endless/empty"


def apply(host_config: dict, paths: list[str], absent: list[str], local: bool) -> None:
    """Make `paths` read-only in the container `host_config` creates; mount the empty file over
    each of EMPTY_WHERE_ABSENT that the image lacks (`absent`), where the engine runs on this
    host (`local`: the file's path is the engine's)."""
    host_config["ReadonlyPaths"] = [*ENGINE_DEFAULTS, *paths]
    missing = [p for p in EMPTY_WHERE_ABSENT if p in absent]
    if local and missing:
        source = empty_file()
        mounts = host_config.setdefault("Mounts", [])
        for target in missing:
            mounts.append({"Type": "bind", "Source": source, "Target": target, "ReadOnly": True})


def empty_file() -> str:
    """A root-owned empty file, read-only for everyone, on this host."""
    if not os.path.isfile(EMPTY_FILE) or os.path.getsize(EMPTY_FILE):
        os.makedirs(os.path.dirname(EMPTY_FILE), mode=0o755, exist_ok=True)
        staging = f"{EMPTY_FILE}.{os.getpid()}"
        with open(staging, "w"):
            pass
        os.chmod(staging, 0o444)
        os.replace(staging, EMPTY_FILE)
    return EMPTY_FILE
