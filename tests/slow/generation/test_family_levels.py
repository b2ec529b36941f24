"""Complexity levels of the procedural families: every level is recorded on the task, the work
grows with the level, levels 1, 3 and 6 of every family build and grade soundly on real Docker,
and without a level every family writes exactly the tasks it wrote before levels existed."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable

import pytest
from family_cells import assert_sound, validate_cells

from endless_assets.generation.llm.prompts import PromptSet
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.base import LEVELS, FamilyTask, level_name
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.stages.soundness.script_steps import split_steps
from endless_assets.taxonomy import Taxonomy

NAMES = [f.name for f in ALL_FAMILIES]
DOCKER_LEVELS = (1, 3, 6)
# Built and graded: both ends of every family (the frontier end-to-end test builds every level
# of three families).
BUILT_LEVELS = (1, 6)
FIELDS = (
    "category",
    "complexity",
    "scenario",
    "instruction",
    "truth",
    "reference_solution",
    "dockerfile",
    "context_files",
    "initial_test",
    "completion_test",
    "family",
)
# describe("golden-levels", s, 1000 + s) for s in 0, 1, 2, hashed over FIELDS: recorded with the
# generator as it was before the families had levels.
BEFORE_LEVELS = {
    "log_error_counts": ["4308f30c6fde3d66", "50a5e6f87e4029da", "5d35aa0ca3d06f6b"],
    "file_organize": ["7710c7bd9dbf2d50", "c461a65209ecfeb7", "b30efa29c96c39df"],
    "csv_aggregate": ["24ad312078cb1bdb", "48733866fcb25906", "59a446099e02eab2"],
    "json_filter": ["a02a0de57d451a38", "35825899dba07940", "1420e9a75bd74b88"],
    "text_replace": ["fb915a46ede16c00", "4d71cf7af32ff970", "928fe1cee9db7368"],
    "archive_backup": ["ec6457b4456f18d2", "fbf5a18b2fffb925", "7a01b17f2ada076e"],
    "checksum_verify": ["69c8c671a5b5e03a", "38365003467242ce", "2aea5a5d5c14c409"],
    "permissions_fix": ["71c7775d33bb3e1a", "a8867b0fc4806ef4", "b7cd0d929cbaa7dc"],
    "sqlite_report": ["cfc499632be3bf72", "14d9a0479403caca", "fcfd89c45210b707"],
    "ini_config": ["f0e868c2c50c667f", "958c272a24388900", "d92b4039daa99b2c"],
    "cron_schedule": ["e2a608ff63f21097", "218c4674bf35fd24", "76e0dc78292a2931"],
    "git_history": ["dc90a985da05394b", "6196e8a11fbe652b", "bee22cc8d4ec1c1b"],
    "shell_script": ["8b78df2898a07ca7", "d0bea9d3505ba030", "99ae8230844289f9"],
}


def _data_size(task: FamilyTask) -> int:
    return sum(len(text) for text in task.files.values()) + len(task.setup_script)


def _steps(task: FamilyTask) -> int:
    return len(split_steps(task.solution))


def _ini_edits(task: FamilyTask) -> int:
    edits = 1 + len(task.truth["added"]) + len(task.truth["removed"])
    return len(task.truth["files"]) * edits


def _cron_changes(task: FamilyTask) -> int:
    truth = task.truth
    return len(truth["entries"]) + bool(truth["retired"]) + bool(truth["moved"])


# What grows with the level in each family, measured on the task the family writes.
MEASURES: dict[str, Callable[[FamilyTask], int]] = {
    "log_error_counts": lambda t: len(t.truth["logs"]),  # log files to read
    "file_organize": lambda t: len(t.truth["before"]),  # files in the folder
    "csv_aggregate": _data_size,  # rows over all the exports
    "json_filter": lambda t: len(t.truth.get("outputs", [t.truth["output"]])),  # outputs
    "text_replace": lambda t: len(t.files),  # files, edited or to leave alone
    "archive_backup": _steps,  # archive, checksum, listing
    "checksum_verify": lambda t: len(t.truth["failed"]),  # damaged or missing files to find
    "permissions_fix": _steps,  # rules of the policy applied
    "sqlite_report": lambda t: t.solution.count(";"),  # SQL statements
    "ini_config": _ini_edits,  # edits over all the files
    "cron_schedule": _cron_changes,  # entries to write, retire or move
    "git_history": _steps,  # git operations
    "shell_script": lambda t: len(t.truth["cases"]),  # cases the script must pass
}


def _digest(task: object) -> str:
    data = {name: getattr(task, name) for name in FIELDS}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def test_without_a_level_every_family_writes_the_tasks_it_wrote_before_levels_existed():
    found = {}
    for family in ALL_FAMILIES:
        gen = ProceduralGenerator("endless-base:golden", families=[family])
        found[family.name] = [
            _digest(gen.describe("golden-levels", s, 1000 + s)[0]) for s in range(3)
        ]
        cell = gen.describe_cell("golden-levels", 0, 1000, family.name, None)[0]
        assert _digest(cell) == found[family.name][0], family.name
    assert found == BEFORE_LEVELS


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_a_leveled_task_records_its_level_and_is_well_formed(family):
    for level in LEVELS:
        for seed in range(3):
            task = family().make(random.Random(seed), level)
            assert task == family().make(random.Random(seed), level), "not deterministic"
            assert task.complexity == level_name(level)
            assert task.truth["level"] == level
            assert "/home/user/" in task.instruction and task.solution.strip()
            for source in (task.initial_test, task.completion_test, task.setup_script):
                compile(source, f"{family.name}-{level}-{seed}", "exec")
            assert "def test_" in task.initial_test and "def test_" in task.completion_test
            for rel in task.files:
                assert not rel.startswith("/") and ".." not in rel.split("/")


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_the_work_grows_with_the_level(family):
    measure = MEASURES[family.name]
    for seed in range(5):
        one, three, six = (
            measure(family().make(random.Random(seed), level)) for level in DOCKER_LEVELS
        )
        assert one <= three <= six and one < six, (seed, one, three, six)


def test_the_generator_describes_a_chosen_family_at_a_chosen_level():
    gen = ProceduralGenerator("endless-base:golden")
    every = [family.name for family in gen.families]  # the service families too
    assert set(NAMES) < set(every)
    assert len(gen.cells()) == len(every) * len(LEVELS)
    assert set(gen.cells()) == {(name, level) for name in every for level in LEVELS}
    draft, _ = gen.describe_cell("2026-12-01", 4, 99, "cron_schedule", 5)
    assert draft.family == "cron_schedule" and draft.category == "scheduled tasks and cron jobs"
    assert draft.complexity == "multi-step parallel commands" and draft.truth["level"] == 5
    assert Taxonomy.load().level_of(draft.complexity) == 5
    with pytest.raises(ValueError, match="no procedural family 'nope'"):
        gen.describe_cell("2026-12-01", 0, 1, "nope", 1)
    for level in (0, 7, True, "3"):
        with pytest.raises(ValueError, match="complexity level"):
            gen.describe_cell("2026-12-01", 0, 1, "json_filter", level)


def test_the_llm_task_prompt_asks_for_the_level_with_concrete_guidance():
    taxonomy, prompts = Taxonomy.load(), PromptSet.load()
    assert prompts["task"].placeholders("user") >= {"level", "levels", "complexity_hint"}
    for level, entry in enumerate(taxonomy.complexities, 1):
        assert level_name(level) == entry.name and taxonomy.level_of(entry.name) == level
        for part in ("Steps:", "Files:", "Edge cases:", "What makes it hard:"):
            assert part in entry.hint, (entry.name, part)
    seed = next(s for s in range(1000) if taxonomy.draw(s).level == 6)
    draw = taxonomy.draw(seed)
    text = prompts["task"].render(
        "user",
        category=draw.category,
        complexity=draw.complexity,
        complexity_hint=draw.complexity_hint,
        level=str(draw.level),
        levels=str(draw.levels),
        scenario=draw.scenario,
        services="",
    )
    assert 'level 6 of 6, "set of 5-10 commands"' in text
    assert draw.complexity_hint in text


@pytest.fixture(scope="module")
def outcomes(sandbox):
    """Every family at levels 1, 3 and 6 through the environment stage, the completion check
    and the soundness probes (one repeat), two tasks at a time."""
    return validate_cells(sandbox, NAMES, BUILT_LEVELS, "test-levels", 500)


@pytest.mark.docker
@pytest.mark.parametrize("level", BUILT_LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_levels_one_and_six_of_every_family_build_and_grade_soundly(outcomes, name, level):
    assert_sound(outcomes[(name, level)], shortcuts=4)
