"""What a batch costs when this instance has no history of its settings: the prior of
`endless run --plan` (store/costs.py), per unit of each stage, and the share of asked tasks that
reach each stage. The Docker figures were measured on a 2-core VM (docs/pipeline.md#what-a-batch-
will-cost), the LLM ones are those the docs give: a guess of the right order, which one batch
made here replaces.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass


@dataclass(frozen=True)
class PerUnit:
    """A stage's cost per unit of its work."""

    requests: float = 0.0
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    containers: float = 0.0
    engine_cpu_seconds: float | None = 0.0
    wall_seconds: float = 0.0

    def plus(self, other: PerUnit) -> PerUnit:
        pairs = zip(astuple(self), astuple(other), strict=True)
        return PerUnit(*(None if a is None or b is None else a + b for a, b in pairs))


# The Docker work of a task (or an attempt) of the procedural generator with the oracle solver.
DOCKER = {
    "describe": PerUnit(wall_seconds=0.05),
    "environment": PerUnit(containers=1, engine_cpu_seconds=0.9, wall_seconds=0.7),
    "completion test": PerUnit(containers=1, engine_cpu_seconds=0.9, wall_seconds=0.6),
    "solver rollouts": PerUnit(containers=1, engine_cpu_seconds=0.3, wall_seconds=0.8),
}
# The soundness stage per task, by mode (3 repeats: the default).
SOUNDNESS = {
    "full": PerUnit(containers=3, engine_cpu_seconds=4.8, wall_seconds=3.4),
    "controls": PerUnit(containers=3, engine_cpu_seconds=3.5, wall_seconds=2.5),
    "off": PerUnit(),
}
# A stage's step per run, whatever its size: setting up, reading and writing its tables.
FIXED_SECONDS = 0.8
# What the LLM generator adds per task entering each stage (no repair round: 4 requests a task).
LLM_GENERATOR = {
    "describe": PerUnit(requests=1, tokens_in=900, tokens_out=700, wall_seconds=3.0),
    "environment": PerUnit(requests=2, tokens_in=2400, tokens_out=900, wall_seconds=3.0),
    "completion test": PerUnit(requests=1, tokens_in=1500, tokens_out=600, wall_seconds=2.0),
}
# The model probes of `soundness=full` with an auditor model: an alignment request, a cheat
# rollout in one more container, a judge request.
AUDIT = PerUnit(requests=6, tokens_in=15000, tokens_out=1500, containers=1, wall_seconds=10.0)
# A chat attempt: a request per turn, the context growing turn by turn.
CHAT_TURN = PerUnit(requests=1, tokens_in=2500, tokens_out=200, wall_seconds=1.5)
OTHER_WALL_SECONDS = 3.0  # per run: the base image, decontamination, the filter, Dagster
# Shares of the asked tasks that reach each stage with the LLM generator (procedural: all).
LLM_SURVIVAL = {"environment": 0.95, "completion test": 0.85, "soundness": 0.75}
SOUND_SHARE = 0.9  # of the tasks entering soundness, the share it passes (full or controls)

SOURCE = "prior (docs figures of a 2-core machine)"


def prior_per_unit(stage: str, profile) -> PerUnit:
    """The prior cost of one unit of `stage` under `profile` (a store.costs.Profile)."""
    if stage == "other":
        return PerUnit(wall_seconds=OTHER_WALL_SECONDS)
    if stage == "soundness":
        figures = SOUNDNESS.get(profile.soundness, SOUNDNESS["full"])
        if profile.soundness != "off" and profile.soundness_repeats != 3:
            figures = scaled(figures, profile.soundness_repeats / 3)
        if profile.soundness == "full" and profile.auditor_model:
            figures = figures.plus(AUDIT)
        return figures
    figures = DOCKER[stage]
    if stage == "solver rollouts":
        if profile.solver == "chat":
            figures = figures.plus(scaled(CHAT_TURN, max(1.0, profile.max_turns / 2)))
        return figures
    if profile.generator == "llm":
        figures = figures.plus(LLM_GENERATOR[stage])
    return figures


def prior_fixed(stage: str) -> float:
    """The prior wall time of the stage's step per run that does not grow with the batch."""
    return 0.0 if stage == "other" else FIXED_SECONDS


def prior_survival(stage: str, profile) -> float:
    """The prior share of the asked tasks that enter `stage`."""
    if stage in ("describe", "other") or profile.generator != "llm":
        return 1.0
    if stage in LLM_SURVIVAL:
        return LLM_SURVIVAL[stage]
    passed = 1.0 if profile.soundness == "off" else SOUND_SHARE
    return LLM_SURVIVAL["soundness"] * passed


def scaled(figures: PerUnit, factor: float) -> PerUnit:
    return PerUnit(*(None if x is None else x * factor for x in astuple(figures)))
