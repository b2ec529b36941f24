"""Procedural families: well-formed, deterministic output, and end to end against Docker."""

from __future__ import annotations

import random

import pytest

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.base import Family, render_dockerfile
from endless_assets.generation.procedural.families import ALL_FAMILIES

SEEDS = range(25)


def _make(family: type[Family], seed: int):
    return family().make(random.Random(seed))


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_family_is_deterministic(family: type[Family]) -> None:
    for seed in range(5):
        assert _make(family, seed) == _make(family, seed)


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_family_output_is_well_formed(family: type[Family]) -> None:
    instructions = set()
    for seed in SEEDS:
        task = _make(family, seed)
        instructions.add(task.instruction)
        assert task.complexity in {"easy", "medium", "hard"}
        assert task.scenario and task.solution.strip()
        assert "/home/user/" in task.instruction
        assert isinstance(task.truth, dict) and task.truth
        for source in (task.initial_test, task.completion_test, task.setup_script):
            compile(source, f"{family.name}-{seed}", "exec")
        assert "def test_" in task.initial_test and "def test_" in task.completion_test
        for rel in task.files:
            assert not rel.startswith("/") and ".." not in rel.split("/")
        dockerfile, context = render_dockerfile("base:latest", task)
        assert dockerfile.startswith("FROM base:latest")
        assert bool(task.setup_script) == ("setup.py" in context)
    assert len(instructions) > len(SEEDS) // 2, "seeds should vary the task"


def test_names_are_unique() -> None:
    assert len({f.name for f in ALL_FAMILIES}) == len(ALL_FAMILIES)


def test_generator_deals_every_family() -> None:
    gen = ProceduralGenerator("base:latest")
    drafts = [gen.describe("2026-11-29", i, i)[0] for i in range(len(ALL_FAMILIES))]
    assert {d.family for d in drafts} == {f.name for f in ALL_FAMILIES}


def _docker_ready() -> str | None:
    try:
        import docker

        from endless_assets.sandbox.image.base_image import base_image_tag

        tag = base_image_tag()
        docker.from_env().images.get(tag)
        return tag
    except Exception:
        return None


@pytest.mark.docker
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_family_end_to_end(family: type[Family]) -> None:
    tag = _docker_ready()
    if tag is None:
        pytest.skip("needs a Docker engine and the base image")
    from endless_assets.sandbox.sandbox import Sandbox
    from endless_assets.stages.completion import check_completion_test
    from endless_assets.stages.environment import build_environment

    gen = ProceduralGenerator(tag, families=[family])
    sandbox = Sandbox()
    draft, _ = gen.describe("test-families", 0, 0)
    env = build_environment(draft, gen, sandbox)
    assert env.status == "ok", (env.reject_reason, env.attempt_log)
    comp = check_completion_test(draft, env.image_tag, gen, sandbox)
    assert comp.status == "ok", (comp.reject_reason, comp.attempt_log)
