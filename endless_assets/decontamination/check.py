"""The check of one task against the reference sets: which benchmark tasks it shares a field with,
by which measure, how much, and the rejection reason it gives."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from endless_assets.decontamination.fields import FIELDS, TaskFields, Words, task_words
from endless_assets.decontamination.index import ReferenceIndex
from endless_assets.decontamination.measures import (
    FUZZY,
    Thresholds,
    field_ngrams,
    ngram_measure,
    overlap,
)
from endless_assets.decontamination.references import ReferenceTask


@dataclass(frozen=True)
class Hit:
    """A field of the task found in a benchmark task's same field: by `measure` (`ngram13`,
    `ngram8`: the share of the field's n-grams found there; `fuzzy`: the ratio of the texts)."""

    reference_set: str
    reference_task: str
    field: str
    measure: str
    value: float


class Decontaminator:
    """Built once per run from the reference tasks (the index); `check` is then one task at a
    time, read-only (threads may share it)."""

    def __init__(
        self, references: Iterable[ReferenceTask], thresholds: Thresholds | None = None
    ) -> None:
        self.thresholds = thresholds or Thresholds()
        self.index = ReferenceIndex(list(references), self.thresholds)

    def check(self, task: TaskFields) -> list[Hit]:
        """Every hit of `task`, strongest first ([]: not contaminated)."""
        return self.check_words(task_words(task))

    def check_words(self, words: Words) -> list[Hit]:
        """`check` of a task's words (`task_words`), e.g. made once for several checks."""
        limits = self.thresholds
        hits: list[Hit] = []
        for field in FIELDS:
            files = words.files.get(field, ())
            if not files:
                continue
            candidates = self.index.candidates(field, files)
            least = limits.min_shared if field in limits.exact_fields else limits.min_shared_code
            mine: dict[int, np.ndarray] = {}
            for i in sorted(candidates):
                reference = self.index.tasks[i]
                theirs = reference.words.files.get(field, ())
                for n in limits.ngram_sizes:
                    if n not in mine:
                        mine[n] = field_ngrams(files, n)
                    found = overlap(
                        mine[n], field_ngrams(theirs, n), self.index.boilerplate[field][n]
                    )
                    if found.distinctive >= least:
                        hits.append(_hit(reference, field, ngram_measure(n), found.share))
            text = words.texts.get(field)
            if text and field in limits.fuzzy_fields and self._short(words, field):
                for i, ratio in self.index.fuzzy(field, text):
                    hits.append(_hit(self.index.tasks[i], field, FUZZY, ratio))
        return sorted(hits, key=_strength)

    def _short(self, words: Words, field: str) -> bool:
        return words.count(field) < self.thresholds.short_text_words


def _hit(reference: ReferenceTask, field: str, measure: str, value: float) -> Hit:
    return Hit(reference.reference_set, reference.name, field, measure, round(float(value), 6))


def _strength(hit: Hit) -> tuple[Any, ...]:
    """Strongest first: the higher value; on a tie the longer n-grams (the fuzzy ratio last),
    then the earlier field."""
    size = hit.measure.removeprefix("ngram")
    rank = -int(size) if size.isdigit() else 0
    return (-hit.value, rank, FIELDS.index(hit.field), hit.reference_set, hit.reference_task)


def strongest(hits: Iterable[Hit]) -> Hit | None:
    """The strongest of `hits` (None when there are none)."""
    return min(hits, key=_strength, default=None)


def rejection_reason(hits: Iterable[Hit]) -> str:
    """`contaminated: <set>/<task> (<field>, <measure> <value>)` of the strongest hit."""
    hit = strongest(hits)
    if hit is None:
        raise ValueError("a task without hits is not contaminated")
    return (
        f"contaminated: {hit.reference_set}/{hit.reference_task} "
        f"({hit.field}, {hit.measure} {hit.value:.2f})"
    )
