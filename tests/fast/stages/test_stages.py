"""The build and validation stages on real Docker: each rejection path, with a clear reason, and
the good path."""

from __future__ import annotations

import uuid

import pytest
from broken_families import (
    BrokenCompletionTest,
    BuildFails,
    Good,
    InitialFails,
    PassesOnInitial,
    PassesWithNoop,
    ReferenceFails,
)

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.sandbox.engine import podman
from endless_assets.stages.completion import check_completion_test
from endless_assets.stages.environment import build_environment


def run_stages(sandbox, family):
    generator = ProceduralGenerator(sandbox.base.tag, families=[family])
    draft, _ = generator.describe("2026-01-02", 0, 7)
    env = build_environment(draft, generator, sandbox)
    if env.status != "ok":
        return env, None
    return env, check_completion_test(draft, env.image_tag, generator, sandbox)


def test_a_good_task_passes_every_check(sandbox):
    env, comp = run_stages(sandbox, Good)
    assert env.status == "ok" and env.image_id and env.attempts == 1
    assert comp.status == "ok", comp.reject_reason
    assert (comp.fails_on_initial, comp.fails_with_noop, comp.passes_with_reference) == (
        True,
        True,
        True,
    )


def test_a_dockerfile_that_fails_to_build_is_rejected_with_its_log(sandbox):
    env, comp = run_stages(sandbox, BuildFails)
    assert env.status == "rejected" and comp is None
    assert env.reject_reason.startswith("build_failed:")
    log = env.attempt_log
    assert log[0]["stage"] == "build"
    assert "setup exploded on purpose" in log[0]["error"]


def test_an_initial_test_that_fails_is_rejected(sandbox):
    env, comp = run_stages(sandbox, InitialFails)
    assert env.status == "rejected" and comp is None
    assert env.reject_reason.startswith("initial_test_failed:")
    assert "missing.txt" in env.attempt_log[-1]["error"]


@pytest.mark.parametrize(
    ("family", "reason", "flags"),
    [
        (PassesOnInitial, "passes_on_initial:", (False, None, None)),
        (BrokenCompletionTest, "completion_test_broken:", (False, None, None)),
        (PassesWithNoop, "passes_with_noop:", (True, False, None)),
        (ReferenceFails, "reference_fails:", (True, True, False)),
    ],
)
def test_completion_test_rejections(sandbox, family, reason, flags):
    env, comp = run_stages(sandbox, family)
    assert env.status == "ok"
    assert comp.status == "rejected"
    assert comp.reject_reason.startswith(reason), comp.reject_reason
    assert (comp.fails_on_initial, comp.fails_with_noop, comp.passes_with_reference) == flags


def test_a_missing_image_is_a_harness_error_not_a_rejection(sandbox):
    generator = ProceduralGenerator(sandbox.base.tag, families=[Good])
    draft, _ = generator.describe("2026-01-02", 0, 7)
    comp = check_completion_test(draft, "endless-task:does-not-exist", generator, sandbox)
    assert comp.status == "harness_error"
    assert "not found" in comp.reject_reason


def test_pruning_removes_cached_task_images_but_the_ones_to_keep(sandbox):
    from endless_assets.sandbox.image.images import prune_task_images

    run = uuid.uuid4().hex
    dockerfile = f"FROM {sandbox.base.tag}\nCOPY x /x\n"
    first = sandbox.build(dockerfile, {"x": f"prune-me {run}"})
    second = sandbox.build(dockerfile, {"x": f"keep-me {run}"})
    assert first.ok and second.ok
    # (among: only this test's images; other tests' share the engine)
    assert prune_task_images(sandbox.client, {second.tag}, among={first.tag, second.tag}) == 1
    tags = {  # Podman names them localhost/endless-task:...
        podman.short_name(t)
        for image in sandbox.client.images.list(name="endless-task")
        for t in image.tags
    }
    assert first.tag not in tags and second.tag in tags
    assert sandbox.build(dockerfile, {"x": f"prune-me {run}"}).cached is False  # rebuilt
