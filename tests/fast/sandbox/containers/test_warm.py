"""Containers started ahead: an episode that takes one gets a fresh container
with its grader already resident, and none is left behind when the stage ends."""

from __future__ import annotations

from endless_assets.agent.episode import EpisodeLimits, run_episode
from endless_assets.agent.policies import EpisodeTask, OraclePolicy
from endless_assets.sandbox.engine.client import PROJECT_LABEL
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig

TEST = 'def test_upper():\n    assert open("/home/user/out.txt").read() == "HELLO\\n"\n'
SOLVE = "tr a-z A-Z < /home/user/in.txt > /home/user/out.txt"


def warm_containers(sandbox: Sandbox) -> list:
    labels = [f"{PROJECT_LABEL}=endless", "endless.role=warm"]
    return sandbox.client.containers.list(all=True, filters={"label": labels})


def test_a_warm_container_is_fresh_graded_like_any_other_and_spares_are_removed_at_the_end(
    sandbox,
):
    warm = Sandbox(SandboxConfig(warm=3))
    build = warm.build(f"FROM {warm.base.tag}\nRUN echo hello > /home/user/in.txt\n", {})
    assert build.ok, build.log
    warm.expect(build.tag, 3)
    assert warm.warm.ready(build.tag, 3)
    with warm.container(build.tag, warm=True) as box:
        assert box.grader is not None  # started ahead, before any agent command
        # Nothing ran in it: the image's files as built, no out.txt yet.
        assert box.exec_root(["ls", "/home/user"]).output.split() == ["in.txt"]
    rollout = run_episode(
        warm,
        build.tag,
        EpisodeTask("warm", "upper-case", SOLVE),
        OraclePolicy(),
        TEST,
        EpisodeLimits(),
        warm=True,
    )
    assert (rollout.termination, rollout.reward) == ("done", 1)
    assert warm.warm.taken == 2
    assert len(warm_containers(warm)) == 1  # the third spare, unused so far
    warm.close()
    assert warm_containers(warm) == []


def test_a_taker_that_finds_no_spare_starts_its_own_and_leaves_the_demand(sandbox):
    warm = Sandbox(SandboxConfig(warm=1))
    image = warm.base.tag
    warm.expect(image, 1)
    with warm.container(image, warm=True):  # maybe before the spare is ready: either way works
        pass
    taken_first = warm.warm.taken
    if taken_first == 0:  # the spare was not ready: it is still wanted, and taken next
        assert warm.warm.ready(image, 1)
        with warm.container(image, warm=True):
            pass
    assert warm.warm.taken == 1
    warm.close()
    assert warm_containers(warm) == []
