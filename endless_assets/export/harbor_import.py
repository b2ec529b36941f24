"""Reading Harbor task directories back into tasks (our own exports and others', e.g. the public
release of the paper's tasks).

What a directory must hold, and where each part of a task comes from:

- instruction: `instruction.md` (required);
- environment: `environment/Dockerfile` (required) and every other file under `environment/` as
  its build context (text files only; a `docker-compose.yaml` is refused);
- completion test: the one pytest file under `tests/`: `test_final_state.py`, else
  `test_outputs.py`, else the only `test_*.py` there;
- initial-state test: `tests/test_initial_state.py` or `environment/test_initial_state.py`; if
  neither exists a trivial one is generated (the image's working directory exists);
- reference solution: `solution/solve.sh` (optional: without one, stage III cannot require it
  and the solver decides);
- metadata: `task.toml` `[metadata]` (category, complexity or difficulty, scenario, family,
  generator, truth) and `environment/task.json` (`truth`, the paper's layout).

Only regular files are read: a symbolic link (it may point outside the task) or a special file
(a FIFO blocks its reader forever) in environment/, tests/ or solution/, or as one of them, is
refused without being followed or opened.

A directory that cannot be read raises `ImportProblem` with the reason; the caller records it
and goes on with the others.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from endless_assets.export.dockerfile import DockerfileError, base_images

MAX_CONTEXT_BYTES = 20 * 1024 * 1024
COMPLETION_TEST_NAMES = ("test_final_state.py", "test_outputs.py")
INITIAL_TEST_NAME = "test_initial_state.py"
# Files of a Harbor task's tests/ that are not the completion test (endless_grader.py: written by
# our own export, which runs it from test.sh).
_IGNORED_TEST_FILES = {
    "test.sh",
    INITIAL_TEST_NAME,
    "__init__.py",
    "conftest.py",
    "endless_grader.py",
}
_BASH_SHEBANG = re.compile(r"^#!\s*(/usr/bin/env\s+)?(/usr)?(/bin/)?(ba)?sh\b[^\n]*\n?")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(/\S*)\s*$", re.IGNORECASE | re.MULTILINE)


class ImportProblem(Exception):
    """A task directory that cannot be imported; the message says why."""


@dataclass
class HarborTask:
    directory: Path
    instruction: str
    dockerfile: str
    context_files: dict[str, str]
    completion_test: str
    initial_test: str | None  # None: the directory has none (a trivial one is generated)
    reference_solution: str
    metadata: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)

    @property
    def base_images(self) -> list[str]:
        return base_images(self.dockerfile)


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and (
        (path / "instruction.md").exists()
        or (path / "task.toml").exists()
        or (path / "environment").is_dir()
    )


def find_task_dirs(source: Path) -> list[Path]:
    """The task directories in `source`: itself if it is one, else its subdirectories."""
    source = Path(source)
    if not source.is_dir():
        raise ImportProblem(f"{source} is not a directory")
    if is_task_dir(source):
        return [source]
    return sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _checked(path: Path, where: Path) -> os.stat_result:
    """`path`'s own status (lstat: a link is not followed, nothing is opened); ImportProblem if it
    is a symbolic link (it may point outside the task) or a special file (reading a FIFO blocks
    forever, a device never ends)."""
    info = path.lstat()
    name = path.relative_to(where).as_posix() if path != where else path.name
    if stat.S_ISLNK(info.st_mode):
        raise ImportProblem(f"{name} is a symbolic link (not supported)")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        kind = next((k for test, k in _SPECIAL if test(info.st_mode)), "a special file")
        raise ImportProblem(f"{name} is {kind} (only regular files are supported)")
    return info


def _regular_files(path: Path, where: Path) -> list[Path]:
    """`path` if it is a file, else every file under it: a symbolic link or a special file, the
    directory itself or anywhere under it, is refused, never followed or opened."""
    files: list[Path] = []
    pending = [path]
    while pending:  # not recursive: a task may nest directories deeper than Python's stack
        current = pending.pop()
        if not stat.S_ISDIR(_checked(current, where).st_mode):
            files.append(current)
            continue
        with os.scandir(current) as entries:
            pending += sorted((Path(entry.path) for entry in entries), reverse=True)
    return files


def _read_text(path: Path, where: Path) -> str:
    _checked(path, where)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportProblem(
            f"{path.relative_to(where)} is not UTF-8 text (binary files are not supported)"
        ) from exc


def _files_under(directory: Path, where: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    total = 0
    for path in _regular_files(directory, where):
        total += path.lstat().st_size
        if total > MAX_CONTEXT_BYTES:
            raise ImportProblem(
                f"{directory.relative_to(where)}/ holds more than "
                f"{MAX_CONTEXT_BYTES // (1024 * 1024)} MiB of files"
            )
        files[path.relative_to(directory).as_posix()] = _read_text(path, where)
    return files


def read_metadata(directory: Path) -> dict[str, Any]:
    config = directory / "task.toml"
    if not os.path.lexists(config):
        return {}
    try:
        data = tomllib.loads(_read_text(config, directory))
    except tomllib.TOMLDecodeError as exc:
        raise ImportProblem(f"task.toml does not parse: {exc}") from exc
    metadata = data.get("metadata", {})
    return metadata if isinstance(metadata, dict) else {}


def _truth(metadata: dict[str, Any], context_files: dict[str, str]) -> dict[str, Any]:
    raw: Any = metadata.get("truth")
    if raw is None and "task.json" in context_files:
        try:
            raw = json.loads(context_files["task.json"]).get("truth")
        except (json.JSONDecodeError, AttributeError):
            raw = None
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return {"text": raw}
        return parsed if isinstance(parsed, dict) else {"value": parsed}
    return raw if isinstance(raw, dict) else {"value": raw}


def _completion_test(tests: Path, directory: Path) -> str:
    if not tests.is_dir():
        raise ImportProblem("no tests/ directory")
    for name in COMPLETION_TEST_NAMES:
        if (tests / name).is_file():
            chosen = tests / name
            break
    else:
        candidates = sorted(p for p in tests.glob("test_*.py") if p.name not in _IGNORED_TEST_FILES)
        if not candidates:
            raise ImportProblem(
                "tests/ has no pytest file (test_final_state.py, test_outputs.py or test_*.py); "
                "tasks graded only by a shell script are not supported"
            )
        if len(candidates) > 1:
            raise ImportProblem(
                f"tests/ has {len(candidates)} pytest files "
                f"({', '.join(p.name for p in candidates)}); cannot tell which is the "
                "completion test"
            )
        chosen = candidates[0]
    support = sorted(
        p.relative_to(tests).as_posix()
        for p in tests.rglob("*")
        if p.is_file()
        and p != chosen
        and p.name not in _IGNORED_TEST_FILES
        and "__pycache__" not in p.parts
    )
    if support:
        raise ImportProblem(
            f"tests/ carries files besides the test ({', '.join(support[:5])}); the completion "
            "test runs on its own, so it cannot use them"
        )
    return _read_text(chosen, directory)


def solution_body(script: str) -> str:
    """The reference solution as bash: a bash/sh shebang line is dropped (the oracle runs the
    solution with bash); a script for another interpreter is written to a file and run."""
    if not script.startswith("#!"):
        return script
    match = _BASH_SHEBANG.match(script)
    if match:
        return script[match.end() :]
    delimiter = "ENDLESS_IMPORTED_SOLUTION"
    return (
        f"cat > /tmp/endless-solve <<'{delimiter}'\n{script.rstrip()}\n{delimiter}\n"
        "chmod +x /tmp/endless-solve && /tmp/endless-solve\n"
    )


def trivial_initial_test(dockerfile: str) -> str:
    """For tasks that ship no initial-state test: the image's working directory exists."""
    workdirs = [w for w in _WORKDIR.findall(dockerfile) if "$" not in w]
    workdir = workdirs[-1] if workdirs else "/home/user"
    return (
        '"""Generated on import: the task shipped no initial-state test."""\n\n'
        "import os\n\n\n"
        "def test_working_directory_exists():\n"
        f"    assert os.path.isdir({workdir!r})\n"
    )


def read_harbor_dir(directory: Path) -> HarborTask:
    directory = Path(directory)
    _checked(directory, directory)
    # Everything that is read comes from inside the task, as regular files: the directories read
    # whole are checked first, and every file read on its own is checked as it is read.
    for part in ("environment", "tests", "solution"):
        if os.path.lexists(directory / part):
            _regular_files(directory / part, directory)
    instruction_path = directory / "instruction.md"
    if not os.path.lexists(instruction_path):
        raise ImportProblem("no instruction.md")
    instruction = _read_text(instruction_path, directory).rstrip("\n")
    if not instruction.strip():
        raise ImportProblem("instruction.md is empty")
    environment = directory / "environment"
    if not (environment / "Dockerfile").is_file():
        raise ImportProblem("no environment/Dockerfile")
    if (environment / "docker-compose.yaml").exists() or (
        environment / "docker-compose.yml"
    ).exists():
        raise ImportProblem(
            "environment/docker-compose.yaml (multi-container tasks) is not supported"
        )
    files = _files_under(environment, directory)
    dockerfile = files.pop("Dockerfile")
    try:
        if not base_images(dockerfile):
            raise ImportProblem("environment/Dockerfile has no FROM line")
    except DockerfileError as exc:
        raise ImportProblem(f"environment/Dockerfile: {exc}") from exc
    metadata = read_metadata(directory)
    tests = directory / "tests"
    completion_test = _completion_test(tests, directory)
    initial_test: str | None = None
    for candidate in (tests / INITIAL_TEST_NAME, environment / INITIAL_TEST_NAME):
        if candidate.is_file():
            initial_test = _read_text(candidate, directory)
            break
    solve = directory / "solution" / "solve.sh"
    solution = solution_body(_read_text(solve, directory)) if solve.is_file() else ""
    return HarborTask(
        directory=directory,
        instruction=instruction,
        dockerfile=dockerfile,
        context_files=files,
        completion_test=completion_test,
        initial_test=initial_test,
        reference_solution=solution,
        metadata=metadata,
        truth=_truth(metadata, files),
    )
