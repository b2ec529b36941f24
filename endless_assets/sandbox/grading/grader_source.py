"""The grader's program, the one text that runs inside a container (`python3 -I -B -c`) and in an
exported task (tests/endless_grader.py): its parts, sections of one program (standard library
and pytest only), joined in their order; read as package data, never imported on the host."""

from __future__ import annotations

from importlib import resources

PARTS = ("grader_describe.py", "grader_fence.py", "grader_script.py", "grader.py")


def grader_source() -> str:
    """The parts, joined in their order."""
    files = resources.files(__package__)
    return "\n".join(files.joinpath(name).read_text(encoding="utf-8") for name in PARTS)


GRADER_SOURCE = grader_source()
