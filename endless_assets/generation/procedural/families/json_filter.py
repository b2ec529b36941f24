"""JSON processing: filter, project, count or validate records of a JSON inventory with jq.

Up the levels: a count, a tag list, then a filtered projection over numbers written as strings,
an inventory split over files of two shapes with a second report that must agree, broken records
to report and servers listed twice (the newest record counts), timestamps with their own UTC
offsets and a stale snapshot beside the inventory.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level
from endless_assets.generation.procedural.families import json_inventory as inventory
from endless_assets.generation.procedural.names import PROJECTS
from endless_assets.generation.procedural.render import kept, render_test, sha256

Variant = tuple[str, Any, str, str]  # request, expected result, jq program, complexity
Servers = list[inventory.Record]
Ask = Callable[[random.Random, Servers, str], Variant]  # one of the requests up to level 2


def _servers(rng: random.Random, project: str) -> Servers:
    servers = [
        inventory.server(rng, project, i) for i in rng.sample(range(1, 99), rng.randint(12, 30))
    ]
    servers[0]["status"] = "active"
    servers[-1]["tags"] = servers[-1]["tags"] or [rng.choice(inventory.TAGS)]
    return servers


def _filter(rng: random.Random, servers: Servers, sel: str) -> Variant:
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


def _count(rng: random.Random, servers: Servers, sel: str) -> Variant:
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


def _tagged(rng: random.Random, servers: Servers, sel: str) -> Variant:
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


def _validate(rng: random.Random, servers: Servers, sel: str) -> Variant:
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


@dataclass
class Plan:
    project: str
    sources: dict[str, Any]  # path -> its JSON document
    outputs: dict[str, Any]  # path -> the expected JSON
    ask: str = ""  # what to write (the variants up to level 2)
    jq: str = ""  # their jq program
    complexity: str = ""
    level: int | None = None
    select: dict[str, Any] = field(default_factory=dict)  # env, mem, fields (level 3 on)
    decoy: str = ""  # a stale snapshot beside the inventory

    @property
    def texts(self) -> dict[str, str]:
        return {path: json.dumps(doc, indent=2) + "\n" for path, doc in self.sources.items()}


def _shape(doc: Any) -> str:
    if isinstance(doc, dict):
        return "an object whose `servers` key holds the list of server records"
    return "a JSON array of server records"


class JsonFilter(Family[Plan]):
    name = "json_filter"
    category = "JSON schema validation and jq processing"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        servers = _servers(rng, project)
        wrapped = rng.random() < 0.5
        variant = rng.choice([_filter, _count, _tagged, _validate])
        return self._variant(rng, project, servers, wrapped, variant)

    def _variant(
        self, rng: random.Random, project: str, servers: Servers, wrapped: bool, variant: Ask
    ) -> Plan:
        src = f"/home/user/inventory/{project}_servers.json"
        ask, expected, jq, complexity = variant(rng, servers, ".servers[]" if wrapped else ".[]")
        doc: Any = servers
        if wrapped:
            doc = {"generated_at": "2026-05-04T09:00:00Z", "servers": servers}
        out = f"/home/user/inventory/{rng.choice(['report', 'result', 'selection'])}.json"
        hard = "hard" if wrapped and complexity == "medium" else complexity
        return Plan(project, {src: doc}, {out: expected}, ask, jq, hard)

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        if level <= 2:
            servers = _servers(rng, project)
            plan = self._variant(rng, project, servers, level == 2, [_count, _tagged][level - 1])
            plan.level = level
            return plan
        numbers = rng.sample(range(1, 99), by_level(level, 0, 0, 16, 24, 28, 36))
        records = [inventory.record(rng, project, n, level == 6) for n in numbers]
        for r in records:
            for key in ("memory_gb", "cpu_cores"):
                if rng.random() < 0.2:
                    r[key] = str(r[key])
        anchor = records[0]
        anchor.update(status="active", memory_gb=rng.choice([32, 64, 128]))
        mem = rng.choice([16, 32])
        fields = ["hostname", "memory_gb", rng.choice(["region", "cpu_cores", "owner"])]
        plan = Plan(project, {}, {}, level=level)
        plan.select = {"env": anchor["env"], "mem": mem, "fields": fields}
        files = by_level(level, 0, 0, 1, 2, 2, 3)
        base = f"/home/user/inventory/{project}"
        for k in range(files):
            part = records[k::files]
            doc = {"generated_at": "2026-05-04T09:00:00Z", "servers": part} if k != 1 else part
            plan.sources[f"{base}/{inventory.REGIONS[k].rsplit('-', 1)[0]}-servers.json"] = doc
        docs = [d["servers"] if isinstance(d, dict) else d for d in plan.sources.values()]
        if level >= 5:
            inventory.break_records(rng, records, docs, level)
        if level == 6:
            plan.decoy = f"{base}/snapshot-2025.json"
            stale = [inventory.record(rng, project, n, False) for n in range(301, 309)]
            stale[0].update(env=anchor["env"], status="active", memory_gb=128)
            plan.sources[plan.decoy] = stale
        plan.outputs = inventory.expected([r for d in docs for r in d], plan.select, base, level)
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        src, (out, want) = next(iter(plan.sources)), next(iter(plan.outputs.items()))
        truth: dict[str, Any] = {"source": src, "output": out, "expected": want}
        if plan.jq:
            truth["jq"] = plan.jq
        else:
            truth["sources"], truth["outputs"] = list(plan.sources), plan.outputs
        return self.task(
            plan,
            truth=truth,
            files={p.removeprefix("/home/user/"): t for p, t in plan.texts.items()},
            complexity=plan.complexity,
            scenario="infrastructure engineer querying a server inventory",
        )

    def instruction(self, plan: Plan) -> str:
        if plan.jq:
            (src, doc), out = next(iter(plan.sources.items())), next(iter(plan.outputs))
            return (
                f"Our server inventory for {plan.project} is {src} ({_shape(doc)}). {plan.ask}, "
                f"and save it to {out}. jq is installed if you want it. Don't edit the inventory "
                "file."
            )
        env, mem, fields = (plan.select[k] for k in ("env", "mem", "fields"))
        files = [p for p in plan.sources if p != plan.decoy]
        if len(files) == 1:
            where = f"is {files[0]} ({_shape(plan.sources[files[0]])})"
        else:
            shapes = "; ".join(f"{p} is {_shape(plan.sources[p])}" for p in files)
            where = f"is split over {len(files)} files: {shapes}"
        outs = list(plan.outputs)
        text = [
            f"Our server inventory for {plan.project} {where}. I need every server that is in "
            f"the `{env}` environment, has status `active` and has at least {mem} GB of memory "
            f"(`memory_gb`). Write them to {outs[0]} as a JSON array of objects that keep only "
            f"the fields {', '.join(f'`{f}`' for f in fields)}, sorted by hostname. Some exports "
            'wrote numbers as strings of digits (`"32"`): those are the numbers, and numbers in '
            "what you write must be JSON numbers."
        ]
        if len(outs) > 1:
            text.append(
                f"Also write {outs[1]}: a JSON object mapping each `region` to how many of those "
                "servers are in it."
            )
        if len(outs) > 2:
            text.append(
                "Some records are broken: a valid one has a string `hostname` and a `memory_gb` "
                "and a `cpu_cores` that are numbers (or strings of digits). Leave the broken ones "
                f"out and write their `id`s to {outs[2]} as a JSON array of integers in ascending "
                "order. A server may be listed in more than one file: only its record with the "
                "latest `updated_at` is current, and the others don't count at all."
            )
        if plan.decoy:
            text.append(
                "Each `updated_at` carries its own UTC offset. "
                f"{plan.decoy} is last year's snapshot: it is not part of the inventory."
            )
        text.append("jq is installed if you want it. Don't edit the inventory files.")
        return " ".join(text)

    def tests(self, plan: Plan) -> tuple[str, str]:
        if plan.level is None:
            (src, text), (out, expected) = (
                next(iter(plan.texts.items())),
                next(iter(plan.outputs.items())),
            )
            consts = {"SRC": src, "OUT": out, "EXPECTED": expected, "SRC_SHA": sha256(text)}
            return (
                render_test(["json", "os"], consts, LEGACY_INITIAL),
                render_test(["hashlib", "json"], consts, LEGACY_COMPLETION, SRC_KEPT),
            )
        consts = {
            "SOURCES": {p: sha256(t) for p, t in plan.texts.items()},
            "OUTPUTS": plan.outputs,
        }
        return (
            render_test(["json", "os"], consts, inventory.INITIAL_TEST),
            render_test(
                ["hashlib", "json"], consts, inventory.COMPLETION_TEST, inventory.SOURCES_KEPT
            ),
        )

    def solution(self, plan: Plan) -> str:
        if plan.jq:
            src, out = next(iter(plan.sources)), next(iter(plan.outputs))
            return f"jq '{plan.jq}' {src} > {out}\n"
        files = [p for p in plan.sources if p != plan.decoy]
        return (
            f"python3 - <<'PY'\n{inventory.reference(files, plan.select, list(plan.outputs))}PY\n"
        )


LEGACY_INITIAL = """
    def test_inventory_present():
        with open(SRC) as fh:
            json.load(fh)


    def test_output_absent():
        assert not os.path.exists(OUT)
"""
LEGACY_COMPLETION = """
    def test_output_matches():
        with open(OUT) as fh:
            got = json.load(fh)
        assert got == EXPECTED
"""
SRC_KEPT = kept("test_inventory_untouched", "SRC", digest="SRC_SHA")
