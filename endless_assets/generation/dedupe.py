"""Near-duplicate tasks: the same instruction with cosmetic changes (names, numbers, paths).

Instructions are normalised (lower case, every number -> "0"), cut into word tokens, and
compared as sets of word 3-grams ("shingles") by their Jaccard similarity: |A ∩ B| / |A ∪ B|.
Renaming a file or changing a count touches a few shingles; a different task shares almost
none. A task is a near-duplicate when its similarity to a task already kept (earlier in the
same batch, or in any other batch of the lake) reaches the threshold.

Candidates are found with an inverted index from shingle to the batch's tasks, so checking a
batch of N new tasks against H stored ones costs one pass over the H stored instructions with
memory for the N new ones, and the similarity reported is exact, not estimated.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from endless_assets.models import OK, REJECTED
from endless_assets.store.lake import Lake

SHINGLE_WORDS = 3
_TOKEN = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(_NUMBER.sub("0", text.lower()))


def shingles(text: str, k: int = SHINGLE_WORDS) -> frozenset[int]:
    """The set of hashed word k-grams of a normalised text (one shingle if it is shorter)."""
    words = tokens(text)
    if not words:
        return frozenset()
    grams = (
        [" ".join(words)]
        if len(words) < k
        else [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)]
    )
    return frozenset(
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "big") for g in grams
    )


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


@dataclass(frozen=True)
class Match:
    task_id: str
    batch: str
    similarity: float

    def reason(self) -> str:
        return (
            f"duplicate: near-duplicate of {self.task_id} (batch {self.batch}): "
            f"{self.similarity:.0%} of their word 3-grams are shared"
        )


@dataclass
class ShingleIndex:
    """Shingle sets indexed by shingle: which indexed sets are similar to a given one."""

    _sets: list[frozenset[int]] = field(default_factory=list)
    _postings: dict[int, list[int]] = field(default_factory=dict)

    def add(self, text_shingles: frozenset[int]) -> int:
        slot = len(self._sets)
        self._sets.append(text_shingles)
        for s in text_shingles:
            self._postings.setdefault(s, []).append(slot)
        return slot

    def similar(self, text_shingles: frozenset[int], threshold: float) -> list[tuple[int, float]]:
        """(slot, Jaccard similarity) of every indexed set at or above the threshold."""
        overlap: Counter[int] = Counter()
        for s in text_shingles:
            for slot in self._postings.get(s, ()):
                overlap[slot] += 1
        found = []
        for slot, common in overlap.items():
            similarity = common / (len(text_shingles) + len(self._sets[slot]) - common)
            if similarity >= threshold:
                found.append((slot, similarity))
        return found


@dataclass(frozen=True)
class Candidate:
    """A task to check: its position in the batch, id, batch and instruction."""

    position: int
    task_id: str
    batch: str
    instruction: str


def find_near_duplicates(
    candidates: list[Candidate],
    stored: Iterable[tuple[str, str, str]],
    threshold: float,
) -> dict[int, Match]:
    """Which candidates duplicate a stored task `(task_id, batch, instruction)` or an earlier
    candidate; returns position -> the best match.

    Candidates are taken in order; one found to be a duplicate is not indexed, so a chain of
    near-copies within the batch is matched to the first of them, which is kept.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"the near-duplicate threshold must be in (0, 1], got {threshold}")
    sets = [shingles(c.instruction) for c in candidates]
    found: dict[int, Match] = {}
    # 1. Against the stored tasks, streamed: memory for the batch only.
    batch_index = ShingleIndex()
    for s in sets:
        batch_index.add(s)
    for task_id, batch, instruction in stored:
        for slot, similarity in batch_index.similar(shingles(instruction), threshold):
            position = candidates[slot].position
            previous = found.get(position)
            if previous is None or similarity > previous.similarity:
                found[position] = Match(task_id, batch, similarity)
    # 2. Within the batch, in order, against the candidates kept so far.
    kept_index = ShingleIndex()
    kept: list[Candidate] = []
    for c, s in zip(candidates, sets, strict=True):
        if c.position in found:
            continue
        matches = kept_index.similar(s, threshold)
        if matches:
            slot, similarity = max(matches, key=lambda m: (m[1], -m[0]))
            found[c.position] = Match(kept[slot].task_id, kept[slot].batch, similarity)
            continue
        kept_index.add(s)
        kept.append(c)
    return found


def reject_duplicates(
    rows: list[dict[str, Any]], lake: Lake, threshold: float
) -> list[dict[str, Any]]:
    """Reject the describe stage rows whose instruction nearly repeats a task kept earlier in this
    batch or in any other batch of the lake; record the matched task id."""
    candidates = [
        Candidate(i, r["task_id"], r["batch"], r["instruction"])
        for i, r in enumerate(rows)
        if r["status"] == OK
    ]
    if not candidates:
        return rows
    batches = {c.batch for c in candidates}
    found = find_near_duplicates(candidates, _stored_tasks(lake, exclude=batches), threshold)
    result = list(rows)
    for position, match in found.items():
        result[position] = {
            **rows[position],
            "status": REJECTED,
            "reject_reason": match.reason(),
            "duplicate_of": match.task_id,
        }
    return result


def _stored_tasks(lake: Lake, exclude: set[str]) -> Iterator[tuple[str, str, str]]:
    """(task_id, batch, instruction) of every task kept at the describe stage in other batches."""
    if not lake.has_data("task_descriptions"):
        return iter(())
    frame = (
        pl.scan_parquet(
            lake.table_glob("task_descriptions"),
            hive_partitioning=False,
            missing_columns="insert",
            extra_columns="ignore",
        )
        .filter((pl.col("status") == OK) & ~pl.col("batch").is_in(sorted(exclude)))
        .select("task_id", "batch", "instruction")
        .collect()
    )
    return frame.iter_rows()
