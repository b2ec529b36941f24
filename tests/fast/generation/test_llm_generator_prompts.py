"""The prompt templates: every placeholder filled, the version a hash of the templates."""

from __future__ import annotations

import shutil

import pytest

from endless_assets.generation.llm.feedback import stable_feedback
from endless_assets.generation.llm.prompts import TEMPLATE_NAMES, PromptError, PromptSet, Template
from endless_assets.taxonomy import PROMPTS_DIR, TAXONOMY_FILE


def copy_prompts(tmp_path):
    for name in TEMPLATE_NAMES:
        shutil.copy(PROMPTS_DIR / f"{name}.md", tmp_path / f"{name}.md")
    shutil.copy(TAXONOMY_FILE, tmp_path / "taxonomy.yaml")
    return tmp_path


def test_every_stage_has_its_template_and_the_paper_rules_are_in_the_task_prompt():
    prompts = PromptSet.load()
    system = prompts["task"].section("system")
    for rule in ("/home/user", "not root", "no network", "checkable from files", "<truth>"):
        assert rule in system, rule
    assert prompts["environment"].placeholders("system") == {"base_image", "tools"}
    assert {"environment", "completion_test", "format"} <= set(prompts["repair"].sections)
    assert prompts.version.startswith("llm-")


def test_the_version_changes_with_any_template_or_the_taxonomy(tmp_path):
    directory = copy_prompts(tmp_path)
    taxonomy = directory / "taxonomy.yaml"
    before = PromptSet.load(directory, taxonomy).version
    assert before == PromptSet.load().version  # same text, same version
    completion = directory / "completion_test.md"
    completion.write_text(completion.read_text() + "\nBe brief.\n")
    after_template = PromptSet.load(directory, taxonomy).version
    taxonomy.write_text(taxonomy.read_text().replace("web developer", "web designer"))
    after_taxonomy = PromptSet.load(directory, taxonomy).version
    assert len({before, after_template, after_taxonomy}) == 3


def test_rendering_demands_exactly_the_placeholders(tmp_path):
    path = tmp_path / "t.md"
    path.write_text("=== user ===\nTask: {{ task }} in {{dir}}.\n")
    template = Template.load(path)
    assert template.render("user", task="sort {{x}}", dir="/home/user") == (
        "Task: sort {{x}} in /home/user.\n"
    )
    with pytest.raises(PromptError, match="no value for dir"):
        template.render("user", task="x")
    with pytest.raises(PromptError, match="no placeholder for extra"):
        template.render("user", task="x", dir="y", extra="z")
    with pytest.raises(PromptError, match="no `=== system ===` section"):
        template.render("system")


def test_a_missing_template_is_a_clear_error(tmp_path):
    directory = copy_prompts(tmp_path)
    (directory / "repair.md").unlink()
    with pytest.raises(PromptError, match=r"cannot read the prompt template .*repair\.md"):
        PromptSet.load(directory, directory / "taxonomy.yaml")


def test_feedback_is_stripped_of_what_changes_between_runs():
    log = (
        "Step 5/10 : RUN exit 3\n ---> Running in 5d9378b2c80e\n ---> 467ce62bc423\n"
        "Removing intermediate container 5d9378b2c80e\n"
        "generated xml file: /verifier/run-48cd13f5c062/junit.xml\n"
        "1 failed in 0.03s\n2 passed in 61.20s (0:01:01)\n"
        "assert sha == 'deadbeefcafe0123456789'\n"
    )
    assert stable_feedback(log) == (
        "Step 5/10 : RUN exit 3\n ---> Running in <id>\n ---> <id>\n"
        "Removing intermediate container <id>\n"
        "generated xml file: /verifier/run-<id>/junit.xml\n"
        "1 failed in <time>\n2 passed in <time>\n"
        "assert sha == 'deadbeefcafe0123456789'\n"
    )
