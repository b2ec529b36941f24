"""Large batches in shards: `endless run --tasks N` above `shard_tasks` runs one partition as
several runs: the describe stage once; one run per shard (tag `endless/shard=i/n`) of the build,
validation and solver stages over the tasks the shard owns (a stable hash of the task id), rows
journaled as they finish and staged beside the lake (`<data_dir>/shards/...`, never in it); then
the whole job once more, every stage finding its rows in the journals and writing the partition
as one file. Shard runs can run at once, on any machine of a team instance, and a lost shard is
rerun alone.
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
