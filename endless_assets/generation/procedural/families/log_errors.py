"""Log analysis: count ERROR lines per service in an application log and write a CSV summary.

Up the levels: more services and lines, then rotated logs (one gzipped), another app's log
beside it, the word ERROR in other lines' messages, lower-case level tags, CRLF line endings,
stack-trace continuation lines, a time window in UTC over mixed offsets, and a second report.
"""

from __future__ import annotations

import gzip
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from endless_assets.generation.procedural.base import (
    Family,
    FamilyTask,
    by_level,
    dedent,
    iso_stamp,
)
from endless_assets.generation.procedural.names import PROJECTS, SERVICES
from endless_assets.generation.procedural.render import extras_script, kept, render_test, sha256

LEVELS = ["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]
MESSAGES = [
    "request completed",
    "cache miss",
    "retrying upstream call",
    "connection reset by peer",
    "slow query detected",
    "user session expired",
    "payload validation failed",
    "disk usage above threshold",
    "token refreshed",
    "job queued",
]
# Messages of lines that are not at level ERROR but name it: a bare `grep ERROR` counts them.
LOOKALIKES = [
    "upstream answered ERROR 502, retrying",
    "ERROR budget at 80% for this week",
    "cleared ERROR state after restart",
]
TAG_SPELLINGS = ["error", "Error"]
OFFSETS = [0, 0, 120, -300, 330, -420]  # minutes east of UTC
MONTH = datetime(2026, 3, 1, tzinfo=UTC)
REPORT = "/home/user/reports/error_counts.csv"
SUMMARY = "/home/user/reports/error_summary.json"
SCENARIO = "DevOps engineer debugging logs"


@dataclass
class Entry:
    at: datetime  # UTC
    level: str  # as written between the brackets
    service: str
    message: str
    offset: int = 0  # minutes east of UTC the timestamp is written in
    trace: list[str] = field(default_factory=list)  # indented continuation lines


@dataclass
class Plan:
    project: str
    services: list[str]
    logs: dict[str, list[Entry]]  # the app's log files (relative to /home/user), newest first
    level: int | None = None
    legacy_text: str = ""  # the unleveled draw's log, as drawn
    decoys: dict[str, str] = field(default_factory=dict)  # other apps' logs
    crlf: set[str] = field(default_factory=set)
    window: tuple[datetime, datetime] | None = None
    case_insensitive: bool = False
    summary: bool = False
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def log_rel(self) -> str:
        return next(iter(self.logs))

    def texts(self) -> dict[str, bytes]:
        if self.level is None:
            return {self.log_rel: self.legacy_text.encode()}
        found = {}
        for rel, entries in self.logs.items():
            text = "".join(_line(e) for e in entries)
            if rel in self.crlf:
                text = text.replace("\n", "\r\n")
            data = text.encode()
            found[rel] = gzip.compress(data, mtime=0) if rel.endswith(".gz") else data
        return found

    @property
    def expected(self) -> str:
        rows = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return "service,errors\n" + "".join(f"{s},{c}\n" for s, c in rows)


def _line(entry: Entry) -> str:
    head = f"{iso_stamp(entry.at, entry.offset)} [{entry.level}] {entry.service}: {entry.message}\n"
    return head + "".join(f"    {t}\n" for t in entry.trace)


class LogErrorCounts(Family[Plan]):
    name = "log_error_counts"
    category = "log analysis"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        services = rng.sample(SERVICES, rng.randint(3, 6))
        lines: list[str] = []
        counts: Counter[str] = Counter()
        for i in range(rng.randint(40, 160)):
            level = rng.choice(LEVELS)
            service = rng.choice(services)
            day, hour, minute = rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)
            stamp = f"2026-03-{day:02d}T{hour:02d}:{minute:02d}:{i % 60:02d}Z"
            lines.append(f"{stamp} [{level}] {service}: {rng.choice(MESSAGES)}")
            if level == "ERROR":
                counts[service] += 1
        if not counts:  # make sure at least one service has errors
            stamp = "2026-03-28T23:59:59Z"
            lines.append(f"{stamp} [ERROR] {services[0]}: {rng.choice(MESSAGES)}")
            counts[services[0]] += 1
        text = "\n".join(lines) + "\n"
        return Plan(
            project, services, {f"logs/{project}/app.log": []}, legacy_text=text, counts=counts
        )

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        services = rng.sample(SERVICES, by_level(level, 3, 4, 5, 6, 7, 8))
        rotations = by_level(level, 0, 0, 1, 2, 2, 3)
        names = ["app.log", *(f"app.log.{i}" for i in range(1, rotations + 1))]
        if level >= 6:
            names[-1] += ".gz"
        plan = Plan(project, services, {f"logs/{project}/{n}": [] for n in names}, level=level)
        plan.case_insensitive = level >= 4
        plan.summary = level >= 6
        if level >= 5:
            plan.window = (MONTH + timedelta(days=7), MONTH + timedelta(days=21))
        for rel in plan.logs:
            entries = [
                self._entry(rng, plan) for _ in range(by_level(level, 40, 60, 80, 90, 110, 130))
            ]
            plan.logs[rel] = sorted(entries, key=lambda e: e.at)
        self._plant(rng, plan)
        if level >= 3:
            other = rng.choice([p for p in PROJECTS if p != project])
            decoy = [self._entry(rng, plan) for _ in range(30)]
            decoy.append(Entry(MONTH + timedelta(days=9), "ERROR", services[0], MESSAGES[3]))
            plan.decoys[f"logs/{other}/app.log"] = "".join(_line(e) for e in decoy)
        if level >= 4:
            plan.crlf.add(list(plan.logs)[1])
        for entries in plan.logs.values():
            for e in entries:
                if e.level.upper() == "ERROR" and _inside(plan, e.at):
                    plan.counts[e.service] += 1
        return plan

    def _entry(self, rng: random.Random, plan: Plan) -> Entry:
        level, rank = rng.choice(LEVELS), plan.level or 0
        at = MONTH + timedelta(seconds=rng.randrange(28 * 86400))
        entry = Entry(at, level, rng.choice(plan.services), rng.choice(MESSAGES))
        if rank >= 2 and level in ("INFO", "WARN") and rng.random() < 0.15:
            entry.message = rng.choice(LOOKALIKES)
        if plan.case_insensitive and level == "ERROR" and rng.random() < 0.3:
            entry.level = rng.choice(TAG_SPELLINGS)
        if rank >= 5 and level == "ERROR" and rng.random() < 0.4:
            cause = rng.choice(plan.services)
            entry.trace = [f"at {plan.project}.{entry.service}.handle(line {rng.randint(10, 400)})"]
            entry.trace.append(f"caused by: [ERROR] {cause}: connection refused")
        if rank == 6:
            entry.offset = rng.choice(OFFSETS)
        return entry

    def _plant(self, rng: random.Random, plan: Plan) -> None:
        """Lines that make each trap of the level matter, whatever the draw."""
        logs = list(plan.logs.values())
        day = MONTH + timedelta(days=10, hours=rng.randint(0, 23))
        logs[0].append(Entry(day, "ERROR", plan.services[0], rng.choice(MESSAGES)))
        if (plan.level or 0) >= 2:
            logs[0].append(Entry(day, "WARN", plan.services[1], LOOKALIKES[0]))
        if plan.case_insensitive:
            logs[-1].append(Entry(day, "error", plan.services[-1], MESSAGES[4]))
        if plan.window:
            start, end = plan.window
            logs[0].append(Entry(start - timedelta(hours=2), "ERROR", plan.services[1], "x"))
            logs[-1].append(Entry(end + timedelta(minutes=5), "ERROR", plan.services[2], "y"))
        if plan.level == 6 and plan.window:
            start, end = plan.window
            # local times that look inside the window but are not in UTC, and the other way
            for at, offset in ((start - timedelta(hours=1), 120), (end - timedelta(hours=1), 120)):
                logs[0].append(Entry(at, "ERROR", plan.services[0], MESSAGES[5], offset))
            logs[1].append(Entry(start + timedelta(hours=1), "ERROR", plan.services[3], "", -300))
            logs[1][-1].message = MESSAGES[6]
        for entries in logs:
            entries.sort(key=lambda e: e.at)

    def build(self, plan: Plan) -> FamilyTask:
        texts = plan.texts()
        files = {rel: data.decode() for rel, data in texts.items() if not rel.endswith(".gz")}
        blobs = {f"/home/user/{rel}": data for rel, data in texts.items() if rel.endswith(".gz")}
        truth = {"log": f"/home/user/{plan.log_rel}", "report": REPORT, "expected": plan.expected}
        if plan.level is not None:
            truth["logs"] = [f"/home/user/{rel}" for rel in plan.logs]
            if plan.summary:
                truth["summary"] = SUMMARY
        return self.task(
            plan,
            truth=truth,
            files={**files, **plan.decoys},
            setup_script=extras_script(blobs, owned=["/home/user/logs"]) if blobs else "",
            complexity="easy" if len(plan.services) <= 4 else "medium",
            scenario=SCENARIO,
        )

    def instruction(self, plan: Plan) -> str:
        where = f"writes its log to /home/user/{plan.log_rel}"
        if len(plan.logs) > 1:
            older = ", ".join(f"/home/user/{rel}" for rel in list(plan.logs)[1:])
            where += f" (older entries were rotated to {older}, oldest last"
            where += "; the oldest is gzip-compressed)" if plan.summary else ")"
        text = (
            f"The {plan.project} app {where}; each line looks like "
            f"`<timestamp> [<LEVEL>] <service>: <message>`. I need to know which services are "
            f"throwing errors. Write {REPORT} as a CSV with the header `service,errors` and one "
            "row per service that logged at least one ERROR line, with its count of ERROR lines, "
            "sorted by count (highest first) and then by service name."
        )
        if plan.level is None:
            return text + " Leave the log itself untouched."
        notes = []
        if len(plan.logs) > 1:
            notes.append("Count the entries of every one of those files.")
        if plan.decoys:
            notes.append("Other apps log next to it under /home/user/logs: they don't count.")
        if plan.level >= 2:
            notes.append("Only the level in brackets decides; a message may mention errors.")
        if plan.case_insensitive:
            notes.append("Some components write the level in lower case (`[error]`): same level.")
        if plan.window:
            start, end = (t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in plan.window)
            notes.append(
                "Indented lines continue the entry above them (stack traces) and are not "
                f"entries. Only count entries from {start} (inclusive) to {end} (exclusive), UTC."
            )
        if plan.level == 6:
            notes.append("Timestamps carry their own UTC offset: compare them in UTC.")
            notes.append(
                f"Also write {SUMMARY}: a JSON object with `total` (all counted ERROR entries) "
                "and `services` (each service's count), agreeing with the CSV."
            )
        touched = "logs themselves" if len(plan.logs) > 1 else "log itself"
        return " ".join([text, *notes, f"Leave the {touched} untouched."])

    def tests(self, plan: Plan) -> tuple[str, str]:
        if plan.level is None:
            return self._legacy_tests(plan)
        consts = {
            "REPORT": REPORT,
            "SUMMARY": SUMMARY if plan.summary else "",
            "EXPECTED": plan.expected,
            "COUNTS": dict(plan.counts),
            "LOGS": {f"/home/user/{rel}": sha256(d) for rel, d in plan.texts().items()},
        }
        initial = render_test(
            ["os"],
            consts,
            """
            def test_logs_present():
                for path in LOGS:
                    assert os.path.isfile(path), path


            def test_report_absent():
                assert not os.path.exists(REPORT)
            """,
        )
        completion = render_test(
            ["hashlib", "json"],
            consts,
            """
            def test_report_contents():
                with open(REPORT) as fh:
                    got = fh.read()
                assert got.strip().splitlines() == EXPECTED.strip().splitlines()


            def test_summary():
                if SUMMARY:
                    with open(SUMMARY) as fh:
                        got = json.load(fh)
                    assert got == {"total": sum(COUNTS.values()), "services": COUNTS}
            """,
            kept("test_logs_untouched", "LOGS"),
        )
        return initial, completion

    def _legacy_tests(self, plan: Plan) -> tuple[str, str]:
        log_rel, expected, log_sha = plan.log_rel, plan.expected, sha256(plan.legacy_text)
        initial_test = dedent(f'''
            import os

            def test_log_present():
                assert os.path.isfile("/home/user/{log_rel}")

            def test_report_absent():
                assert not os.path.exists("{REPORT}")
        ''')
        completion_test = dedent(f'''
            import hashlib

            EXPECTED = {expected!r}

            def test_report_contents():
                with open("{REPORT}") as fh:
                    got = fh.read()
                assert got.strip().splitlines() == EXPECTED.strip().splitlines()

            def test_log_untouched():
                with open("/home/user/{log_rel}", "rb") as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == "{log_sha}"
        ''')
        return initial_test, completion_test

    def solution(self, plan: Plan) -> str:
        if plan.level is None or plan.level == 1:
            return dedent(f"""
                mkdir -p /home/user/reports
                {{ echo "service,errors"
                  grep -F '[ERROR]' /home/user/{plan.log_rel} | awk '{{print $3}}' | tr -d ':' \\
                    | sort | uniq -c | awk '{{print $2","$1}}' | sort -t, -k2,2nr -k1,1
                }} > {REPORT}
            """)
        window = [t.isoformat() for t in plan.window] if plan.window else None
        script = dedent(f"""
            import csv, gzip, json, re
            from collections import Counter
            from datetime import datetime

            LOGS = {[f"/home/user/{rel}" for rel in plan.logs]!r}
            WINDOW = [datetime.fromisoformat(t) for t in {window or []!r}]
            ENTRY = re.compile(r"^(\\S+) \\[(\\w+)\\] ([^:\\s]+):")
            counts = Counter()
            for path in LOGS:
                with (gzip.open if path.endswith(".gz") else open)(path, "rt") as fh:
                    for m in filter(None, map(ENTRY.match, fh)):
                        at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
                        if WINDOW and not WINDOW[0] <= at < WINDOW[1]:
                            continue
                        counts[m.group(3)] += m.group(2).upper() == "ERROR"
            counts = +counts
            rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            with open({REPORT!r}, "w", newline="") as fh:
                w = csv.writer(fh, lineterminator="\\n")
                w.writerow(["service", "errors"])
                w.writerows(rows)
        """)
        if plan.summary:
            script += dedent(f"""
                with open({SUMMARY!r}, "w") as fh:
                    json.dump({{"total": sum(counts.values()), "services": dict(counts)}}, fh)
            """)
        return f"mkdir -p /home/user/reports\npython3 - <<'PY'\n{script}PY\n"


def _inside(plan: Plan, at: datetime) -> bool:
    return plan.window is None or plan.window[0] <= at < plan.window[1]
