"""The procedural families with services (a PostgreSQL database, an HTTP application behind the
agent's nginx, a Redis queue): every level writes a task with its services, levels 1, 3 and 6
build, fail on the initial state and after a do-nothing agent, pass with the reference and
resist the shortcut probes on real Docker; batches from SERVICES_SINCE deal them, earlier ones
deal as they always did."""

from __future__ import annotations

import random

import pytest
from family_cells import assert_sound, validate_cells

from endless_assets.generation.procedural import SERVICES_SINCE, ProceduralGenerator
from endless_assets.generation.procedural.base import LEVELS
from endless_assets.generation.procedural.families import ALL_FAMILIES, SERVICE_FAMILIES

NAMES = [f.name for f in SERVICE_FAMILIES]
BUILT_LEVELS = (1, 3, 6)


@pytest.mark.parametrize("family", SERVICE_FAMILIES, ids=lambda f: f.name)
def test_every_level_writes_the_same_task_with_its_services_for_the_same_seed(family):
    for level in LEVELS:
        first = family().make(random.Random(level), level)
        again = family().make(random.Random(level), level)
        assert first == again and first.services and first.packages
        assert all(not s.dockerfile.startswith("FROM") for s in first.services)


def test_batches_from_the_cutover_deal_the_service_families_and_earlier_ones_do_not():
    gen = ProceduralGenerator("endless-base:test")
    slots = len(ALL_FAMILIES) + len(SERVICE_FAMILIES)
    later = {gen._family_for(SERVICES_SINCE, i).name for i in range(slots)}
    assert set(NAMES) <= later
    earlier = {gen._family_for("2026-03-14", i).name for i in range(slots)}
    assert earlier == {f.name for f in ALL_FAMILIES}
    draft, _ = gen.describe_cell(SERVICES_SINCE, 0, 7, NAMES[0], 2)
    assert draft.services and all(
        s.dockerfile.startswith("FROM endless-base:test\n") for s in draft.services
    )


@pytest.fixture(scope="module")
def outcomes(sandbox):
    """Every service family at levels 1, 3 and 6 through the environment stage, the completion
    check and the soundness probes (one repeat), two tasks at a time."""
    return validate_cells(sandbox, NAMES, BUILT_LEVELS, "test-services", 700)


@pytest.mark.docker
@pytest.mark.parametrize("level", BUILT_LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_levels_of_every_service_family_build_and_grade_soundly(outcomes, name, level):
    # (what the reference changes in a service, no file probe can fake: those few shortcuts are
    # the file probes'; the service's own routes are the red team's, test_services_red_team.py)
    assert_sound(outcomes[(name, level)], shortcuts=2)
