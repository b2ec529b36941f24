"""JSON processing: filter, project, count or validate records of a JSON inventory with jq."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from endless_assets.generation.procedural.base import PEOPLE, PROJECTS, Family, FamilyTask
from endless_assets.generation.procedural.render import render_test, sha256

ENVS = ["prod", "staging", "dev"]
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1"]
TAGS = ["web", "db", "cache", "batch", "gpu", "edge", "legacy", "monitoring"]
STATUSES = ["active", "active", "active", "maintenance", "decommissioned"]
Variant = tuple[str, Any, str, str]  # request, expected result, jq program, complexity


def _servers(rng: random.Random, project: str) -> list[dict[str, Any]]:
    servers = []
    for i in rng.sample(range(1, 99), rng.randint(12, 30)):
        servers.append(
            {
                "hostname": f"{project}-{rng.choice(TAGS)}-{i:02d}",
                "env": rng.choice(ENVS),
                "region": rng.choice(REGIONS),
                "cpu_cores": rng.choice([2, 4, 8, 16, 32]),
                "memory_gb": rng.choice([4, 8, 16, 32, 64, 128]),
                "status": rng.choice(STATUSES),
                "tags": sorted(rng.sample(TAGS, rng.randint(0, 3))),
                "owner": rng.choice(PEOPLE),
            }
        )
    servers[0]["status"] = "active"
    servers[-1]["tags"] = servers[-1]["tags"] or [rng.choice(TAGS)]
    return servers


def _filter(rng: random.Random, servers: list[dict[str, Any]], sel: str) -> Variant:
    active = [s for s in servers if s["status"] == "active"]
    anchor = rng.choice([s for s in active if s["memory_gb"] >= 8] or active)  # never empty
    env = anchor["env"]
    mem = rng.choice([m for m in (8, 16, 32, 64) if m <= anchor["memory_gb"]] or [4])
    fields = ["hostname", *rng.sample(["region", "memory_gb", "cpu_cores", "owner"], 2)]
    keep = [
        s for s in servers if s["env"] == env and s["status"] == "active" and s["memory_gb"] >= mem
    ]
    expected = sorted(({f: s[f] for f in fields} for s in keep), key=lambda r: r["hostname"])
    ask = (
        f"I need every server from the inventory that is in the `{env}` environment, has status "
        f"`active` and has at least {mem} GB of memory (`memory_gb`). Write them as a JSON array "
        f"of objects that keep only the fields {', '.join(f'`{f}`' for f in fields)}, sorted by "
        "hostname"
    )
    proj = "{" + ", ".join(fields) + "}"
    jq = (
        f'[{sel} | select(.env == "{env}" and .status == "active" and .memory_gb >= {mem}) '
        f"| {proj}] | sort_by(.hostname)"
    )
    return ask, expected, jq, "medium"


def _count(rng: random.Random, servers: list[dict[str, Any]], sel: str) -> Variant:
    key = rng.choice(["region", "env", "owner"])
    status = rng.choice(sorted({s["status"] for s in servers} - {"decommissioned"}))
    counts = Counter(s[key] for s in servers if s["status"] == status)
    ask = (
        f"From the inventory, count the servers with status `{status}` per `{key}`. Write a JSON "
        f"object mapping each {key} to its count (integers); leave out any {key} with no such "
        "servers"
    )
    jq = (
        f'[{sel} | select(.status == "{status}")] | group_by(.{key}) '
        f"| map({{key: .[0].{key}, value: length}}) | from_entries"
    )
    return ask, dict(counts), jq, "easy"


def _tagged(rng: random.Random, servers: list[dict[str, Any]], sel: str) -> Variant:
    skip = rng.choice(["decommissioned", "maintenance"])
    tag = rng.choice(sorted({t for s in servers if s["status"] != skip for t in s["tags"]}))
    names = sorted(s["hostname"] for s in servers if tag in s["tags"] and s["status"] != skip)
    ask = (
        f"List the hostnames of all servers in the inventory whose `tags` include `{tag}`, except "
        f"those with status `{skip}`. Write them as a JSON array of strings sorted alphabetically"
    )
    jq = (
        f'[{sel} | select((.tags | index("{tag}")) != null and .status != "{skip}") '
        "| .hostname] | sort"
    )
    return ask, names, jq, "medium"


def _validate(rng: random.Random, servers: list[dict[str, Any]], sel: str) -> Variant:
    for i, s in enumerate(servers):
        s["id"] = 100 + i
    bad = rng.sample(range(len(servers)), rng.randint(2, max(2, len(servers) // 4)))
    for i in bad:
        s = servers[i]
        how = rng.choice(["drop", "string", "null"])
        field = rng.choice(["hostname", "cpu_cores", "memory_gb"])
        if how == "drop":
            del s[field]
        elif how == "null":
            s[field] = None
        else:
            s[field] = str(s[field]) if field != "hostname" else len(s[field])
    expected = sorted(servers[i]["id"] for i in bad)
    ask = (
        "Some records in the inventory are broken. A valid record has a `hostname` that is a "
        "string and `cpu_cores` and `memory_gb` that are numbers (JSON numbers, not strings or "
        "null); a missing field makes the record invalid too. Write the `id`s of all invalid "
        "records as a JSON array of integers in ascending order"
    )
    jq = (
        f'[{sel} | select((.hostname | type) != "string" or (.cpu_cores | type) != "number" '
        'or (.memory_gb | type) != "number") | .id] | sort'
    )
    return ask, expected, jq, "hard"


class JsonFilter(Family):
    name = "json_filter"
    category = "JSON schema validation and jq processing"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        servers = _servers(rng, project)
        wrapped = rng.random() < 0.5
        variant = rng.choice([_filter, _count, _tagged, _validate])
        src = f"/home/user/inventory/{project}_servers.json"
        sel = ".servers[]" if wrapped else ".[]"
        ask, expected, jq, complexity = variant(rng, servers, sel)
        if wrapped:
            doc: Any = {"generated_at": "2026-05-04T09:00:00Z", "servers": servers}
            shape = "an object whose `servers` key holds the list of server records"
        else:
            doc = servers
            shape = "a JSON array of server records"
        src_text = json.dumps(doc, indent=2) + "\n"
        out = f"/home/user/inventory/{rng.choice(['report', 'result', 'selection'])}.json"
        instruction = (
            f"Our server inventory for {project} is {src} ({shape}). {ask}, and save it to {out}. "
            "jq is installed if you want it. Don't edit the inventory file."
        )
        consts = {
            "SRC": src,
            "OUT": out,
            "EXPECTED": expected,
            "SRC_SHA": sha256(src_text),
        }
        initial_test = render_test(
            ["json", "os"],
            consts,
            """
            def test_inventory_present():
                with open(SRC) as fh:
                    json.load(fh)


            def test_output_absent():
                assert not os.path.exists(OUT)
        """,
        )
        completion_test = render_test(
            ["hashlib", "json"],
            consts,
            """
            def test_output_matches():
                with open(OUT) as fh:
                    got = json.load(fh)
                assert got == EXPECTED


            def test_inventory_untouched():
                with open(SRC, "rb") as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == SRC_SHA
        """,
        )
        solution = f"jq '{jq}' {src} > {out}\n"
        return FamilyTask(
            instruction=instruction,
            truth={"source": src, "output": out, "expected": expected, "jq": jq},
            files={src.removeprefix("/home/user/"): src_text},
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="hard" if wrapped and complexity == "medium" else complexity,
            scenario="infrastructure engineer querying a server inventory",
        )
