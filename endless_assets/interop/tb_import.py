"""Reading Terminal-Bench 1.x task directories, without converting them with Harbor first.

A directory holds `task.yaml` (instruction and metadata), a `Dockerfile` (or the one a single
service of `docker-compose.yaml` builds), `run-tests.sh`, `tests/` and `solution.sh`. It is read
the way Harbor's own mapper (`harbor task migrate`) converts it, so that both routes give the
same task:

- the environment is the Dockerfile, plus what the compose service sets (`environment`,
  `working_dir`, `entrypoint`) as Dockerfile lines, plus `ENV TEST_DIR=/tests`; its build
  context is every other file of the directory (and `tests/` or `solution.sh` when the
  Dockerfile copies them);
- grading is `run-tests.sh` with Harbor's reward ending (reward 1 when it exits 0), run with
  `tests/` copied to /tests at grading only, within `max_test_timeout_sec`;
- the agent, the oracle and the do-nothing control run as the image's USER in its WORKDIR;
- everything in task.yaml but the instruction is kept (source_metadata), and its category and
  difficulty become the task's.

A compose file with more than one service (a task that needs a database, a web server...):
`client` is the agent's, the others are its services (compose.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from endless_assets.interop.compose import (
    check_keys,
    compose_path,
    read_services,
    service_spec,
    without_contexts,
)
from endless_assets.interop.harbor_import import (
    HarborTask,
    checked_dockerfile,
    pytest_file,
    solution_body,
)
from endless_assets.interop.import_files import (
    DEFAULT_MAX_BINARY_BYTES,
    ImportProblem,
    checked,
    read_text,
    read_tree,
    regular_files,
)
from endless_assets.sandbox.grading.bundle import Verifier, pack

# Harbor's mapper appends this to run-tests.sh (harbor/mappers/terminal_bench.py).
REWARD_ENDING = """
_EXIT_CODE=$?
if [ $_EXIT_CODE -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
exit $_EXIT_CODE
"""
DEFAULT_TEST_TIMEOUT = 60.0  # Terminal-Bench's max_test_timeout_sec default
_TB_VOLUMES = {
    "${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}",
    "${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}",
}
_TB_ENV = {"TEST_DIR=${T_BENCH_TEST_DIR}"}
_OWN_FILES = ("task.yaml", "solution.sh", "run-tests.sh", "tests", "docker-compose.yaml")
_OWN_FILES += ("docker-compose.yml", "solution.yaml")
AGENT_SERVICE = "client"  # Terminal-Bench's name for the agent's container


def is_tb_dir(path: Path) -> bool:
    return (path / "task.yaml").is_file() and not (path / "instruction.md").exists()


def _services(directory: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The agent's service of docker-compose.yaml (the only one, else `client`) and the others
    ({} and {} without a compose file)."""
    path = compose_path(directory)
    if path is None:
        return {}, {}
    services = read_services(path, directory)
    name = next(iter(services), "") if len(services) <= 1 else AGENT_SERVICE
    if name and name not in services:
        raise ImportProblem(
            f"{path.name} has {len(services)} services ({', '.join(sorted(services))}) and "
            f"none is `{AGENT_SERVICE}`, the agent's"
        )
    agent = services.pop(name, {})
    check_keys(name, {k: v for k, v in agent.items() if k != "volumes"})  # (volumes: below)
    return agent, services


def _additions(service: dict[str, Any]) -> list[str]:
    """What the compose service sets, as Dockerfile lines (as Harbor's mapper writes them)."""
    volumes = service.get("volumes") or []
    extra = [v for v in volumes if str(v).strip() not in _TB_VOLUMES]
    if extra:
        raise ImportProblem(
            f"docker-compose.yaml mounts {', '.join(map(str, extra))}: host volumes are not "
            "supported"
        )
    lines = ["ENV TEST_DIR=/tests"]
    env = service.get("environment") or []
    items = env.items() if isinstance(env, dict) else [str(e).partition("=")[::2] for e in env]
    for key, value in items:
        if f"{key}={value}" in _TB_ENV or key == "TEST_DIR":
            continue
        lines.append(f"ENV {key}={value}" if value is not None else f"ENV {key}")
    workdir = service.get("working_dir")
    if workdir and "${" not in str(workdir):
        lines.append(f"WORKDIR {workdir}")
    entrypoint = service.get("entrypoint")
    if entrypoint:
        listed = entrypoint if isinstance(entrypoint, list) else [entrypoint]
        lines.append(f"ENTRYPOINT {json.dumps([str(e) for e in listed])}")
    return lines


def _build(directory: Path, service: dict[str, Any]) -> tuple[Path, str]:
    """The build context directory and the Dockerfile's name in it."""
    build = service.get("build") or {}
    if isinstance(build, str):
        build = {"context": build}
    context = directory / str(build.get("context") or ".")
    name = str(build.get("dockerfile") or "Dockerfile")
    if not context.resolve().is_relative_to(directory.resolve()):
        raise ImportProblem(f"docker-compose.yaml builds from outside the task ({context})")
    return context, name


def read_tb_dir(directory: Path, *, max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES) -> HarborTask:
    directory = Path(directory)
    checked(directory, directory)
    regular_files(directory, directory)  # every file is a regular file, before anything is read
    try:
        config = yaml.safe_load(read_text(directory / "task.yaml", directory)) or {}
    except yaml.YAMLError as exc:
        raise ImportProblem(f"task.yaml does not parse: {exc}") from exc
    if not isinstance(config, dict) or not str(config.get("instruction") or "").strip():
        raise ImportProblem("task.yaml has no instruction")
    if os.path.lexists(directory / "solution.yaml"):
        raise ImportProblem("solution.yaml is not supported (convert it to solution.sh)")
    if not (directory / "run-tests.sh").is_file():
        raise ImportProblem("no run-tests.sh")
    service, others = _services(directory)
    specs = [
        service_spec(
            name,
            config,
            directory,
            directory,
            max_binary_bytes=max_binary_bytes,
            skip=_OWN_FILES,
            agent=AGENT_SERVICE,
        )
        for name, config in others.items()
    ]
    context, name = _build(directory, service)
    if not (context / name).is_file():
        raise ImportProblem(f"no {(context / name).relative_to(directory).as_posix()}")
    dockerfile = checked_dockerfile(read_text(context / name, directory), name)
    copies = dockerfile.replace("./", "")
    skip = list(_OWN_FILES)
    if any(f"{verb} tests" in copies for verb in ("COPY", "ADD")):
        skip.remove("tests")
    if any(f"{verb} solution.sh" in copies for verb in ("COPY", "ADD")):
        skip.remove("solution.sh")
    files = read_tree(context, directory, max_binary_bytes=max_binary_bytes, skip=tuple(skip))
    files.pop(name)
    without_contexts(files, specs)
    dockerfile = dockerfile.rstrip("\n") + "\n\n# Mapped from docker-compose.yaml\n"
    dockerfile += "\n".join(_additions(service)) + "\n"
    tests = directory / "tests"
    found = (
        read_tree(tests, directory, max_binary_bytes=max_binary_bytes, drop_pycache=True)
        if tests.is_dir()
        else None
    )
    text = dict(found.text) if found else {}
    test_name = pytest_file(list(text), "tests/")
    run_tests = read_text(directory / "run-tests.sh", directory)
    text["test.sh"] = run_tests.rstrip("\n") + "\n" + REWARD_ENDING
    verifier = Verifier(
        test=text.pop(test_name, "") if test_name else "",
        test_name=test_name or "test_outputs.py",
        script="test.sh",
        files=text,
        binary=found.binary if found else {},
        timeout=float(config.get("max_test_timeout_sec") or DEFAULT_TEST_TIMEOUT),
    )
    solve = directory / "solution.sh"
    solution = solution_body(read_text(solve, directory)) if solve.is_file() else ""
    metadata = {k: v for k, v in config.items() if k != "instruction"}
    return HarborTask(
        directory=directory,
        instruction=str(config["instruction"]).rstrip("\n"),
        dockerfile=dockerfile,
        context_files=files.text,
        completion_test=pack(verifier),
        initial_test=None,
        reference_solution=solution,
        metadata=metadata,
        truth={},
        binary_files=files.binary,
        executable_files=sorted(files.executable - {name}),
        config=json.loads(json.dumps(metadata, default=str)),
        agent_user="",
        workdir="",
        source_format="terminal-bench",
        services=specs,
    )
