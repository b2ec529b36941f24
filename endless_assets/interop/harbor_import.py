"""Reading Harbor task directories back into tasks (our own exports and others', e.g. the public
release of the paper's tasks, or Terminal-Bench tasks converted with `harbor task migrate`).

What a directory must hold, and where each part of a task comes from:

- instruction: `instruction.md` (required);
- environment: `environment/Dockerfile` (required) and every other file under `environment/` as
  its build context: text, or bytes for files that are not; `environment/docker-compose.yaml`:
  the services beside the agent's container (`main`, Harbor's name for it), compose.py;
- grading: `tests/test.sh`, Harbor's verifier, run at grading with the whole `tests/`
  directory copied in only then (bundle.py), its reward read from /logs/verifier; our own
  exports' test.sh (which runs `tests/endless_grader.py`) and a directory without a test.sh are
  graded by their pytest file alone: `test_final_state.py`, else `test_outputs.py`, else the
  only `test_*.py`;
- initial-state test: `tests/test_initial_state.py` or `environment/test_initial_state.py`; if
  neither exists a trivial one is generated (the image's working directory exists);
- reference solution: `solution/solve.sh` (optional: without one, the validation stage cannot
  require it and the solver decides);
- who the agent is: task.toml's `[agent] user`, else the image's USER; where it starts:
  `[environment] workdir`, else the image's WORKDIR (our own exports: `user` in /home/user);
- metadata: all of `task.toml` (kept whole for a faithful export), with `[metadata]` category,
  complexity or difficulty, scenario, family, generator, truth; `[verifier]` timeout_sec, env,
  user; and `environment/task.json` (`truth`, the paper's layout).

A directory that cannot be read raises `ImportProblem` with the reason; the caller records it
and goes on with the others.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from endless_assets.interop.compose import (
    ServiceSpec,
    check_keys,
    compose_path,
    env_map,
    read_services,
    service_spec,
    without_contexts,
)
from endless_assets.interop.dockerfile import DockerfileError, base_images
from endless_assets.interop.import_files import (
    DEFAULT_MAX_BINARY_BYTES,
    Files,
    ImportProblem,
    checked,
    read_text,
    read_tree,
    regular_files,
)
from endless_assets.models import AGENT_HOME, AGENT_USER
from endless_assets.sandbox.grading.bundle import Verifier, pack

COMPLETION_TEST_NAMES = ("test_final_state.py", "test_outputs.py")
INITIAL_TEST_NAME = "test_initial_state.py"
AGENT_SERVICE = "main"  # Harbor's name for the agent's container in a task's compose file
OUR_GRADER = "endless_grader.py"
# Files of our own exports' tests/ that are not the completion test.
_OURS = {"test.sh", INITIAL_TEST_NAME, "__init__.py", "conftest.py", OUR_GRADER}
_BASH_SHEBANG = re.compile(r"^#!\s*(/usr/bin/env\s+)?(/usr)?(/bin/)?(ba)?sh\b[^\n]*\n?")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(/\S*)\s*$", re.IGNORECASE | re.MULTILINE)

__all__ = ["HarborTask", "ImportProblem", "find_task_dirs", "read_harbor_dir", "solution_body"]


@dataclass
class HarborTask:
    """A task directory as read (Harbor's layout, or Terminal-Bench's: tb_import.py)."""

    directory: Path
    instruction: str
    dockerfile: str
    context_files: dict[str, str]
    completion_test: str  # a pytest file, or one that carries the task's own verifier
    initial_test: str | None  # None: the directory has none (a trivial one is generated)
    reference_solution: str
    metadata: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
    binary_files: dict[str, str] = field(default_factory=dict)
    executable_files: list[str] = field(default_factory=list)  # context files with mode +x
    config: dict[str, Any] = field(default_factory=dict)  # the whole task.toml / task.yaml
    agent_user: str = ""  # "": the image's USER
    workdir: str = ""  # "": the image's WORKDIR
    source_format: str = "harbor"
    services: list[ServiceSpec] = field(default_factory=list)  # the compose file's, but the agent's

    @property
    def base_images(self) -> list[str]:
        return base_images(self.dockerfile)


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and (
        (path / "instruction.md").exists()
        or (path / "task.toml").exists()
        or (path / "task.yaml").exists()
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


def read_config(directory: Path) -> dict[str, Any]:
    """task.toml, parsed ({} without one); values TOML has that JSON lacks become strings."""
    config = directory / "task.toml"
    if not os.path.lexists(config):
        return {}
    try:
        data = tomllib.loads(read_text(config, directory))
    except tomllib.TOMLDecodeError as exc:
        raise ImportProblem(f"task.toml does not parse: {exc}") from exc
    return json.loads(json.dumps(data, default=str))


def section(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def truth_of(metadata: dict[str, Any], context_files: dict[str, str]) -> dict[str, Any]:
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


def pytest_file(names: list[str], where: str) -> str:
    """The completion test among a tests directory's files ("" if there is no pytest file)."""
    for name in COMPLETION_TEST_NAMES:
        if name in names:
            return name
    candidates = sorted(
        n for n in names if "/" not in n and re.match(r"test_.*\.py$", n) and n not in _OURS
    )
    if len(candidates) > 1:
        raise ImportProblem(
            f"{where} has {len(candidates)} pytest files ({', '.join(candidates)}); cannot tell "
            "which is the completion test"
        )
    return candidates[0] if candidates else ""


def verifier_of(
    tests: Path,
    directory: Path,
    script: str,
    verifier: dict[str, Any],
    max_binary_bytes: int,
) -> str:
    """The completion test of a tests directory graded by its own `script` (bundle.py)."""
    files = read_tree(tests, directory, max_binary_bytes=max_binary_bytes, drop_pycache=True)
    name = pytest_file(list(files.text), "tests/")
    test = files.text.pop(name, "") if name else ""
    env = verifier.get("env") or {}
    return pack(
        Verifier(
            test=test,
            test_name=name or "test_outputs.py",
            script=script,
            files=files.text,
            binary=files.binary,
            user=str(verifier.get("user") or ""),
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
            timeout=float(verifier.get("timeout_sec") or 0),
        )
    )


def _pytest_only(tests: Path, directory: Path) -> str:
    """The completion test of our own exports and of test.sh-less directories: one pytest file,
    graded alone by our grader, so nothing else may be needed from tests/."""
    names = [
        p.relative_to(tests).as_posix()
        for p in regular_files(tests, directory)
        if "__pycache__" not in p.parts
    ]
    chosen = pytest_file(names, "tests/")
    if not chosen:
        raise ImportProblem(
            "tests/ has no pytest file (test_final_state.py, test_outputs.py or test_*.py) and "
            "no test.sh"
        )
    support = sorted(n for n in names if n != chosen and n.split("/")[-1] not in _OURS)
    if support:
        raise ImportProblem(
            f"tests/ carries files besides the test ({', '.join(support[:5])}) but no test.sh "
            "to use them"
        )
    return read_text(tests / chosen, directory)


def completion_test(
    directory: Path, config: dict[str, Any], max_binary_bytes: int
) -> tuple[str, bool]:
    """(completion test, whether the directory is one of our own exports)."""
    tests = directory / "tests"
    if not tests.is_dir():
        raise ImportProblem("no tests/ directory")
    script = tests / "test.sh"
    ours = (tests / OUR_GRADER).is_file() and script.is_file()
    if ours and OUR_GRADER in read_text(script, directory):
        return _pytest_only(tests, directory), True
    if not script.is_file():
        return _pytest_only(tests, directory), False
    verifier = section(config, "verifier")
    return verifier_of(tests, directory, "test.sh", verifier, max_binary_bytes), False


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


def checked_dockerfile(dockerfile: str, where: str) -> str:
    try:
        if not base_images(dockerfile):
            raise ImportProblem(f"{where} has no FROM line")
    except DockerfileError as exc:
        raise ImportProblem(f"{where}: {exc}") from exc
    return dockerfile


def harbor_services(
    environment: Path, directory: Path, files: Files, max_binary_bytes: int
) -> tuple[list[ServiceSpec], dict[str, str]]:
    """The services of `environment/docker-compose.yaml` but Harbor's agent's, `main` (whose
    image is environment/Dockerfile), and the environment `main` is given; their build contexts
    are left out of the agent's files."""
    path = compose_path(environment)
    if path is None:
        return [], {}
    configs = read_services(path, directory)
    files.text.pop(path.name, None)
    agent = configs.pop(AGENT_SERVICE, {})
    check_keys(AGENT_SERVICE, agent, agent=True)
    specs = [
        service_spec(
            name,
            config,
            environment,
            directory,
            max_binary_bytes=max_binary_bytes,
            agent=AGENT_SERVICE,
        )
        for name, config in configs.items()
    ]
    without_contexts(files, specs)
    return specs, env_map(agent.get("environment"))


def read_harbor_dir(
    directory: Path, *, max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES
) -> HarborTask:
    directory = Path(directory)
    checked(directory, directory)
    # Everything that is read comes from inside the task, as regular files: the directories read
    # whole are checked first, and every file read on its own is checked as it is read.
    for part in ("environment", "tests", "solution"):
        if os.path.lexists(directory / part):
            regular_files(directory / part, directory)
    instruction_path = directory / "instruction.md"
    if not os.path.lexists(instruction_path):
        raise ImportProblem("no instruction.md")
    instruction = read_text(instruction_path, directory).rstrip("\n")
    if not instruction.strip():
        raise ImportProblem("instruction.md is empty")
    environment = directory / "environment"
    if not (environment / "Dockerfile").is_file():
        raise ImportProblem("no environment/Dockerfile")
    files = read_tree(environment, directory, max_binary_bytes=max_binary_bytes)
    services, agent_env = harbor_services(environment, directory, files, max_binary_bytes)
    dockerfile = files.pop("Dockerfile")
    if dockerfile is None:
        raise ImportProblem("environment/Dockerfile is not text")
    checked_dockerfile(dockerfile, "environment/Dockerfile")
    if agent_env:  # what Harbor gives `main` when it starts, as the image's own
        lines = [f"ENV {k}={json.dumps(v)}" for k, v in agent_env.items()]
        dockerfile = dockerfile.rstrip("\n") + "\n" + "\n".join(lines) + "\n"
    config = read_config(directory)
    metadata = section(config, "metadata")
    test, ours = completion_test(directory, config, max_binary_bytes)
    initial_test: str | None = None
    for candidate in (directory / "tests" / INITIAL_TEST_NAME, environment / INITIAL_TEST_NAME):
        if candidate.is_file():
            initial_test = read_text(candidate, directory)
            break
    solve = directory / "solution" / "solve.sh"
    solution = solution_body(read_text(solve, directory)) if solve.is_file() else ""
    agent_user = section(config, "agent").get("user")
    workdir = section(config, "environment").get("workdir")
    if ours and config.get("source") == "endless":  # our own task: our agent, exactly
        agent_user, workdir = agent_user or AGENT_USER, workdir or AGENT_HOME
    return HarborTask(
        directory=directory,
        instruction=instruction,
        dockerfile=dockerfile,
        context_files=files.text,
        completion_test=test,
        initial_test=initial_test,
        reference_solution=solution,
        metadata=metadata,
        truth=truth_of(metadata, files.text),
        binary_files=files.binary,
        executable_files=sorted(files.executable - {"Dockerfile"}),
        config=config,
        agent_user="" if agent_user is None else str(agent_user),
        workdir=str(workdir or ""),
        services=services,
    )
