"""How much of a task's field is found in a benchmark task's: word n-gram overlap and a fuzzy
ratio of short texts, and the thresholds that make an overlap a contamination."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz

from endless_assets.decontamination.fields import FIELDS, HEX, HOME, KEPT_TEXT_WORDS, word_hashes

FUZZY = "fuzzy"
_EMPTY = np.empty(0, dtype=np.uint64)
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
# The placeholders: an n-gram of them alone (a row of numbers) says nothing of its source.
_PLACEHOLDERS = np.unique(word_hashes(["0", HOME, HEX]))


@dataclass(frozen=True)
class Thresholds:
    """When a task counts as contaminated by a benchmark task.

    - ngram_sizes: word n-gram sizes compared (13 and 8, as TMAX; the smallest finds candidates);
    - min_shared: distinctive n-grams a field must share with the benchmark task's (1: any);
    - min_shared_code: the same for code and fixtures, found through the near-duplicate index (a
      two-line Dockerfile is the same in most tasks built alike: a few lines, not a line);
    - boilerplate_tasks: an n-gram in this many tasks of one reference set never counts;
    - fuzzy_ratio: rapidfuzz's `fuzz.ratio` / 100 from which two short texts are one (0.8, as
      OpenThoughts-Agent), for `fuzzy_fields` (prose: code is too formulaic) shorter than
      `short_text_words`, where n-grams are too few to tell;
    - exact_fields: fields whose every distinctive n-gram is indexed (the published checks, on
      instructions); the others go through the MinHash LSH index (`lsh_threshold`, `num_perm`).
    """

    ngram_sizes: tuple[int, ...] = (13, 8)
    min_shared: int = 1
    min_shared_code: int = 6
    boilerplate_tasks: int = 3
    fuzzy_ratio: float = 0.8
    short_text_words: int = 50
    fuzzy_fields: tuple[str, ...] = ("instruction",)
    exact_fields: tuple[str, ...] = ("instruction",)
    lsh_threshold: float = 0.5
    num_perm: int = 64

    def __post_init__(self) -> None:
        sizes = self.ngram_sizes
        if not sizes or any(not isinstance(n, int) or n < 1 for n in sizes):
            raise ValueError(f"ngram_sizes {sizes!r} must be whole numbers of at least 1")
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"ngram_sizes {sizes!r} lists a size twice")
        if self.min_shared < 1 or self.min_shared_code < 1:
            raise ValueError(
                f"min_shared {self.min_shared} and min_shared_code {self.min_shared_code} must "
                "be at least 1"
            )
        if self.boilerplate_tasks < 2:
            raise ValueError(f"boilerplate_tasks {self.boilerplate_tasks} must be at least 2")
        if not 0 < self.fuzzy_ratio <= 1:
            raise ValueError(f"fuzzy_ratio {self.fuzzy_ratio} must be in (0, 1]")
        if not 1 <= self.short_text_words <= KEPT_TEXT_WORDS:
            raise ValueError(
                f"short_text_words {self.short_text_words} must be from 1 to {KEPT_TEXT_WORDS}"
            )
        for name in ("fuzzy_fields", "exact_fields"):
            unknown = [f for f in getattr(self, name) if f not in FIELDS]
            if unknown:
                raise ValueError(
                    f"{name} names {', '.join(unknown)}, not a field ({', '.join(FIELDS)})"
                )
        if not 0 < self.lsh_threshold < 1:
            raise ValueError(f"lsh_threshold {self.lsh_threshold} must be in (0, 1)")
        if not 2 <= self.num_perm <= 1024:
            raise ValueError(f"num_perm {self.num_perm} must be from 2 to 1024")

    @property
    def smallest(self) -> int:
        return min(self.ngram_sizes)


def ngram_measure(n: int) -> str:
    return f"ngram{n}"


def ngrams(words: np.ndarray, n: int) -> np.ndarray:
    """The distinct n-grams of a word-hash sequence, each a 64-bit hash, sorted; those made of
    placeholders alone (numbers, home directories, hex tokens) left out."""
    count = len(words) - n + 1
    if count <= 0:
        return _EMPTY
    grams = words[:count].copy()
    for k in range(1, n):
        grams *= _MULTIPLIER
        grams += words[k : k + count]
    placeholders = np.concatenate(([0], np.cumsum(isin(words, _PLACEHOLDERS))))
    return np.unique(grams[placeholders[n:] - placeholders[:-n] < n])


def field_ngrams(files: tuple[np.ndarray, ...], n: int) -> np.ndarray:
    """The distinct n-grams of a field, over its files (none spans two files)."""
    if not files:
        return _EMPTY
    if len(files) == 1:
        return ngrams(files[0], n)
    return np.unique(np.concatenate([ngrams(words, n) for words in files]))


def without(grams: np.ndarray, common: np.ndarray) -> np.ndarray:
    """`grams` but those in `common` (both sorted and distinct)."""
    if not len(common) or not len(grams):
        return grams
    return grams[~isin(grams, common)]


def isin(grams: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Which of `grams` are in `sorted_keys` (a boolean mask)."""
    if not len(sorted_keys):
        return np.zeros(len(grams), dtype=bool)
    at = np.searchsorted(sorted_keys, grams)
    at[at == len(sorted_keys)] = 0
    return sorted_keys[at] == grams


@dataclass(frozen=True)
class Overlap:
    shared: int  # n-grams of the task's field found in the reference's
    distinctive: int  # of those, the ones that are no reference set's boilerplate
    share: float  # shared / the task's n-grams


def overlap(task: np.ndarray, reference: np.ndarray, common: np.ndarray) -> Overlap:
    """The n-grams of a task's field (`task`) found in a reference task's (all three sorted,
    distinct; `common`: the field's boilerplate)."""
    if not len(task) or not len(reference):
        return Overlap(0, 0, 0.0)
    both = np.intersect1d(task, reference, assume_unique=True)
    distinctive = int(len(both) - isin(both, common).sum()) if len(both) else 0
    return Overlap(len(both), distinctive, len(both) / len(task))


def fuzzy_ratio(a: str, b: str) -> float:
    """rapidfuzz's normalised Indel ratio of two normalised texts, from 0 to 1."""
    return fuzz.ratio(a, b) / 100.0
