"""Benchmark decontamination: a task is compared with every task of the reference sets field by
field (instruction, tests, solution, Dockerfile, fixtures), not by its instruction alone."""

from endless_assets.decontamination.check import (
    Decontaminator,
    Hit,
    rejection_reason,
    strongest,
)
from endless_assets.decontamination.fields import (
    FIELDS,
    TaskFields,
    Words,
    field_texts,
    normalise,
    task_words,
)
from endless_assets.decontamination.index import ReferenceIndex
from endless_assets.decontamination.measures import Thresholds
from endless_assets.decontamination.references import (
    ReadStats,
    References,
    ReferenceTask,
    TaskProblem,
    read_references,
    reference_task,
)
from endless_assets.settings.references import ReferenceSource, parse_references

__all__ = [
    "FIELDS",
    "Decontaminator",
    "Hit",
    "ReadStats",
    "ReferenceIndex",
    "ReferenceSource",
    "ReferenceTask",
    "References",
    "TaskFields",
    "TaskProblem",
    "Thresholds",
    "Words",
    "field_texts",
    "normalise",
    "parse_references",
    "read_references",
    "reference_task",
    "rejection_reason",
    "strongest",
    "task_words",
]
