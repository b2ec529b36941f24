"""The end states the soundness stage grades besides the controls: shortcuts and ablations, each a
root shell script run in a container restored to the initial state, then graded.

Shortcuts never do the task, so a test that passes one is hackable:
- `stub:empty`, `stub:junk-line`, `stub:input-copy`: every file the reference created or changed
  (and named paths it would write), with its layout, modes and deletions, but wrong content
  (where the reference wrote exactly that, the junk line instead);
- `touch-outputs`: those files merely touched (when that differs from the reference and stubs);
- `chmod-all`: everything the agent owns made 777 (not when the reference sets modes);
- `setup-only`: only the reference's leading setup steps (mkdir, cd, plain variables);
- `tamper:conftest`: pytest hooks planted where a naive grader would load them.

Ablations are the reference with one top-level step removed; a step may be redundant, so they
measure the test's strength and never reject.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from typing import Any

from endless_assets.agent.policies import solution_command
from endless_assets.models import Task
from endless_assets.sandbox.containers.snapshot import STATE_DIR, Changes, Snapshot
from endless_assets.stages.soundness.script_steps import ablatable, is_setup, split_steps

SHORTCUT = "shortcut"
ABLATION = "ablation"
JUNK_LINE = "endless soundness probe: not the answer\n"
EMPTY_SHA = hashlib.sha256(b"").hexdigest()
JUNK_SHA = hashlib.sha256(JUNK_LINE.encode()).hexdigest()
MAX_TARGETS = 200  # stub files per probe (a reference that unpacks thousands: the first ones)
_PATH = re.compile(r"(?<![\w.:/~$-])/(?:[\w.+@%-]+/)*[\w.+@%-]+")
_SETS_MODES = re.compile(r"\b(chmod|umask|setfacl|chattr)\b|\binstall\b[^\n;&|]*\s-m")
CONFTEST = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""


@dataclass(frozen=True)
class Probe:
    name: str
    kind: str  # shortcut | ablation
    script: str  # root shell run after the restore; exit 98 means it could not be applied
    detail: str = ""
    agent_command: str = ""  # then run as the agent (a shell command line), if any


def named_paths(task: Task) -> list[str]:
    """Absolute paths the truth and the instruction name, in order of first mention."""
    texts = [task.instruction, *_strings(task.truth)]
    seen: dict[str, None] = {}
    for text in texts:
        for match in _PATH.findall(text):
            seen.setdefault(match.rstrip("."), None)
    return list(seen)[:500]


def ablations(task: Task) -> list[Probe]:
    """The reference with each ablatable top-level step removed in turn; none for a reference
    of one step."""
    steps = split_steps(task.reference_solution)
    if len(steps) < 2:
        return []
    probes = []
    for i, step in enumerate(steps):
        if not ablatable(step):
            continue
        rest = "\n".join(s for j, s in enumerate(steps) if j != i)
        first_line = step.splitlines()[0][:80]
        probes.append(
            Probe(
                f"ablation:{i + 1}/{len(steps)}",
                ABLATION,
                "",
                f"without: {first_line}",
                agent_command=solution_command(rest),
            )
        )
    return probes


def hash_requests(task: Task, snapshot: Snapshot, changes: Changes) -> tuple[list, list]:
    """What `shortcut_probes` needs hashed: the files the reference wrote (as it left them),
    and as they were before, with the input a stub may copy."""
    written = [e.path for e in _targets(task, snapshot, changes) if e.path in changes.final]
    before = [p for p in written if p in snapshot.listing]
    source = _input_file(task, snapshot, changes)
    return written, [*before, source] if source else before


def shortcut_probes(task: Task, snapshot: Snapshot, changes: Changes) -> list[Probe]:
    """The shortcut probes for this task, given what the reference run changed (with the
    hashes of `hash_requests` in `changes`)."""
    uid, gid = snapshot.agent.uid, snapshot.agent.gid
    targets = _targets(task, snapshot, changes)
    new_dirs = sorted(
        (e for p, e in changes.changed.items() if e.kind == "d" and p not in snapshot.listing),
        key=lambda e: e.path,
    )
    probes: list[Probe] = []
    source = _input_file(task, snapshot, changes) if targets else ""
    source_entry = snapshot.listing.get(source)
    junk_size = len(JUNK_LINE.encode())
    variants = [("empty", EMPTY_SHA, 0, "empty files"), ("junk-line", JUNK_SHA, junk_size, "")]
    if source_entry is not None:
        source_sha = changes.initial_hashes.get(source)
        variants.append(("input-copy", source_sha, source_entry.size, f"copies of {source}"))
    junk, content, empty = (f"{STATE_DIR}/{n}" for n in ("junk", "content", "empty"))
    for name, sha, size, what in variants if targets else []:
        lines = ["set -e", *_mkdirs(new_dirs, gid), f"printf %s {_q(JUNK_LINE)} > {junk}"]
        lines.append(f": > {empty}")
        if name == "input-copy":
            lines.append(f"cat -- {_q(source)} > {content}")
        else:
            lines.append(f"cp {junk if name == 'junk-line' else empty} {content}")
        # Where this content is what the reference left, it is not wrong: another instead.
        fallback, swapped = (empty if name == "junk-line" else junk), 0
        for entry in targets:
            same = _same(changes, entry, sha, size)
            swapped += same
            lines.append(f"cat {fallback if same else content} > {_q(entry.path)}")
            lines += _owner_mode(entry, gid, new=entry.path not in snapshot.listing)
        lines += [f"rm -rf -- {_q(p)}" for p in changes.deleted]
        what = what or "one junk line"
        if swapped:
            what += f" ({swapped} otherwise: the reference's own content)"
        detail = f"{len(targets)} file(s) as {what}, {len(changes.deleted)} deletion(s)"
        probes.append(Probe(f"stub:{name}", SHORTCUT, _applied(lines), detail))
    if _touch_differs(targets, snapshot, changes):
        lines = ["set -e", *_mkdirs(new_dirs, gid)]
        for entry in targets:
            lines.append(f"touch -- {_q(entry.path)}")
            if entry.path not in snapshot.listing:
                lines.append(f"chown {uid}:{gid} -- {_q(entry.path)}")
        probes.append(Probe("touch-outputs", SHORTCUT, _applied(lines), f"{len(targets)} file(s)"))
    if snapshot.roots and not _SETS_MODES.search(task.reference_solution):
        roots = " ".join(shlex.quote(r) for r in snapshot.roots)
        chmod = f"find {roots} -uid {uid} ! -type l -exec chmod 777 {{}} + 2>/dev/null"
        probes.append(Probe("chmod-all", SHORTCUT, chmod + "\ntrue\n", "everything the agent owns"))
    steps = split_steps(task.reference_solution)
    setup: list[str] = []
    for step in steps:
        if not is_setup(step):
            break
        setup.append(step)
    if setup and len(setup) < len(steps):
        command = solution_command("\n".join(setup))
        detail = f"{len(setup)} of {len(steps)} steps"
        probes.append(Probe("setup-only", SHORTCUT, "", detail, agent_command=command))
    tamper = _tamper(snapshot.agent.home, uid, gid)
    probes.append(Probe("tamper:conftest", SHORTCUT, tamper, "conftest.py and pytest.ini"))
    return probes


def _targets(task: Task, snapshot: Snapshot, changes: Changes) -> list[Any]:
    """Regular files the reference created or changed, then named paths it would write."""
    found = [e for p, e in sorted(changes.changed.items()) if e.kind == "f"]
    chosen = {e.path for e in found}
    for path in named_paths(task):
        if path in chosen or path in changes.final or path in snapshot.listing:
            continue
        parent = path.rsplit("/", 1)[0] or "/"
        dotted = "." in path.rsplit("/", 1)[-1]
        if dotted and parent in changes.final and snapshot.under_roots(path):
            found.append(_NewFile(path, uid=snapshot.agent.uid))
            chosen.add(path)
    named = set(named_paths(task))
    found.sort(key=lambda e: (e.path not in named, e.path))
    return found[:MAX_TARGETS]


@dataclass(frozen=True)
class _NewFile:
    """A named path nobody created: a plain file of the agent's."""

    path: str
    uid: int
    kind: str = "f"
    mode: int = 0o644
    size: int = 0


def _input_file(task: Task, snapshot: Snapshot, changes: Changes) -> str:
    """An input file to copy: a named file of the initial state the reference left as it was,
    else the largest (non-hidden) file of the agent's home in the initial state."""
    for path in named_paths(task):
        entry = snapshot.listing.get(path)
        if entry and entry.kind == "f" and path not in changes.changed:
            return path
    prefix = snapshot.agent.home.rstrip("/") + "/"
    home = [
        e
        for p, e in snapshot.listing.items()
        if e.kind == "f" and p.startswith(prefix) and "/." not in "/" + p[len(prefix) :]
    ]
    return max(home, key=lambda e: (e.size, e.path)).path if home else ""


def _same(changes: Changes, entry: Any, sha: str | None, size: int) -> bool:
    """Would content with this hash (and size) be what the reference left at `entry`? Unknown
    hashes (too large to hash) compare by size."""
    ref = changes.final_hashes.get(entry.path, "")
    if ref == "" and entry.path not in changes.final_hashes:
        return False  # the reference did not write it (a named path, or not hashed)
    if ref is None or sha is None:
        return size == changes.final.get(entry.path, entry).size
    return ref == sha


def _touch_differs(targets: list[Any], snapshot: Snapshot, changes: Changes) -> bool:
    """Is touching the targets a state other than the reference's and the empty stubs'? Only
    where the reference changed files that were there (touching keeps their old content), or
    deleted some; and not if each touched file would hold what the reference left in it."""
    existing = [e for e in targets if e.path in snapshot.listing]
    if not existing and not changes.deleted:
        return False
    for entry in targets:
        old = changes.initial_hashes.get(entry.path) if entry.path in snapshot.listing else None
        sha = old if entry.path in snapshot.listing else EMPTY_SHA
        size = snapshot.listing[entry.path].size if entry.path in snapshot.listing else 0
        if not _same(changes, entry, sha, size):
            return True
    return bool(changes.deleted)


def _q(path: str) -> str:
    return shlex.quote(path)


def _mkdirs(dirs: list[Any], gid: int) -> list[str]:
    lines = []
    for entry in dirs:
        path = shlex.quote(entry.path)
        lines += [f"mkdir -p -- {path}", *_owner_mode(entry, gid, new=True)]
    return lines


def _owner_mode(entry: Any, gid: int, *, new: bool) -> list[str]:
    """Give a written path the reference's mode, and a new one the reference's owner."""
    path = shlex.quote(entry.path)
    lines = [f"chmod {entry.mode:o} -- {path}"]
    if new:
        lines.insert(0, f"chown {entry.uid}:{gid} -- {path}")
    return lines


def _applied(lines: list[str]) -> str:
    """Run `lines` in a subshell; exit 98 if any of them failed (the probe was not applied)."""
    body = "\n".join(lines)
    return f"(\n{body}\n) || exit 98\n"


def _tamper(home: str, uid: int, gid: int) -> str:
    home = home.rstrip("/")
    files = {
        f"{home}/conftest.py": CONFTEST,
        "/tmp/conftest.py": CONFTEST,
        f"{home}/pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
    }
    lines = ["set -e"]
    for path, text in files.items():
        lines.append(f"printf %s {shlex.quote(text)} > {shlex.quote(path)}")
        lines.append(f"chown {uid}:{gid} {shlex.quote(path)}")
    return _applied(lines)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []
