"""Redis in a service of its own: drain a job queue (a list of JSON jobs) into a report.

Up the levels: count the jobs; their amounts per type; the ids done recorded in a set; invalid
jobs moved to a dead-letter list in order; two queues (urgent first); all of it, with more
jobs. The queue's end state is read from the service by the tests (emptied, the set, the
dead-letter list), the report from the agent's files, both against the truth.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level
from endless_assets.generation.procedural.families.service_kit import AGENT_PACKAGES, redis
from endless_assets.generation.procedural.names import PROJECTS
from endless_assets.generation.procedural.render import render_test

TYPES = ["email", "resize", "invoice", "webhook", "export"]


@dataclass
class Plan:
    project: str
    queues: dict[str, list[dict]]  # list key -> its jobs, head first
    by_type: bool
    done_set: bool
    dead_letter: bool

    @property
    def report(self) -> str:
        return f"/home/user/reports/{self.project}_jobs.json"

    @property
    def done_key(self) -> str:
        return f"jobs:{self.project}:done"

    @property
    def dead_key(self) -> str:
        return f"jobs:{self.project}:dead"

    def valid(self) -> list[dict]:
        return [j for jobs in self.queues.values() for j in jobs if j["valid"]]

    def summary(self) -> dict:
        jobs = self.valid()
        out: dict = {"count": len(jobs)}
        if self.by_type:
            totals: dict[str, int] = defaultdict(int)
            for job in jobs:
                totals[job["type"]] += job["amount"]
            out["amount_by_type"] = dict(sorted(totals.items()))
        return out

    def dead(self) -> list[str]:
        return [wire(j) for jobs in self.queues.values() for j in jobs if not j["valid"]]


def wire(job: dict) -> str:
    """A job as the queue holds it (invalid ones lack a numeric amount)."""
    body = {"id": job["id"], "type": job["type"]}
    body["amount"] = job["amount"] if job["valid"] else "n/a"
    return json.dumps(body, sort_keys=True)


class RedisQueue(Family[Plan]):
    name = "redis_queue"
    category = "data pipeline with error recovery"

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        names = [f"jobs:{project}:urgent", f"jobs:{project}"] if level >= 5 else [f"jobs:{project}"]
        dead = level >= 4
        queues: dict[str, list[dict]] = {}
        ids = iter(rng.sample(range(1000, 9999), 200))
        for key in names:
            count = by_level(level, 6, 10, 14, 18, 12, 20)
            queues[key] = [
                {
                    "id": next(ids),
                    "type": rng.choice(TYPES),
                    "amount": rng.randint(1, 500),
                    "valid": not (dead and rng.random() < 0.25),
                }
                for _ in range(count)
            ]
        if dead and all(j["valid"] for jobs in queues.values() for j in jobs):
            queues[names[-1]][0]["valid"] = False
        return Plan(project, queues, level >= 2, level >= 3, dead)

    def build(self, plan: Plan) -> FamilyTask:
        seed = [["RPUSH", key, *(wire(j) for j in jobs)] for key, jobs in plan.queues.items()]
        truth = {"report": plan.report, "summary": plan.summary(), "queues": list(plan.queues)}
        truth |= {"done": sorted(j["id"] for j in plan.valid()), "dead": plan.dead()}
        return self.task(
            plan,
            truth=truth,
            complexity="easy" if not plan.done_set else "medium",
            scenario="on-call engineer clearing a stuck background-job queue",
            services=[redis(seed)],
            packages=AGENT_PACKAGES,
        )

    def instruction(self, plan: Plan) -> str:
        keys = list(plan.queues)
        where = (
            f"the list `{keys[0]}`"
            if len(keys) == 1
            else (f"the lists `{keys[0]}` (drain it first) and `{keys[1]}`")
        )
        asks = [
            f"Drain {where} on the Redis server `queue` (port 6379, no password; redis-cli "
            "is installed): every job (a JSON object with `id`, `type` and `amount`) must be "
            "taken off, and the queue left empty."
        ]
        if plan.dead_letter:
            asks.append(
                f"Jobs whose `amount` is not a number are invalid: push each, unchanged and in "
                f"the order taken, onto the list `{plan.dead_key}`."
            )
        if plan.done_set:
            asks.append(f"Add the `id` of every valid job to the set `{plan.done_key}`.")
        report = '{"count": N' + (
            ', "amount_by_type": {TYPE: TOTAL, ...}}' if plan.by_type else "}"
        )
        asks.append(
            f"Then write {plan.report} as JSON: {report}, where N is the number of valid jobs"
            + (" and each TOTAL the sum of their amounts of that type." if plan.by_type else ".")
        )
        return " ".join(asks)

    def solution(self, plan: Plan) -> str:
        keys = " ".join(plan.queues)
        return SOLUTION.format(
            keys=keys,
            dead=plan.dead_key if plan.dead_letter else "",
            done=plan.done_key if plan.done_set else "",
            report=plan.report,
            by_type=plan.by_type,
        )

    def tests(self, plan: Plan) -> tuple[str, str]:
        consts = {
            "QUEUES": {key: [wire(j) for j in jobs] for key, jobs in plan.queues.items()},
            "REPORT": plan.report,
            "SUMMARY": plan.summary(),
            "DONE_KEY": plan.done_key if plan.done_set else "",
            "DONE": sorted(str(j["id"]) for j in plan.valid()),
            "DEAD_KEY": plan.dead_key if plan.dead_letter else "",
            "DEAD": plan.dead(),
        }
        modules = ["json", "os", "subprocess"]
        initial = render_test(modules, consts, CLIENT, INITIAL)
        return initial, render_test(modules, consts, CLIENT, DRAINED)


SOLUTION = """python3 - <<'PY'
import json, os, subprocess

def redis(*args):
    out = subprocess.run(["redis-cli", "-h", "queue", "--raw", *args], check=True,
                         capture_output=True, text=True).stdout
    return out[:-1] if out.endswith("\\n") else out

count, totals = 0, {{}}
for key in "{keys}".split():
    while True:
        raw = redis("LPOP", key)
        if not raw:
            break
        job = json.loads(raw)
        if not isinstance(job["amount"], int):
            if "{dead}":
                redis("RPUSH", "{dead}", raw)
            continue
        count += 1
        totals[job["type"]] = totals.get(job["type"], 0) + job["amount"]
        if "{done}":
            redis("SADD", "{done}", str(job["id"]))
report = {{"count": count}}
if {by_type}:
    report["amount_by_type"] = dict(sorted(totals.items()))
os.makedirs(os.path.dirname("{report}"), exist_ok=True)
with open("{report}", "w") as fh:
    json.dump(report, fh)
PY
"""
CLIENT = """
    def _redis(*args):
        done = subprocess.run(["redis-cli", "-h", "queue", "--raw", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and not done.stdout.startswith("ERR"), done
        return [line for line in done.stdout.splitlines() if line]
"""
INITIAL = """
    def test_the_queues_hold_their_jobs():
        for key, jobs in QUEUES.items():
            assert _redis("LRANGE", key, "0", "-1") == jobs


    def test_nothing_done_yet():
        assert not os.path.exists(REPORT)
        assert not DONE_KEY or _redis("SCARD", DONE_KEY) == ["0"]
        assert not DEAD_KEY or _redis("LLEN", DEAD_KEY) == ["0"]
"""
DRAINED = """
    def test_the_queues_are_empty():
        for key in QUEUES:
            assert _redis("LLEN", key) == ["0"]


    def test_the_report():
        with open(REPORT) as fh:
            assert json.load(fh) == SUMMARY


    def test_what_the_queue_records():
        if DONE_KEY:
            assert sorted(_redis("SMEMBERS", DONE_KEY)) == DONE
        if DEAD_KEY:
            assert _redis("LRANGE", DEAD_KEY, "0", "-1") == DEAD
"""
