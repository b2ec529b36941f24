"""The frontier draw on held-out shapes of generator and solver, ones the pooled model was not
built around (worlds.HELD_OUT): five daily batches of 40 at k = 4 over 60 cells reach a
learnable share of 70% pooled over the last two. (The shapes where no draw under the sampler's
rules reaches it, worlds.CAPPED, are measured against a draw that knows the world in
bench/frontier_simulation.py.)"""

from __future__ import annotations

import pytest

from endless_assets.sampling.simulation import frontier, simulate
from endless_assets.sampling.worlds import HELD_OUT, shaped_world

SETUP = {"batches": 5, "n": 40, "k": 4, "seed": 0}


def late_share(world, policy) -> float:
    frame = simulate(world, policy, **SETUP).shares().tail(2)
    return frame["learnable"].sum() / frame["kept"].sum()


@pytest.mark.parametrize("shape", HELD_OUT)
def test_a_held_out_shape_reaches_seventy_percent_over_the_last_two_batches(shape):
    assert late_share(shaped_world(shape, 10, seed=0), frontier) >= 0.7
