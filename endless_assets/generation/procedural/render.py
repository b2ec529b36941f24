"""What a family writes into its tests and setup, the same way in every family: the task's
constants at the top of a test, the SHA-256 digests it compares files with, and the setup script
for bytes, links and modes."""

from __future__ import annotations

import base64
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


def kept(test: str, files: str, base: str = "", digest: str = "") -> str:
    """A test part: files still hold the bytes they had. `files` names the test's constant of
    paths (under the constant `base` where given) -> SHA-256; with `digest`, `files` is one
    file's path (an expression) and `digest` the constant with its SHA-256."""
    if digest:
        return f"""
    def {test}():
        with open({files}, "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == {digest}
"""
    name, path = ("rel", f"os.path.join({base}, rel)") if base else ("path", "path")
    return f"""
    def {test}():
        for {name}, digest in {files}.items():
            with open({path}, "rb") as fh:
                assert hashlib.sha256(fh.read()).hexdigest() == digest, {name}
"""


def matched(found: str, names: str, contents: str, key: str = "path") -> str:
    """Test parts: the files `found()` returns (name -> SHA-256) are the constant EXPECTED's
    (test `names`), each with its digest there (test `contents`)."""
    return f"""
    def {names}():
        assert sorted({found}()) == sorted(EXPECTED)


    def {contents}():
        found = {found}()
        for {key}, digest in EXPECTED.items():
            assert found.get({key}) == digest, {key}
"""


EXTRAS = """
import base64
import os
import subprocess

BLOBS = {blobs!r}
LINKS = {links!r}
MODES = {modes!r}
OWNED = {owned!r}

for path, blob in BLOBS.items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(base64.b64decode(blob))
for path, target in LINKS.items():
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)
for root in OWNED:
    subprocess.run(["chown", "-R", "-h", "user:user", root], check=True)
for path, mode in MODES.items():
    os.chmod(path, mode)
"""


def extras_script(
    blobs: Mapping[str, bytes] | None = None,
    links: Mapping[str, str] | None = None,
    modes: Mapping[str, int] | None = None,
    owned: Sequence[str] = (),
) -> str:
    """A setup script (Python, run as root at build time) for what plain text files cannot be:
    files of exact bytes, symbolic links (path -> target), modes (applied last), and the trees
    to hand to the agent (`owned`, chowned without following links). Paths are absolute."""
    values = {
        "blobs": {p: base64.b64encode(b).decode() for p, b in (blobs or {}).items()},
        "links": dict(links or {}),
        "modes": dict(modes or {}),
        "owned": list(owned),
    }
    return dedent(EXTRAS).format(**values)
