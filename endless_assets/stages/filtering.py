"""Moved to models.py (kept until the re-layout rewrites its importers)."""

from endless_assets.models import (
    DIFFICULTY_THRESHOLDS,
    KeepRule,
    TaskScore,
    difficulty_label,
    pass_at_curve,
    pass_at_k,
    score_task,
    score_tasks,
)

__all__ = [
    "DIFFICULTY_THRESHOLDS",
    "KeepRule",
    "TaskScore",
    "difficulty_label",
    "pass_at_curve",
    "pass_at_k",
    "score_task",
    "score_tasks",
]
