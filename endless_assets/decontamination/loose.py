"""A task directory `endless import` refuses (a multi-container task, say) read for comparison
only: its text files as they are, each part found where Harbor's or Terminal-Bench's layout puts
it, with the importer's own safety rules (regular files only, size caps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from endless_assets.interop.import_files import ImportProblem, read_tree
from endless_assets.interop.tb_import import is_tb_dir
from endless_assets.sandbox.grading.bundle import Verifier, pack

# Every file's bytes are read anyway (a binary one is then dropped), so no cap per binary file
# but the importer's cap on the whole directory.
_ANY_SIZE = 1 << 62
_TB_OWN = ("task.yaml", "solution.yaml", "docker-compose.yaml", "docker-compose.yml")


@dataclass(frozen=True)
class LooseTask:
    """What decontamination compares of a task, read without the importer's checks."""

    instruction: str
    completion_test: str
    reference_solution: str
    dockerfile: str
    context_files: dict[str, str] = field(default_factory=dict)


def read_loose(directory: Path) -> LooseTask:
    """ImportProblem when even this cannot be done: no instruction, a symbolic link or a special
    file in the directory, more than the importer's cap of files."""
    files = read_tree(directory, directory, max_binary_bytes=_ANY_SIZE, drop_pycache=True).text
    names = sorted(k for k in files if k.startswith("tests/"))
    tests = {k.removeprefix("tests/"): files.pop(k) for k in names}
    if is_tb_dir(directory):
        try:
            config = yaml.safe_load(files.get("task.yaml", "")) or {}
        except yaml.YAMLError as exc:
            raise ImportProblem(f"task.yaml does not parse: {exc}") from exc
        instruction = str(config.get("instruction") or "") if isinstance(config, dict) else ""
        if "run-tests.sh" in files:
            tests["run-tests.sh"] = files.pop("run-tests.sh")
        solution = files.pop("solution.sh", "")
        dockerfile = files.pop("Dockerfile", "")
        context = {k: v for k, v in files.items() if k not in _TB_OWN}
    else:
        instruction = files.pop("instruction.md", "")
        solutions = sorted(k for k in files if k.startswith("solution/"))
        solutions.sort(key=lambda k: k != "solution/solve.sh")
        solution = "\n".join(files[k] for k in solutions)
        dockerfile = files.pop("environment/Dockerfile", "")
        context = {
            k.removeprefix("environment/"): v
            for k, v in files.items()
            if k.startswith("environment/")
        }
    if not instruction.strip():
        raise ImportProblem("no instruction (instruction.md, or task.yaml's instruction)")
    return LooseTask(
        instruction=instruction,
        completion_test=pack(Verifier(files=tests)) if tests else "",
        reference_solution=solution,
        dockerfile=dockerfile,
        context_files=context,
    )
