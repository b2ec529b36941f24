"""The grader's program: the one text that runs inside a container (`python3 -I -B -c`), and in
an exported task as tests/endless_grader.py.

It is written in four parts, each a section of the one program (standard library only, nothing
imported from the host's package), joined here in their order: the self-description, the fence,
the script route, then the grader proper (grader.py, whose `main` runs it). A part may use what
any part defines. They are read as package data, never imported on the host.
"""

from __future__ import annotations

from importlib import resources

PARTS = ("grader_describe.py", "grader_fence.py", "grader_script.py", "grader.py")


def grader_source() -> str:
    """The parts, joined in their order."""
    files = resources.files(__package__)
    return "\n".join(files.joinpath(name).read_text(encoding="utf-8") for name in PARTS)


GRADER_SOURCE = grader_source()
