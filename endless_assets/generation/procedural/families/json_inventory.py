"""The leveled server inventory of the JSON family: records with numbers written as strings,
broken records and servers listed twice, what the outputs must hold, and the reference."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from endless_assets.generation.procedural.base import dedent, iso_stamp
from endless_assets.generation.procedural.names import PEOPLE
from endless_assets.generation.procedural.render import kept

ENVS = ["prod", "staging", "dev"]
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"]
TAGS = ["web", "db", "cache", "batch", "gpu", "edge", "legacy", "monitoring"]
STATUSES = ["active", "active", "active", "maintenance", "decommissioned"]

Record = dict[str, Any]


def server(rng: random.Random, project: str, n: int) -> Record:
    """Server `n` of `project`'s inventory: its host name, place, size, status, tags, owner."""
    return {
        "hostname": f"{project}-{rng.choice(TAGS)}-{n:02d}",
        "env": rng.choice(ENVS),
        "region": rng.choice(REGIONS),
        "cpu_cores": rng.choice([2, 4, 8, 16, 32]),
        "memory_gb": rng.choice([4, 8, 16, 32, 64, 128]),
        "status": rng.choice(STATUSES),
        "tags": sorted(rng.sample(TAGS, rng.randint(0, 3))),
        "owner": rng.choice(PEOPLE),
    }


def record(rng: random.Random, project: str, n: int, offsets: bool) -> Record:
    at = datetime(2026, 4, 1) + timedelta(minutes=rng.randrange(20 * 24 * 60))
    offset = rng.choice([0, 120, -300]) if offsets else 0
    return {"id": 100 + n, **server(rng, project, n), "updated_at": iso_stamp(at, offset)}


def num(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def valid(r: dict[str, Any]) -> bool:
    numbers = (num(r.get("memory_gb")), num(r.get("cpu_cores")))
    return isinstance(r.get("hostname"), str) and None not in numbers


def instant(r: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(r["updated_at"].replace("Z", "+00:00"))


def break_records(rng: random.Random, records: list[Record], docs: list[list[Record]], level: int):
    """Break some records, and list some servers again in another of `docs`, newer or older
    (at level 6 with offsets that make a string comparison of the stamps say the opposite)."""
    for r in rng.sample(records[1:], 3):
        how = rng.choice(["no-host", "host-number", "mem-null", "mem-word", "no-cpu"])
        if how == "no-host":
            del r["hostname"]
        elif how == "host-number":
            r["hostname"] = r["id"]
        elif how == "no-cpu":
            del r["cpu_cores"]
        else:
            r["memory_gb"] = None if how == "mem-null" else "lots"
    for k, r in enumerate(rng.sample([r for r in records[1:] if valid(r)], 4)):
        twin = dict(r, id=200 + k, status=rng.choice(["active", "maintenance"]))
        twin["memory_gb"] = rng.choice([8, 64])
        later = timedelta(hours=rng.choice([-30, -3, 3, 30]))
        utc = instant(r).astimezone(UTC).replace(tzinfo=None)
        r["updated_at"] = iso_stamp(utc, 0)
        near = level == 6 and abs(later) < timedelta(hours=5)
        twin["updated_at"] = iso_stamp(utc + later, (-300 if later > timedelta(0) else 300) * near)
        docs[(k + 1) % len(docs)].append(twin)


def expected(records: list[Record], select: dict[str, Any], base: str, level: int) -> dict:
    """Each output (path -> JSON) for the inventory's records: the selection, from level 4 the
    count per region, from level 5 the broken records' ids."""
    env, mem, fields = (select[k] for k in ("env", "mem", "fields"))
    outputs: dict[str, Any] = {}
    current: dict[str, dict[str, Any]] = {}
    for r in filter(valid, records):
        if r["hostname"] not in current or instant(r) > instant(current[r["hostname"]]):
            current[r["hostname"]] = r
    wanted = [r for r in current.values() if r["env"] == env and r["status"] == "active"]
    chosen = sorted((r for r in wanted if num(r["memory_gb"]) >= mem), key=lambda r: r["hostname"])
    numeric = ("memory_gb", "cpu_cores")
    outputs[f"{base}-selection.json"] = [
        {f: num(r[f]) if f in numeric else r[f] for f in fields} for r in chosen
    ]
    if level >= 4:
        outputs[f"{base}-regions.json"] = dict(Counter(r["region"] for r in chosen))
    if level >= 5:
        outputs[f"{base}-invalid.json"] = sorted(r["id"] for r in records if not valid(r))
    return outputs


def reference(files: list[str], select: dict[str, Any], outputs: list[str]) -> str:
    """The reference solution's Python: what `expected` computes, from the files."""
    outs = [*outputs, "", ""]
    return dedent(f"""
    import json
    from collections import Counter
    from datetime import datetime

    records = []
    for path in {files!r}:
        with open(path) as fh:
            doc = json.load(fh)
        records += doc["servers"] if isinstance(doc, dict) else doc


    def num(v):
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        return int(v) if isinstance(v, str) and v.isdigit() else None


    def valid(r):
        numbers = (num(r.get("memory_gb")), num(r.get("cpu_cores")))
        return isinstance(r.get("hostname"), str) and None not in numbers


    current = {{}}
    for r in filter(valid, records):
        at = datetime.fromisoformat(r["updated_at"].replace("Z", "+00:00"))
        if r["hostname"] not in current or at > current[r["hostname"]][0]:
            current[r["hostname"]] = (at, r)
    chosen = sorted(
        (r for _, r in current.values() if r["env"] == {select["env"]!r}
         and r["status"] == "active" and num(r["memory_gb"]) >= {select["mem"]}),
        key=lambda r: r["hostname"],
    )
    keep = {select["fields"]!r}
    result = [{{f: num(r[f]) if f in ("memory_gb", "cpu_cores") else r[f] for f in keep}}
              for r in chosen]
    outputs = {{
        {outs[0]!r}: result,
        {outs[1]!r}: dict(Counter(r["region"] for r in chosen)),
        {outs[2]!r}: sorted(r["id"] for r in records if not valid(r)),
    }}
    for path, value in outputs.items():
        if path:
            with open(path, "w") as fh:
                json.dump(value, fh, indent=2)
""")


INITIAL_TEST = """
    def test_inventory_present():
        for path in SOURCES:
            with open(path) as fh:
                json.load(fh)


    def test_outputs_absent():
        for path in OUTPUTS:
            assert not os.path.exists(path), path
"""
COMPLETION_TEST = """
    def test_outputs_match():
        for path, expected in OUTPUTS.items():
            with open(path) as fh:
                got = json.load(fh)
            assert got == expected, path
"""
SOURCES_KEPT = kept("test_inventory_untouched", "SOURCES")
