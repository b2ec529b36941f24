"""Terminal-Bench 1.x task directories, one per kept task.

```
<task_id>/
  task.yaml             instruction, difficulty, category, tags, parser (pytest), timeouts, an
                        `endless:` block with provenance and pass rate, and `quality:` the
                        task's quality record (quality.py; null: not measured)
  Dockerfile            the task image, FROM --base-image, ending as the agent user
  docker-compose.yaml   the standard `client` service, and a task's services beside it, each
                        built from services/<name>/ (compose.py)
  run-tests.sh          runs the completion test with the image's pytest (no network), -rA for
                        Terminal-Bench's pytest parser
  solution.sh           the reference solution
  tests/test_outputs.py the completion test
  tests/endless_grader.py the grader run-tests.sh runs (ours, as in the pipeline)
  <build-context files> beside the Dockerfile, as the Dockerfile expects
```

Terminal-Bench runs the agent, the solution and the tests as the image's user, here root (the
tests need root, e.g. to run a script as the agent user). `solution.sh` runs the reference
solution as `user` (uid 1000, home /home/user), the user it was written and verified for.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

import yaml

from endless_assets.interop import task_parts
from endless_assets.interop.compose_export import compose_files
from endless_assets.interop.harbor import (
    AGENT_TIMEOUT_SEC,
    GRADER_FILE,
    VERIFIER_TIMEOUT_SEC,
    export_dirs,
)
from endless_assets.interop.harbor_import import solution_body
from endless_assets.interop.quality import KEY, QualityRecord, carried
from endless_assets.interop.tasks import ExportError
from endless_assets.interop.tb_import import REWARD_ENDING
from endless_assets.models import AGENT_HOME, AGENT_USER, Task
from endless_assets.sandbox.containers.identity import is_default
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.verdict import GRADER_SOURCE

TEST_FILE = "test_outputs.py"
RESERVED = {"task.yaml", "Dockerfile", "docker-compose.yaml", "run-tests.sh", "solution.sh"}

DOCKER_COMPOSE = """\
services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"""

RUN_TESTS = """\
#!/bin/bash
# Runs the completion test with endless's own grader (tests/endless_grader.py, see the Harbor
# export's test.sh) and the image's own pytest: no network needed (written by endless).
tests="${TEST_DIR:-/tests}"
cd / && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \\
    python3 -I -B "$tests/endless_grader.py" --once "$tests/test_outputs.py" --agent-uid 1000
"""


PYTEST_RUN_TESTS = """\
#!/bin/bash
python3 -m pytest "${TEST_DIR:-/tests}/test_outputs.py" -rA
"""


def task_yaml(task: Task, base_image: str, quality: QualityRecord | None = None) -> str:
    """task.yaml; `quality` is the task's record (None: every value not checked)."""
    record = (quality or QualityRecord()).as_dict()
    original = task.source_metadata.get("config")
    if task.source_metadata.get("format") == "terminal-bench" and isinstance(original, dict):
        data = {"instruction": task.instruction.rstrip("\n"), **original}
        data["endless"] = {**task.provenance(), "base_image": base_image}
        data[KEY] = record  # this lake's record, not the one it came with
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)
    difficulty = task.difficulty if task.difficulty in ("easy", "medium", "hard") else "unknown"
    data: dict[str, Any] = {
        "instruction": task.instruction.rstrip("\n"),
        "author_name": "endless",
        "author_email": "unknown",
        "difficulty": difficulty,
        "category": task.category or "software_engineering",
        "tags": [t for t in (task.family, task.complexity) if t],
        "parser_name": "pytest",
        "max_agent_timeout_sec": AGENT_TIMEOUT_SEC,
        "max_test_timeout_sec": VERIFIER_TIMEOUT_SEC,
        "run_tests_in_same_shell": False,
        "endless": {**task.provenance(), "base_image": base_image},
        KEY: record,
    }
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)


def dockerfile(task: Task, base_image: str) -> str:
    text = task_parts.dockerfile(task, base_image).rstrip("\n")
    if not is_default(task.agent_user, task.workdir):  # Terminal-Bench runs the image's USER
        lines = [text]
        if task.agent_user:
            lines.append(f"USER {task.agent_user}")
        if task.workdir:
            lines.append(f"WORKDIR {task.workdir}")
        return "\n".join(lines) + "\n"
    workdirs = [
        ln.split(None, 1)[1].strip()
        for ln in text.splitlines()
        if ln.strip().upper().startswith("WORKDIR ")
    ]
    if workdirs and workdirs[-1] == AGENT_HOME:
        return f"{text}\n"
    return f"{text}\nWORKDIR {AGENT_HOME}\n"


def solution_script(reference_solution: str) -> str:
    """The reference solution, run as the agent user (Terminal-Bench runs solution.sh as root)."""
    if not reference_solution.strip():
        return (
            "#!/bin/bash\n"
            "echo 'this task was kept without a reference solution (a model solved it)' >&2\n"
            "exit 1\n"
        )
    delimiter = "ENDLESS_REFERENCE_SOLUTION"
    body = solution_body(reference_solution).rstrip("\n")
    return (
        "#!/bin/bash\n"
        f"# The reference solution, run as {AGENT_USER} (the user it was verified for).\n"
        f"cd {AGENT_HOME}\n"
        f"exec setpriv --reuid=1000 --regid=1000 --init-groups env HOME={AGENT_HOME} "
        f"USER={AGENT_USER} LOGNAME={AGENT_USER} bash <<'{delimiter}'\n{body}\n{delimiter}\n"
    )


def task_files(
    task: Task, base_image: str, quality: QualityRecord | None = None
) -> dict[str, tuple[str | bytes, bool]]:
    context = task_parts.context_files(task)
    services = compose_files(task.services, base_image, agent="client")
    compose = services.pop("docker-compose.yaml", (DOCKER_COMPOSE, False))
    taken = RESERVED | {"tests", *services}
    clashes = sorted(p for p in context if p in taken or p.startswith("tests/"))
    if clashes:
        raise ExportError(
            f"task {task.task_id}: build-context files {clashes} clash with Terminal-Bench's own "
            "file names"
        )
    ours = is_default(task.agent_user, task.workdir)
    solution = (
        solution_script(task.reference_solution)
        if ours
        else "#!/bin/bash\n" + solution_body(task.reference_solution)
    )
    files: dict[str, tuple[str | bytes, bool]] = {
        "task.yaml": (task_yaml(task, base_image, quality), False),
        "Dockerfile": (dockerfile(task, base_image), False),
        "docker-compose.yaml": (with_client(str(compose[0])), False),
        "solution.sh": (solution, True),
        **services,
    }
    spec = task_parts.verifier(task)
    if spec is not None:
        tests = spec.all_files()
        script = tests.pop(spec.script, "")
        files["run-tests.sh"] = (script.removesuffix(REWARD_ENDING), True)
        for rel, text in tests.items():
            files[f"tests/{rel}"] = (text, False)
        for rel, data in spec.binary.items():
            files[f"tests/{rel}"] = (base64.b64decode(data), False)
    else:
        files["run-tests.sh"] = (RUN_TESTS if ours else PYTEST_RUN_TESTS, True)
        files[f"tests/{TEST_FILE}"] = (bundle.portable(task.completion_test), False)
        if ours:
            files[f"tests/{GRADER_FILE}"] = (GRADER_SOURCE, False)
    files.update(context)
    return files


def with_client(services: str) -> str:
    """The standard compose file, with a task's services (compose.py) merged in, if any."""
    if services == DOCKER_COMPOSE:
        return services
    merged, theirs = yaml.safe_load(DOCKER_COMPOSE), yaml.safe_load(services)["services"]
    merged["services"]["client"].update(theirs.pop("client"))
    merged["services"].update(theirs)
    return yaml.safe_dump(merged, sort_keys=False)


def _check_written(directory: Path, task: Task, _image: str, quality: QualityRecord) -> None:
    config = yaml.safe_load((directory / "task.yaml").read_text(encoding="utf-8"))
    if config.get("instruction", "").strip() != task.instruction.strip():
        raise ExportError(f"task {task.task_id}: task.yaml does not carry the instruction back")
    if carried(config) != quality:
        raise ExportError(f"task {task.task_id}: task.yaml does not carry the quality record back")
    compose = yaml.safe_load((directory / "docker-compose.yaml").read_text(encoding="utf-8"))
    if "client" not in compose.get("services", {}):
        raise ExportError(f"task {task.task_id}: docker-compose.yaml has no client service")


# One Terminal-Bench task directory per task: export_dirs(tasks, out, base_image=..., ...).
export_terminal_bench = functools.partial(
    export_dirs, fmt="terminal-bench", files=task_files, check=_check_written
)
