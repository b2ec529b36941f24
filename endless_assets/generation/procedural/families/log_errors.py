"""Log analysis: count ERROR lines per service in an application log and write a CSV summary."""

from __future__ import annotations

import random
from collections import Counter

from endless_assets.generation.procedural.base import PROJECTS, SERVICES, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import sha256

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


class LogErrorCounts(Family):
    name = "log_error_counts"
    category = "log analysis"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        services = rng.sample(SERVICES, rng.randint(3, 6))
        n_lines = rng.randint(40, 160)
        lines: list[str] = []
        counts: Counter[str] = Counter()
        for i in range(n_lines):
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
        log_text = "\n".join(lines) + "\n"
        log_rel = f"logs/{project}/app.log"
        report = "/home/user/reports/error_counts.csv"
        rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        expected = "service,errors\n" + "".join(f"{s},{c}\n" for s, c in rows)
        log_sha = sha256(log_text)
        instruction = (
            f"The {project} app writes its log to /home/user/{log_rel}; each line looks like "
            f"`<timestamp> [<LEVEL>] <service>: <message>`. I need to know which services are "
            f"throwing errors. Write {report} as a CSV with the header `service,errors` and one "
            "row per service that logged at least one ERROR line, with its count of ERROR lines, "
            "sorted by count (highest first) and then by service name. Leave the log itself "
            "untouched."
        )
        initial_test = dedent(f'''
            import os

            def test_log_present():
                assert os.path.isfile("/home/user/{log_rel}")

            def test_report_absent():
                assert not os.path.exists("{report}")
        ''')
        completion_test = dedent(f'''
            import hashlib

            EXPECTED = {expected!r}

            def test_report_contents():
                with open("{report}") as fh:
                    got = fh.read()
                assert got.strip().splitlines() == EXPECTED.strip().splitlines()

            def test_log_untouched():
                with open("/home/user/{log_rel}", "rb") as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == "{log_sha}"
        ''')
        solution = dedent(f"""
            mkdir -p /home/user/reports
            {{ echo "service,errors"
              grep -F '[ERROR]' /home/user/{log_rel} | awk '{{print $3}}' | tr -d ':' \\
                | sort | uniq -c | awk '{{print $2","$1}}' | sort -t, -k2,2nr -k1,1
            }} > {report}
        """)
        return FamilyTask(
            instruction=instruction,
            truth={"log": f"/home/user/{log_rel}", "report": report, "expected": expected},
            files={log_rel: log_text},
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="easy" if len(services) <= 4 else "medium",
            scenario="DevOps engineer debugging logs",
        )
