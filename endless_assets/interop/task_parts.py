"""The parts of a stored task that exports write back out as files: the Dockerfile as the task
had it, its build context as text and bytes, and its own verifier, if it has one.

What the build stage stores is what it built: the task's Dockerfile plus the agent identity labels
(identity.py) for a task whose agent is not ours, and a build context whose binary files are
encoded (images.py). Exports undo both: the identity goes into the format's own field (Harbor's
`[agent] user`), binary files are written as bytes.
"""

from __future__ import annotations

import base64
from pathlib import Path

from endless_assets.interop.dockerfile import replace_base_images
from endless_assets.interop.tasks import validate_all
from endless_assets.models import Task
from endless_assets.sandbox.containers.identity import strip_identity
from endless_assets.sandbox.grading.bundle import Verifier, unpack
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.sandbox.image.images import BINARY_PREFIX, decode_context

SCRIPT_ONLY = "def test_graded_by_its_own_script():\n    pass\n"


def dockerfile(task: Task, base_image: str) -> str:
    """The task's Dockerfile as exported: without our identity labels; FROM our default base
    image (what generated tasks build on) pointed at `base_image`; any other image (a foreign
    task's own, our trixie recipe) left as it is."""
    text = strip_identity(task.dockerfile or "")
    return replace_base_images(text, {base_image_tag(): base_image})


def expected_base_images(task: Task, base_image: str) -> list[str]:
    from endless_assets.interop.dockerfile import base_images

    return base_images(dockerfile(task, base_image))


def context_files(task: Task) -> dict[str, tuple[str | bytes, bool]]:
    """Every build-context file as exported: text as text, the encoded ones (binary or
    executable) as bytes, each with whether it is executable."""
    marked = set(task.executable_files)
    files: dict[str, tuple[str | bytes, bool]] = {}
    for path, value in task.context_files.items():
        if value.startswith(BINARY_PREFIX[:1]):
            data, executable = decode_context(value)
            files[path] = (data, executable or path in marked)
        else:
            files[path] = (value, path in marked)
    for path, data in task.binary_files.items():
        files.setdefault(path, (base64.b64decode(data), path in marked))
    return files


def as_bytes(files: dict[str, tuple[str | bytes, bool]]) -> dict[str, tuple[bytes, bool]]:
    """The same files, all as bytes (to compare what was written with what was meant)."""
    return {p: (c.encode() if isinstance(c, str) else c, x) for p, (c, x) in files.items()}


def read_back(text: dict[str, str], binary: dict[str, str], executable: list[str]):
    """What an importer read (text, base64, executable paths), as `as_bytes` gives it."""
    files: dict[str, tuple[str | bytes, bool]] = {p: (t, p in executable) for p, t in text.items()}
    files.update({p: (base64.b64decode(d), p in executable) for p, d in binary.items()})
    return as_bytes(files)


def verifier(task: Task) -> Verifier | None:
    """The task's own verifier (bundle.py), None for a task graded by one pytest file (which
    may carry what its reference solution changes in the system locations: a comment line)."""
    spec = unpack(task.completion_test)
    return spec if spec is not None and spec.script else None


def validate(tasks: list[Task]) -> None:
    """validate_all, with a task graded by its own script alone (no pytest file) checked as
    such."""
    checked = []
    for task in tasks:
        spec = verifier(task)
        if spec is not None and spec.script and not spec.test.strip():
            task = task.model_copy(update={"completion_test": SCRIPT_ONLY})
        checked.append(task)
    validate_all(checked)


def write_bytes(path: Path, data: bytes, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755 if executable else 0o644)
