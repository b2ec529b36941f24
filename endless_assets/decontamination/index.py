"""The reference tasks indexed once per run: each set's boilerplate n-grams, an exact n-gram index
of some fields, a MinHash LSH index of the others' files, and the fuzzy fields' short texts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from datasketch import MinHash, MinHashLSH
from rapidfuzz import fuzz, process

from endless_assets.decontamination.fields import FIELDS
from endless_assets.decontamination.measures import (
    Thresholds,
    field_ngrams,
    ngrams,
    without,
)
from endless_assets.decontamination.references import ReferenceTask

_EMPTY = np.empty(0, dtype=np.uint64)
_SEED = 1  # the MinHash permutations: the same for references and tasks


def _identity(value: int) -> int:
    return value


@dataclass(frozen=True)
class _Inverted:
    """n-gram -> the reference tasks that have it: distinct n-grams sorted, with the start of
    each one's owners in `owners`."""

    keys: np.ndarray
    starts: np.ndarray  # len(keys) + 1
    owners: np.ndarray

    @classmethod
    def build(cls, per_task: list[np.ndarray]) -> _Inverted:
        sizes = [len(g) for g in per_task]
        if not sum(sizes):
            return cls(_EMPTY, np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32))
        grams = np.concatenate(per_task)
        owners = np.repeat(np.arange(len(per_task), dtype=np.int32), sizes)
        order = np.argsort(grams, kind="stable")
        grams, owners = grams[order], owners[order]
        keys, starts = np.unique(grams, return_index=True)
        return cls(keys, np.append(starts, len(grams)), owners)

    def owners_of(self, grams: np.ndarray) -> set[int]:
        if not len(self.keys) or not len(grams):
            return set()
        at = np.searchsorted(self.keys, grams)
        inside = at < len(self.keys)
        at, grams = at[inside], grams[inside]
        at = at[self.keys[at] == grams]
        found: set[int] = set()
        for p in at.tolist():
            found.update(self.owners[self.starts[p] : self.starts[p + 1]].tolist())
        return found


class ReferenceIndex:
    """Built once from the reference tasks; read-only afterwards (safe to share between
    threads)."""

    def __init__(self, tasks: Sequence[ReferenceTask], thresholds: Thresholds) -> None:
        self.tasks = tuple(tasks)
        self.thresholds = thresholds
        self.boilerplate = {
            field: {n: self._boilerplate(field, n) for n in thresholds.ngram_sizes}
            for field in FIELDS
        }
        self._prototype = MinHash(num_perm=thresholds.num_perm, seed=_SEED, hashfunc=_identity)
        self._exact: dict[str, _Inverted] = {}
        self._lsh: dict[str, MinHashLSH] = {}
        self._entries: dict[str, list[int]] = {}  # LSH key -> task
        self._short: dict[str, tuple[list[str], list[int]]] = {}
        for field in FIELDS:
            if field in thresholds.exact_fields:
                self._exact[field] = _Inverted.build(
                    [self._distinctive(field, t.words.files.get(field, ())) for t in self.tasks]
                )
            else:
                self._index_files(field)
            if field in thresholds.fuzzy_fields:
                short = [
                    (t.words.texts[field], i)
                    for i, t in enumerate(self.tasks)
                    if field in t.words.texts and t.words.count(field) < thresholds.short_text_words
                ]
                self._short[field] = ([s for s, _ in short], [i for _, i in short])

    def _boilerplate(self, field: str, n: int) -> np.ndarray:
        """The n-grams of `field` found in at least `boilerplate_tasks` tasks of one set."""
        by_set: dict[str, list[np.ndarray]] = defaultdict(list)
        for task in self.tasks:
            grams = field_ngrams(task.words.files.get(field, ()), n)
            if len(grams):
                by_set[task.reference_set].append(grams)
        least = self.thresholds.boilerplate_tasks
        common = []
        for found in by_set.values():
            if len(found) >= least:
                values, counts = np.unique(np.concatenate(found), return_counts=True)
                common.append(values[counts >= least])
        return np.unique(np.concatenate(common)) if common else _EMPTY

    def _distinctive(self, field: str, files: tuple[np.ndarray, ...]) -> np.ndarray:
        n = self.thresholds.smallest
        return without(field_ngrams(files, n), self.boilerplate[field][n])

    def _file_grams(self, field: str, words: np.ndarray) -> np.ndarray:
        n = self.thresholds.smallest
        return without(ngrams(words, n), self.boilerplate[field][n])

    def _sketch(self, grams: np.ndarray, sketch: MinHash) -> MinHash:
        """`sketch` (one per caller, reused: LSH keeps band hashes, not sketches) made the
        MinHash of `grams`."""
        sketch.clear()
        sketch.update_batch((grams >> np.uint64(32)).tolist())
        return sketch

    def _index_files(self, field: str) -> None:
        lsh = MinHashLSH(threshold=self.thresholds.lsh_threshold, num_perm=self.thresholds.num_perm)
        entries: list[int] = []
        sketch = self._prototype.copy()
        with lsh.insertion_session() as session:
            for i, task in enumerate(self.tasks):
                for words in task.words.files.get(field, ()):
                    grams = self._file_grams(field, words)
                    if len(grams):
                        key, made = len(entries), self._sketch(grams, sketch)
                        session.insert(key, made, check_duplication=False)
                        entries.append(i)
        self._lsh[field], self._entries[field] = lsh, entries

    def candidates(self, field: str, files: tuple[np.ndarray, ...]) -> set[int]:
        """The reference tasks whose `field` may share distinctive n-grams with these files: any
        shared n-gram for an exact field, a near-duplicate file for the others."""
        if not files:
            return set()
        if field in self._exact:
            return self._exact[field].owners_of(self._distinctive(field, files))
        lsh, entries = self._lsh[field], self._entries[field]
        if not entries:
            return set()
        found: set[int] = set()
        sketch = self._prototype.copy()
        for words in files:
            grams = self._file_grams(field, words)
            if len(grams):
                found.update(entries[key] for key in lsh.query(self._sketch(grams, sketch)))
        return found

    def fuzzy(self, field: str, text: str) -> list[tuple[int, float]]:
        """(reference task, ratio) for the short texts of `field` at least `fuzzy_ratio` alike."""
        choices, owners = self._short.get(field, ([], []))
        if not choices:
            return []
        cutoff = self.thresholds.fuzzy_ratio * 100
        found = process.extract(text, choices, scorer=fuzz.ratio, score_cutoff=cutoff, limit=None)
        return [(owners[at], score / 100.0) for _, score, at in found]

    def summary(self) -> dict[str, int]:
        """Sizes, for logs: reference tasks, LSH entries, exact n-grams, boilerplate n-grams."""
        return {
            "reference_tasks": len(self.tasks),
            "lsh_entries": sum(len(e) for e in self._entries.values()),
            "exact_ngrams": sum(len(x.keys) for x in self._exact.values()),
            "boilerplate_ngrams": sum(
                len(grams) for sizes in self.boilerplate.values() for grams in sizes.values()
            ),
            "short_texts": sum(len(c) for c, _ in self._short.values()),
        }
