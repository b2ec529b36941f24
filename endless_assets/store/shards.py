"""Large batches in shards: one day of 10,000 tasks is not one step.

`endless run --tasks N` with N above `shard_tasks` runs the batch as runs of the same partition:
1. the describe stage (and the base image) once, for the whole batch;
2. one run per shard (tag `endless/shard=i/n`) of the per-task the build, validation and solver
   stages: each works only on the tasks the shard owns (a stable hash of the task id), and each
   finished row is journaled as it finishes (store/journal.py); the shard's table rows are staged
   beside the lake (`<data_dir>/shards/<table>/batch=<key>/<i>-of-<n>.parquet`), where the run's
   next stage reads them, never in it;
3. the whole job once more: every stage finds its rows in the journals (no container, no model
   request, except to retry a harness error), writes the partition as one file and the filter stage
   filters it.
So the lake, lineage and the SQL views are those of one run; shard runs can run at once, on any
machine of a team instance (`--submit`), and a lost shard is rerun alone.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

TAG = "endless/shard"
_SPEC = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __post_init__(self) -> None:
        if not (self.count >= 1 and 0 <= self.index < self.count):
            raise ValueError(f"shard {self.index}/{self.count}: the index must be in 0..count-1")

    @property
    def tag(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def file_name(self) -> str:
        return f"{self.index:04d}-of-{self.count:04d}.parquet"

    def owns(self, task_id: str) -> bool:
        return shard_index(task_id, self.count) == self.index


def shard_index(task_id: str, count: int) -> int:
    digest = hashlib.sha256(task_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse(text: str | None) -> Shard | None:
    """A run's shard tag ("3/20") as a Shard; None without one. ValueError for a bad tag."""
    if not text:
        return None
    match = _SPEC.match(text.strip())
    if not match:
        raise ValueError(f"{TAG} must look like 3/20 (shard 3 of 20), got {text!r}")
    return Shard(int(match.group(1)), int(match.group(2)))


def count_for(tasks: int, shard_tasks: int) -> int:
    """Shards of a batch of `tasks` with at most `shard_tasks` each (1: no sharding)."""
    return max(1, math.ceil(tasks / max(1, shard_tasks)))
