"""Where an imported batch's validation spends its time: the describe, build and validation stages
of the conventions import.

Imported tasks (Harbor, Terminal-Bench) are graded by their own scripts, and a root agent's verdict
too is given in a verifier container (sandbox/grading/verifier.py): commit, a new container, a
grader in it, the script. This materializes the mixed-conventions directory of
tests/support/conventions.py (13 tasks: root agents, task.toml users, tests/test.sh, a
Terminal-Bench compose task...) through imported task_descriptions, task_environments and
completion_tests with `workers=2`, and prints the wall clock and, per step of a verdict, how often
it ran and its mean wall time (threads overlap: the totals add up to more than the wall).

    .venv/bin/python bench/import_validation_cost.py
"""

from __future__ import annotations

import collections
import contextlib
import functools
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
import conventions_import as conventions

from endless_assets.defs.imports import IMPORTED_ASSETS
from endless_assets.sandbox.containers import container
from endless_assets.sandbox.grading import verdict, verifier

TIMES: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
LOCK = threading.Lock()


def note(name: str, seconds: float) -> None:
    with LOCK:
        TIMES[name][0] += 1
        TIMES[name][1] += seconds


def timed(owner, name: str, label: str | None = None) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            note(label or name, time.monotonic() - started)

    setattr(owner, name, wrapper)


def timed_context(owner, name: str) -> None:
    original = getattr(owner, name)

    @contextlib.contextmanager
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        with original(*args, **kwargs) as value:
            note(f"{name} (start)", time.monotonic() - started)
            yield value
            leaving = time.monotonic()
        note(f"{name} (removal)", time.monotonic() - leaving)

    setattr(owner, name, wrapper)


def main() -> None:
    for name in ("grade_in_verifier", "commit", "tampering", "_script_request"):
        timed(verifier, name)
    timed(verifier, "grader_for", "grader start (verifier)")
    timed(verdict, "grader_for", "grader start (agent's container)")
    timed(verdict._Grader, "ask", "grader request")
    timed(container.TaskContainer, "restart")
    timed_context(verifier, "task_container")
    work = Path(tempfile.mkdtemp(prefix="import-cost-"))
    started = time.monotonic()
    result = conventions.import_conventions(work, IMPORTED_ASSETS[:3])
    print(
        "the describe, build and validation stages of the conventions import: "
        f"{time.monotonic() - started:.1f} s wall, "
        f"{'succeeded' if result.success else 'FAILED'}"
    )
    for name, (count, total) in sorted(TIMES.items(), key=lambda item: -item[1][1]):
        print(f"  {name:34} {count:4d}x  mean {total / count * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
