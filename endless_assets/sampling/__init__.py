"""Steering generation towards the solver's frontier: cells and their history, the sampler that
draws a batch over them, variants of past tasks, and the share of tasks that can teach."""

from endless_assets.sampling.cells import Cell, family_cells, taxonomy_cells
from endless_assets.sampling.evolve import Proposal, candidates, combine, propose
from endless_assets.sampling.history import History, cell_batches, history_from_lake, read_history
from endless_assets.sampling.measures import cost_per_learnable, learnable_share, task_costs
from endless_assets.sampling.policy import Draw, batch_rng, draw

__all__ = [
    "Cell",
    "Draw",
    "History",
    "Proposal",
    "batch_rng",
    "candidates",
    "cell_batches",
    "combine",
    "cost_per_learnable",
    "draw",
    "family_cells",
    "history_from_lake",
    "learnable_share",
    "propose",
    "read_history",
    "task_costs",
    "taxonomy_cells",
]
