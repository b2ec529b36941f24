"""A total disk budget per task container: a size-limited filesystem under its writable layer.

overlay2 on ext4 has no per-container quota, so between create and start the container's own
layer directory is covered by a fresh ext4 filesystem of the budget's size, in a sparse file
inside it, loop-mounted over it: every write in the container lands there and fails with ENOSPC
past the budget (no blocks reserved for root). It is unmounted before the container is removed.
This needs root on the engine's host and the overlay2 driver (or rootful Podman's overlay:
`check_attached`); elsewhere the engine's own `storage_opt size` is asked for, and an engine
with neither refuses a budget. `disk=0`: no budget. docs/sandbox.md has the details."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from endless_assets.sandbox.engine import mounts

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
NO_BUDGET = ("0", "none", "off", "unlimited")
MIN_BUDGET = 16 * 2**20  # ext4's own metadata needs a few MiB
# Docker's overlay2 and Podman's overlay (containers/storage): the same layer directory shape
# (diff/, work/, merged/, link, lower), mounted by the engine when the container starts.
OVERLAY_DRIVERS = ("overlay2", "overlay")


def parse_size(text: str, *, what: str = "size") -> int:
    """'2g', '512m', '1.5G', '1048576' -> bytes (binary units); '0' or 'none' -> 0."""
    raw = str(text).strip()
    if raw.lower() in NO_BUDGET:
        return 0
    match = _SIZE.match(raw)
    if not match:
        raise ValueError(f"{what} must be a size like 2g or 512m, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def check_budget(text: str) -> int:
    """The disk setting in bytes (0: no budget); ValueError naming what is wrong."""
    try:
        size = parse_size(text, what="disk")
    except ValueError:
        raise ValueError(f"disk must be a size like 2g or 512m, or 0: got {text!r}") from None
    if 0 < size < MIN_BUDGET:
        raise ValueError(f"disk must be 0 (no budget) or at least 16m, got {text!r}")
    return size


def upper_dir(inspect: dict) -> str:
    """The container's overlay upper directory if this process (root, on the engine's host) can
    reach it; else ""."""
    driver = inspect.get("GraphDriver") or {}
    upper = str((driver.get("Data") or {}).get("UpperDir") or "")
    if driver.get("Name") not in OVERLAY_DRIVERS or not upper or os.geteuid() != 0:
        return ""
    return upper if os.path.isdir(upper) else ""


def layer_dir(inspect: dict) -> str | None:
    """The container's own layer directory (`upper_dir`'s parent), if we can mount over it."""
    upper = upper_dir(inspect)
    if not upper or shutil.which("mkfs.ext4") is None:
        return None
    return os.path.dirname(upper)


def attach(layer: str, size: int) -> None:
    """Cover `layer` (a created, not started container's) with a loop-mounted ext4 filesystem of
    `size` bytes holding the same entries. Raises OSError."""
    image = os.path.join(layer, mounts.IMAGE_NAME)
    mode = os.stat(layer).st_mode & 0o7777
    with tempfile.TemporaryDirectory(prefix="endless-layer-") as staging:
        for entry in os.listdir(layer):
            source = os.path.join(layer, entry)
            if os.path.isdir(source):  # diff/ and work/ are empty before the first start
                os.mkdir(os.path.join(staging, entry))
                shutil.copystat(source, os.path.join(staging, entry))
            else:
                shutil.copy2(source, staging)
        with open(image, "wb") as fh:
            fh.truncate(size)
        options = ["-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard"]
        _run(["mkfs.ext4", "-q", "-F", *options, "-d", staging, image])
    _run(["mount", "-o", "loop,nodev,nosuid", image, layer])
    os.chmod(layer, mode)


def check_attached(layer: str) -> None:
    """Raise OSError unless the budget is still mounted over `layer` once the container started:
    Podman's storage code may lazily unmount its whole overlay directory, budgets included
    (unless `skip_mount_home`), and the container would run without its budget."""
    if not os.path.ismount(layer):
        raise OSError(
            f"the disk budget's filesystem over {layer} was unmounted by the engine before the "
            "container started (Podman: set skip_mount_home, see scripts/ensure-podman.sh)"
        )


def release(layer: str) -> None:
    """Unmount the budget from `layer`, lazily (a process holding it does not keep the container
    from being removed), hidden ones too (mounts.py)."""
    if not layer:
        return
    if os.path.ismount(layer):
        try:
            _run(["umount", "-l", layer])
        except OSError:
            if os.path.ismount(layer):
                raise
    real = os.path.realpath(layer)
    found = mounts.budgets(os.path.dirname(real))
    mounts.unmount_all([m for budget in found if budget.layer == real for m in budget.mounts])


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise OSError(f"{' '.join(cmd[:2])} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
