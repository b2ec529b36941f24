"""The grader's program, the one text that runs inside a container (`python3 -I -B -c`) and in an
exported task (tests/endless_grader.py): its parts, sections of one program (standard library
and pytest only), joined in their order; read as package data, never imported on the host."""

from __future__ import annotations

from importlib import resources

PARTS = ("grader_describe.py", "grader_fence.py", "grader_script.py", "grader.py")


def part(name: str) -> str:
    """The text of one part (the pytest stand-in runs grader_fence.py's too: offline_keep.py)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


GRADER_SOURCE = "\n".join(map(part, PARTS))
