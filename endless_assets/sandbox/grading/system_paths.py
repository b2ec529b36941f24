"""What an agent changed in the system locations, held against what the task's reference solution
changes there: any other change is tampering (verifier.py grades it 0, naming the paths).

The system locations are those the first grader named before the agent's first command
(grader_describe.py): the library, binary and interpreter trees, the loader's and NSS's
configuration, every directory on the image's PATH, root's tool directories. Stage III runs the
reference solution and records what it changed there (`learn`); the completion test carries that
record (bundle.Verifier.allowed), so that an honest agent may make the same changes: install the
same tool, edit the same configuration. A file among what grading itself loads (the interpreter's
trees: a reference that installs a Python package) must then also be the reference's, byte for
byte (its sha256), or it is tampering too: grading would run the agent's version of it.

Bytecode caches are not tampering (Python writes them as it imports); where the agent changed any
among what grading loads, the verifier reads none of them (`own_caches` False). /etc/passwd and
/etc/group are the agent's to edit, but must stay regular files: the engine reads them at every
container start and exec (a FIFO there would hang the verifier).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field

CACHE_DIR = "__pycache__"
IDENTITY_FILES = ("/etc/passwd", "/etc/group")
IDENTITY_LIMIT = 4 * 1024 * 1024
HASH_LIMIT = 256 * 1024 * 1024
SHOWN = 8  # changed paths named in a verdict's detail


@dataclass(frozen=True)
class Finding:
    tampered: tuple[str, ...] = ()  # what the agent changed that it may not, first few
    tampered_count: int = 0
    own_caches: bool = True  # no bytecode cache among what grading loads was changed
    # (learning from the reference) system path -> sha256 where grading loads it, else ""
    changed: dict[str, str] = field(default_factory=dict)
    why: str = ""  # what makes the first tampered path tampering

    def detail(self) -> str:
        """One line for the verdict: what was changed, and why that is not allowed."""
        if not self.tampered:
            return ""
        more = self.tampered_count - len(self.tampered)
        listed = ", ".join(self.tampered) + (f" and {more} more" if more > 0 else "")
        return f"tampering: the agent changed {listed} ({self.why})"


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def is_cache(path: str) -> bool:
    """A bytecode cache directory or what is in one: a path with a `__pycache__` component.
    Not a name that merely contains it: a site directory's `__pycache__.pth` runs its `import`
    lines in every interpreter that starts."""
    return CACHE_DIR in path.split("/")


def check(
    changes: list[dict],
    *,
    system: list[str],
    protected: list[str],
    allowed: dict[str, str],
    upper: str,
    learn: bool = False,
) -> Finding:
    """Hold `changes` (changes.py: {"Path", "Kind"}, the engine's own left out) against the
    system locations. `allowed`: what the reference changed (path -> sha256 or ""); `upper`:
    the container's overlay upper directory ("" where changes came from `docker diff`: a file
    grading loads then cannot be compared, and is tampering if changed). `learn`: the
    reference's own run: its changes are returned as `changed`, none is tampering."""
    paths = [str(c.get("Path", "")) for c in changes]
    parents = {p.rsplit("/", 1)[0] or "/" for p in paths}
    kinds: dict[str, set] = {}
    for change in changes:
        kinds.setdefault(str(change.get("Path", "")), set()).add(change.get("Kind"))
    tampered: list[str] = []
    why = ""
    own_caches = True
    changed: dict[str, str] = {}
    for path in sorted(set(paths)):
        if is_cache(path):
            own_caches = own_caches and not any(inside(path, p) for p in protected)
            continue
        if path in IDENTITY_FILES:
            problem = _identity_problem(upper, path, kinds[path])
            if problem:
                tampered.append(path)
                why = why or problem
            continue
        if path in parents and kinds[path] == {0}:
            continue  # a directory whose entries are listed (copied up for them)
        loaded = any(inside(path, p) for p in protected)
        reached = [*system, *protected]  # (or it changed a directory on the way to one)
        if not loaded and not any(inside(path, s) or inside(s, path) for s in reached):
            continue
        if learn:
            changed[path] = _digest(upper, path) if loaded else ""
            continue
        expected = allowed.get(path)
        if expected is None:
            tampered.append(path)
            why = why or "a system location the task's reference solution leaves as it is"
        elif expected and (expected == "?" or _digest(upper, path) != expected):
            tampered.append(path)
            why = why or "grading loads it, and it is not the reference solution's"
    return Finding(tuple(tampered[:SHOWN]), len(tampered), own_caches, changed, why)


def _digest(upper: str, path: str) -> str:
    """sha256 of what is at `path` in the upper directory (a link: of where it leads; a
    directory or a deleted file: of its kind), or "?" where it cannot be read."""
    if not upper:
        return "?"
    where = os.path.join(upper, path.lstrip("/"))
    try:
        info = os.lstat(where)
        if stat.S_ISLNK(info.st_mode):
            return "link:" + hashlib.sha256(os.fsencode(os.readlink(where))).hexdigest()
        if stat.S_ISDIR(info.st_mode):
            return "directory"
        if not stat.S_ISREG(info.st_mode):
            return "special"  # (a whiteout: deleted)
        if info.st_size > HASH_LIMIT:
            return "?"
        digest = hashlib.sha256()
        with open(where, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return "?"


def _identity_problem(upper: str, path: str, kinds: set) -> str:
    """Why a changed /etc/passwd or /etc/group would break the engine, or ""."""
    if not upper or kinds == {2}:
        return ""  # (deleted: the engine does without; unreadable here: not judged)
    try:
        info = os.lstat(os.path.join(upper, path.lstrip("/")))
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is no longer a regular file"
    if info.st_size > IDENTITY_LIMIT:
        return f"{path} is larger than {IDENTITY_LIMIT // 2**20} MiB"
    return ""


def read_only(system: list[str]) -> list[str]:
    """The system locations as the verifier's read-only paths: none inside another."""
    kept: list[str] = []
    for path in sorted(set(system)):
        if path != "/" and path.startswith("/") and not any(inside(path, k) for k in kept):
            kept.append(path)
    return kept
