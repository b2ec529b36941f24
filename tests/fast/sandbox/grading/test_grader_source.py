"""The grader's program is assembled in one place (grading/grader_source.py) from its parts, and
the host reads its verdicts by the program's own reward rule."""

from __future__ import annotations

import ast
import builtins
import itertools
import symtable
import sys
from importlib import resources
from pathlib import Path

import endless_assets
from endless_assets.sandbox.grading import grader_source
from endless_assets.sandbox.grading.verdict import GRADER_SOURCE, parse_verdict

PACKAGE = Path(endless_assets.__file__).parent
PART_MODULES = {p.removesuffix(".py") for p in grader_source.PARTS}


def test_the_program_is_its_parts_joined_in_their_order_and_compiles():
    files = resources.files("endless_assets.sandbox.grading")
    texts = [files.joinpath(p).read_text(encoding="utf-8") for p in grader_source.PARTS]
    assert "\n".join(texts) == GRADER_SOURCE
    compile(GRADER_SOURCE, "endless_grader.py", "exec")


def _global_uses(table: symtable.SymbolTable) -> set[str]:
    found = {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
    for child in table.get_children():
        found |= _global_uses(child)
    return found


def test_every_name_a_part_uses_is_defined_by_a_part_or_a_builtin():
    program = symtable.symtable(GRADER_SOURCE, "endless_grader.py", "exec")
    defined = {s.get_name() for s in program.get_symbols() if s.is_assigned() or s.is_imported()}
    missing = _global_uses(program) - defined - set(dir(builtins)) - {"__file__"}
    assert not missing, f"names no part defines: {sorted(missing)}"


def test_the_parts_import_only_the_standard_library_and_pytest():
    tree = ast.parse(GRADER_SOURCE)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    outside = {
        n
        for n in names
        if n.split(".")[0] not in sys.stdlib_module_names | {"pytest", "_pytest", "pluggy", ""}
    }
    assert not outside, outside


def test_no_module_of_the_package_imports_a_part_of_the_program():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n.rsplit(".", 1)[-1] in PART_MODULES for n in names):
                importers.append(str(path.relative_to(PACKAGE)))
    assert not importers


def test_the_host_passes_exactly_what_the_programs_reward_rule_passes():
    program: dict = {"__name__": "endless_grader"}
    exec(compile(GRADER_SOURCE, "endless_grader.py", "exec"), program)
    passed = program["passed"]
    grid = itertools.product(
        (0, 1, 2, 5, -9),
        (None, *itertools.product((0, 1, 3), (0, 1), (0, 1), (0, 1))),
        (False, True),
    )
    for code, numbers, timed_out in grid:
        counts = None
        if numbers is not None:
            counts = dict(zip(("tests", "failures", "errors", "skipped"), numbers, strict=True))
        reply = {"exit_code": code, "counts": counts, "timed_out": timed_out}
        verdict = parse_verdict(code, counts, "", 0.0, timed_out=timed_out)
        assert verdict.passed == passed(reply), (reply, verdict.status)
