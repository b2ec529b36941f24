"""Harbor task directories, one per kept task.

```
<task_id>/
  instruction.md             what the agent reads
  task.toml                  Harbor config + [metadata]: category, complexity, scenario, pass
                             rate, difficulty, source batch, generator, solver, truth, and
                             [metadata.quality]: the task's quality record (quality.py)
  environment/Dockerfile     the task image, FROM the base image given by --base-image
  environment/...            its build-context files
  environment/docker-compose.yaml  a task with services: them beside Harbor's `main`, each
                             built from environment/services/<name>/ (compose.py)
  tests/test.sh              grades: runs the completion test, writes /logs/verifier/reward.txt
  tests/endless_grader.py    the grader test.sh runs (ours, as in the pipeline)
  tests/test_final_state.py  the completion test
  tests/test_initial_state.py  the initial-state test (kept for re-validation and re-import)
  solution/solve.sh          the reference solution (Harbor's oracle agent runs it); absent
                             for a task kept without one (imported, solved by a model)
```

An imported task that carries its own verifier (bundle.py: Harbor's test.sh, Terminal-Bench's
run-tests.sh) gets its own tests/ back instead of ours, byte for byte, binary files included; its
task.toml is the one it came with (every section), with our provenance added to [metadata] and
its agent's identity in [agent] user / [environment] workdir (absent: the image's USER and
WORKDIR, as Harbor runs it). Its Dockerfile keeps its own base image unless that is our default
base image, which --base-image replaces.

Grading needs no network: pytest is already in the image (our base image installs Debian's
python3-pytest), unlike tasks that download uv and pytest when they are graded. `test.sh` grades
with our own grader (`tests/endless_grader.py`, the file the pipeline runs in every container):
it kills everything the agent user left running, then runs the test as that user with one
capability in its own process, so nothing the agent left behind runs with more privilege than
it had or changes the verdict (see the threat model in docs/sandbox.md).
Our own tasks say who the agent is explicitly: `[agent] user = "user"` (uid 1000) and
`[environment] workdir = "/home/user"`, as in our pipeline.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from endless_assets.interop import task_parts
from endless_assets.interop.compose import services_of
from endless_assets.interop.compose_export import compose_files, exported
from endless_assets.interop.output import staged_directory, write_text
from endless_assets.interop.quality import KEY, QualityRecord, carried, record_of
from endless_assets.interop.tasks import ExportError
from endless_assets.interop.toml_text import dumps
from endless_assets.models import Task
from endless_assets.sandbox.containers.identity import is_default, strip_identity
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.verdict import GRADER_SOURCE

COMPLETION_TEST = "test_final_state.py"
INITIAL_TEST = "test_initial_state.py"
AGENT_TIMEOUT_SEC = 900.0
VERIFIER_TIMEOUT_SEC = 180.0
BUILD_TIMEOUT_SEC = 600.0

GRADER_FILE = "endless_grader.py"
TEST_SH = """\
#!/bin/bash
# Grades this task (written by endless) with endless's own grader, beside this file: it stops
# every process of the agent's user, then runs the completion test as that user (so anything the
# test runs has the agent's privilege, no more) in Python's isolated mode with a clean
# environment, no conftest files, no plugin autoload and an ini file of its own; the outcome
# comes back on a channel only it holds. Reward 1 only if at least one test ran and every test
# passed (none skipped). Needs no network: pytest is in the image.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
cd / && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \\
    python3 -I -B /tests/{grader} --once /tests/{test} --agent-uid {uid} \\
    --timeout {timeout} --reward-file /logs/verifier/reward.txt
exit 0
"""


def grader_script(uid: int = 1000) -> str:
    timeout = int(VERIFIER_TIMEOUT_SEC - 10)
    return TEST_SH.format(uid=uid, test=COMPLETION_TEST, grader=GRADER_FILE, timeout=timeout)


def solve_script(reference_solution: str) -> str:
    body = reference_solution.rstrip("\n") + "\n"
    if body.startswith("#!"):
        return body
    return "#!/bin/bash\n" + body


# A Harbor test.sh for an imported task graded by its pytest file alone whose agent is not ours
# (our grader grades our agent only): Harbor's own shape, with the image's pytest.
PYTEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
if (cd / && python3 -m pytest -rA /tests/{test}); then reward=1; else reward=0; fi
echo $reward > /logs/verifier/reward.txt
"""


def task_config(
    task: Task, base_image: str, quality: QualityRecord | None = None
) -> dict[str, Any]:
    """task.toml; `quality` is the task's record (None: every value not checked)."""
    ours = _ours(task, base_image, quality or QualityRecord())
    original = task.source_metadata.get("config")
    if task.source_metadata.get("format") != "harbor" or not isinstance(original, dict):
        return ours
    config = copy.deepcopy(original)  # the task's own task.toml, every section
    metadata = config.setdefault("metadata", {})
    for key, value in ours["metadata"].items():
        metadata.setdefault(key, value)
    metadata[KEY] = ours["metadata"][KEY]  # this lake's record, not the one it came with
    if task.agent_user:
        config.setdefault("agent", {})["user"] = task.agent_user
    if task.workdir:
        config.setdefault("environment", {})["workdir"] = task.workdir
    return config


def _ours(task: Task, base_image: str, quality: QualityRecord) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "author_name": "endless",
        **task.provenance(),
        "difficulty": _harbor_difficulty(task.difficulty),
        "pass_difficulty": task.difficulty,
        "tags": [t for t in (task.category, task.family, task.complexity) if t],
        "base_image": base_image,
        "truth": _json(task.truth),
        KEY: quality.as_dict(),  # TOML has no null: a value not measured is left out
    }
    if task.source_name:
        metadata["source_name"] = task.source_name
    verifier: dict[str, Any] = {"timeout_sec": VERIFIER_TIMEOUT_SEC, "user": "root"}
    spec = task_parts.verifier(task)
    if spec is not None:  # its own: what it came with (absent: Harbor's defaults)
        verifier = {"timeout_sec": spec.timeout, "user": spec.user, "env": spec.env}
        verifier = {k: v for k, v in verifier.items() if v}
    agent: dict[str, Any] = {"timeout_sec": AGENT_TIMEOUT_SEC}
    environment: dict[str, Any] = {"build_timeout_sec": BUILD_TIMEOUT_SEC, "cpus": 1}
    environment["memory_mb"] = 1024
    if task.agent_user:  # "": the image's USER, Harbor's default
        agent["user"] = task.agent_user
    if task.workdir:
        environment["workdir"] = task.workdir
    return {
        "schema_version": "1.4",
        "source": "endless",
        "task": {
            "name": f"endless/{task.task_id}",
            "description": task.instruction.strip().splitlines()[0][:200],
            "keywords": [t for t in (task.category, task.family) if t],
        },
        "metadata": metadata,
        "verifier": verifier,
        "agent": agent,
        "environment": environment,
    }


def _harbor_difficulty(label: str) -> str:
    # Harbor's Difficulty enum is easy | medium | hard | unknown.
    return label if label in ("easy", "medium", "hard") else "unknown"


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def task_files(
    task: Task, base_image: str, quality: QualityRecord | None = None
) -> dict[str, tuple[str | bytes, bool]]:
    """Relative path -> (text or bytes, executable) for one task directory."""
    files: dict[str, tuple[str | bytes, bool]] = {
        "instruction.md": (task.instruction.rstrip("\n") + "\n", False),
        "task.toml": (dumps(task_config(task, base_image, quality)), False),
        "environment/Dockerfile": (task_parts.dockerfile(task, base_image), False),
    }
    spec = task_parts.verifier(task)
    if spec is not None:  # its own tests/, as it came
        for rel, text in spec.all_files().items():
            files[f"tests/{rel}"] = (text, rel == spec.script)
        for rel, data in spec.binary.items():
            files[f"tests/{rel}"] = (base64.b64decode(data), False)
    elif is_default(task.agent_user, task.workdir):  # our agent: our grader
        files[f"tests/{COMPLETION_TEST}"] = (bundle.portable(task.completion_test), False)
        files["tests/test.sh"] = (grader_script(), True)
        files[f"tests/{GRADER_FILE}"] = (GRADER_SOURCE, False)
    else:
        files[f"tests/{COMPLETION_TEST}"] = (bundle.portable(task.completion_test), False)
        files["tests/test.sh"] = (PYTEST_SH.format(test=COMPLETION_TEST), True)
    if task.reference_solution.strip():
        # A task kept without one (imported, solved by a model) ships no solution/.
        files["solution/solve.sh"] = (solve_script(task.reference_solution), True)
    initial = task.initial_test or ""
    if initial.strip() and f"tests/{INITIAL_TEST}" not in files and _initial_is_its_own(task):
        files[f"tests/{INITIAL_TEST}"] = (initial, False)
    for rel, (content, executable) in task_parts.context_files(task).items():
        files[f"environment/{rel}"] = (content, executable)
    for rel, written in compose_files(task.services, base_image).items():
        where = f"environment/{rel}"
        if where in files:
            raise ExportError(f"task {task.task_id}: its own file {where} is where services go")
        files[where] = written
    return files


def _initial_is_its_own(task: Task) -> bool:
    """Whether the initial-state test goes into tests/: ours always; an imported task's that
    carries its own tests/ only if it came there (a generated one is generated again on
    import, and one from environment/ is among its context files)."""
    from endless_assets.interop.harbor_import import trivial_initial_test

    if task_parts.verifier(task) is None:
        return True
    return task.initial_test != trivial_initial_test(strip_identity(task.dockerfile or ""))


def write_files(directory: Path, files: dict[str, tuple[str | bytes, bool]]) -> None:
    for rel, (content, executable) in files.items():
        if isinstance(content, bytes):
            task_parts.write_bytes(directory / rel, content, executable=executable)
        else:
            write_text(directory / rel, content, executable=executable)


def write_task(
    directory: Path, task: Task, base_image: str, quality: QualityRecord | None = None
) -> None:
    write_files(directory, task_files(task, base_image, quality))


def export_dirs(
    tasks: list[Task],
    out: Path,
    *,
    base_image: str,
    overwrite: bool = False,
    quality: dict[str, QualityRecord] | None = None,
    fmt: str,
    files: Callable[[Task, str, QualityRecord], dict[str, tuple[str | bytes, bool]]],
    check: Callable[[Path, Task, str, QualityRecord], None],
) -> list[Path]:
    """Validate every task, then write one task directory of format `fmt` per task under
    `out` (its `files`, read back by `check`), each with its quality record from `quality`
    (task id -> record; absent: not checked)."""
    task_parts.validate(tasks)
    check_base_image(base_image)
    written = []
    with staged_directory(out, fmt=fmt, overwrite=overwrite) as stage:
        for task in tasks:
            record = record_of(quality, task)
            write_files(stage / task.task_id, files(task, base_image, record))
            check(stage / task.task_id, task, base_image, record)
            written.append(Path(out) / task.task_id)
    return written


def check_base_image(base_image: str) -> None:
    if not base_image or any(c.isspace() for c in base_image):
        raise ExportError(f"--base-image {base_image!r} is not an image reference")


def _check_written(directory: Path, task: Task, base_image: str, quality: QualityRecord) -> None:
    """Read the directory back as Harbor would and compare: the export is what we meant."""
    from endless_assets.interop.harbor_import import read_harbor_dir, solution_body

    try:
        back = read_harbor_dir(directory)
        record = carried(back.metadata)
    except Exception as exc:
        raise ExportError(
            f"task {task.task_id}: the written Harbor task does not read back: {exc}"
        ) from exc
    services = services_of(back.services, {})
    test = bundle.unpack(back.completion_test)
    if (
        task_parts.verifier(task) is None
        and test
        and test.files.get("test.sh") == PYTEST_SH.format(test=COMPLETION_TEST)
    ):  # our test.sh for its pytest file alone (not our agent): read back as a verifier
        back.completion_test = test.test
    initial = back.initial_test
    if initial is None and not _initial_is_its_own(task):
        initial = task.initial_test  # generated again on import, from the same Dockerfile
    meant = task_parts.as_bytes(task_parts.context_files(task))
    written = task_parts.read_back(back.context_files, back.binary_files, back.executable_files)
    mismatches = [
        name
        for name, ours, theirs in (
            ("instruction", task.instruction.strip(), back.instruction.strip()),
            (
                "completion test",
                bundle.portable(task.completion_test),
                bundle.portable(back.completion_test),
            ),
            ("initial test", task.initial_test, initial or ""),
            (
                "solution",
                solution_body(task.reference_solution).strip(),
                back.reference_solution.strip(),
            ),
            ("build-context files", meant, written),
            ("quality record", quality, record),
            ("services", [exported(s, base_image) for s in task.services], services),
        )
        if ours != theirs
    ]
    if back.base_images != task_parts.expected_base_images(task, base_image):
        mismatches.append(f"base image {back.base_images}")
    if mismatches:
        raise ExportError(
            f"task {task.task_id}: the written Harbor task differs from the lake in: "
            + ", ".join(mismatches)
        )


# One Harbor task directory per task: export_dirs(tasks, out, base_image=..., quality=...).
export_harbor = functools.partial(export_dirs, fmt="harbor", files=task_files, check=_check_written)
