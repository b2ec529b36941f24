"""What a family writes into its tests, the same way in every family: the task's constants at
the top, and the SHA-256 digests its tests compare files with."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from endless_assets.generation.procedural.base import dedent


def sha256(data: str | bytes) -> str:
    """The hex SHA-256 of bytes or of text (UTF-8): what a family's tests compare a file with."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def constants(values: Mapping[str, Any]) -> str:
    """The task's constants as the head of a test: one `NAME = repr(value)` a line."""
    return "".join(f"{name} = {value!r}\n" for name, value in values.items())


def render_test(imports: Sequence[str], values: Mapping[str, Any], *parts: str) -> str:
    """A family's test file: its imports, the task's constants, then its code (each part
    dedented, two blank lines between parts)."""
    head = "".join(f"import {module}\n" for module in imports) + "\n" + constants(values)
    return head + "".join("\n\n" + dedent(part) for part in parts)
