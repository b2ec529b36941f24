"""A golden batch: per table and column, a digest of the rows a procedural batch produces, with
what legitimately varies between runs and machines taken out (timings, timestamps, image ids,
build logs). Refactors must leave it unchanged; a change names the table and the columns.

Regenerate (only for an intended change of the rows): ENDLESS_UPDATE_GOLDEN=1 pytest -k golden
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import polars as pl

GOLDEN = Path(__file__).parent / "golden" / "procedural_batch.json"
VOLATILE = {
    "seconds",
    "queue_seconds",
    "build_seconds",
    "created_at",
    "image_tag",
    "image_id",
    "attempt_log",
}
KEYS = ("task_id", "rollout_idx", "solver_model")
_TIMING = re.compile(r"\d+\.\d+s\b|\d+(\.\d+)? ?(ms|seconds)\b")
_HEX = re.compile(r"(?<![0-9a-f])[0-9a-f]{12,64}(?![0-9a-f])")


def _normal(value: object) -> object:
    if isinstance(value, str):
        if value[:1] in "[{":
            try:
                return _normal(json.loads(value))
            except ValueError:
                pass
        return _HEX.sub("<hex>", _TIMING.sub("<t>", value))
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in sorted(value.items()) if "seconds" not in k}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, float):
        return round(value, 9)
    return value


def digest(table: str, frame: pl.DataFrame) -> dict[str, object]:
    keys = [k for k in KEYS if k in frame.columns]
    frame = frame.sort(keys)
    columns = {}
    for name in frame.columns:
        if name in VOLATILE:
            continue
        values = [_normal(v) for v in frame[name].to_list()]
        text = json.dumps(values, sort_keys=True, default=str)
        columns[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return {"rows": frame.height, "task_ids": sorted(set(frame["task_id"])), "columns": columns}


def differences(expected: dict, actual: dict) -> list[str]:
    found = []
    for table, want in expected.items():
        have = actual.get(table)
        if have is None:
            found.append(f"{table}: missing")
            continue
        if have["rows"] != want["rows"] or have["task_ids"] != want["task_ids"]:
            found.append(f"{table}: {have['rows']} rows, expected {want['rows']} (or other ids)")
        changed = [c for c, h in want["columns"].items() if have["columns"].get(c) != h]
        added = sorted(set(have["columns"]) - set(want["columns"]))
        if changed or added:
            found.append(f"{table}: columns changed {changed}, added {added}")
    return found
