"""Settings of the describe stage's draw: which cells a batch's tasks are drawn from, steered by
what the solver made of the batches before it (sampling/)."""

from __future__ import annotations

from dataclasses import dataclass

from endless_assets.settings.declare import setting


@dataclass(frozen=True)
class SamplingSettings:
    sampler: str = setting(
        "auto",
        "ENDLESS_SAMPLER",
        "how the describe stage chooses each task's cell: frontier (cells drawn where a task "
        "teaches most "
        "per token, by a model of the solver's pass rates over categories and levels fitted to "
        "its history of earlier batches; uniform over the cells until there is one), uniform "
        "(the generator's own seeded deal, as a batch has always been drawn) or "
        "auto (frontier with the chat solver, uniform with oracle and noop, which cannot steer)",
        choices=("auto", "frontier", "uniform"),
    )
    target_pass_rate: float = setting(
        0.5,
        "ENDLESS_TARGET_PASS_RATE",
        "frontier: the pass rate where a drawn task's training signal peaks (strictly between 0 "
        "and 1); the draw aims inside the keep band, min_pass_rate to max_pass_rate",
    )
    window: int = setting(
        14,
        "ENDLESS_SAMPLER_WINDOW",
        "frontier: daily batches of history a draw reads",
        name="sampler_window",
    )
    exploration_floor: float = setting(
        0.2,
        "ENDLESS_EXPLORATION_FLOOR",
        "frontier: share of a batch given to the cells drawn least and longest ago, so every "
        "cell is drawn now and then",
    )
    evolve_budget: float = setting(
        0.1,
        "ENDLESS_EVOLVE_BUDGET",
        "frontier: share of a batch given to variants (a level harder of a task solved in every "
        "attempt, easier of one never solved)",
    )
