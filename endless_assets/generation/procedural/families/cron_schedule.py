"""Cron: write a crontab file whose entries run given commands on schedules described in words."""

from __future__ import annotations

import random

from endless_assets.generation.procedural.base import PROJECTS, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import constants, render_test

DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
JOBS = ["backup-db", "rotate-logs", "sync-reports", "cleanup-tmp", "renew-certs", "send-digest"]
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd", 21: "21st", 22: "22nd", 23: "23rd"}


def _schedule(rng: random.Random) -> tuple[str, str]:
    """A schedule in words and one crontab spelling of it (minute hour dom month dow)."""
    kind = rng.choice(
        [
            "every_n",
            "daily",
            "weekdays",
            "weekly",
            "monthly",
            "window",
            "twice",
            "quarterly",
            "weekend",
        ]
    )
    h, m = rng.randint(0, 23), rng.choice([0, 5, 10, 15, 20, 30, 45, 50])
    at = f"{h:02d}:{m:02d}"
    if kind == "every_n":
        n = rng.choice([5, 10, 15, 20, 30])
        return f"every {n} minutes, around the clock (at :00, :{n:02d} and so on)", f"*/{n} * * * *"
    if kind == "daily":
        return f"every day at {at}", f"{m} {h} * * *"
    if kind == "weekdays":
        return f"at {at} every weekday (Monday to Friday)", f"{m} {h} * * 1-5"
    if kind == "weekly":
        d = rng.randrange(7)
        return f"every {DAYS[d]} at {at}", f"{m} {h} * * {d}"
    if kind == "monthly":
        d = rng.randint(1, 28)
        return f"at {at} on the {ORDINALS.get(d, f'{d}th')} of every month", f"{m} {h} {d} * *"
    if kind == "window":
        h1 = rng.randint(6, 10)
        h2 = h1 + rng.randint(4, 9)
        return (
            f"at {m} minutes past every hour from {h1:02d}:{m:02d} through {h2:02d}:{m:02d}, "
            "Monday to Friday only",
            f"{m} {h1}-{h2} * * 1-5",
        )
    if kind == "twice":
        h1 = rng.randint(0, 11)
        h2 = h1 + 12
        return (
            f"twice a day, at {h1:02d}:{m:02d} and at {h2:02d}:{m:02d}",
            f"{m} {h1},{h2} * * *",
        )
    if kind == "quarterly":
        return (
            f"at {at} on the first day of January, April, July and October",
            f"{m} {h} 1 1,4,7,10 *",
        )
    return f"at {at} on Saturdays and Sundays", f"{m} {h} * * 0,6"


TEST_BODY = """
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _value(text, names, offset):
    if text in names:
        return names.index(text) + offset
    return int(text)


def _field(text, lo, hi, names=(), offset=0):
    values = set()
    for part in text.lower().split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/")
            step = int(step_text)
            assert step > 0
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            a, b = (_value(x, names, offset) for x in part.split("-"))
        else:
            a = _value(part, names, offset)
            b = hi if step != 1 else a
        assert lo <= a <= b <= hi, text
        values.update(range(a, b + 1, step))
    return values


def _schedule(fields):
    minute, hour, dom, month, dow = fields
    days = _field(dow, 0, 7, WEEKDAYS)
    days = {0 if d == 7 else d for d in days}
    return {
        "minute": _field(minute, 0, 59),
        "hour": _field(hour, 0, 23),
        "month": _field(month, 1, 12, MONTHS, 1),
        # cron's day rule: if either day field starts with "*" both must match, else either
        "days": {
            (d, w)
            for d in range(1, 32)
            for w in range(7)
            if (
                (d in _field(dom, 1, 31) and w in days)
                if dom.startswith("*") or dow.startswith("*")
                else (d in _field(dom, 1, 31) or w in days)
            )
        },
    }


def _entries():
    with open(CRONTAB) as fh:
        lines = [ln.strip() for ln in fh]
    entries, env = {}, {}
    for line in lines:
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if eq and name.strip().replace("_", "").isalnum() and not name.strip()[0].isdigit():
            env[name.strip()] = value.strip().strip("\\"'")
            continue
        if line.startswith("@"):
            macro, _, command = line.partition(" ")
            assert macro in MACROS, line
            fields = MACROS[macro].split()
        else:
            parts = line.split(None, 5)
            assert len(parts) == 6, f"not a crontab entry: {line!r}"
            fields, command = parts[:5], parts[5]
        entries[" ".join(command.split())] = fields
    return entries, env


def test_commands():
    entries, _ = _entries()
    assert sorted(entries) == sorted(" ".join(c.split()) for c in EXPECTED)


def test_schedules():
    entries, _ = _entries()
    for command, spec in EXPECTED.items():
        got = entries[" ".join(command.split())]
        assert _schedule(got) == _schedule(spec.split()), (command, got, spec)


def test_environment():
    _, env = _entries()
    for name, value in ENV.items():
        assert env.get(name) == value, name
"""


class CronSchedule(Family):
    name = "cron_schedule"
    category = "scheduled tasks and cron jobs"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        jobs = rng.sample(JOBS, rng.randint(1, 2))
        crontab = f"/home/user/cron/{project}.crontab"
        expected: dict[str, str] = {}
        asks: list[str] = []
        files: dict[str, str] = {}
        for job in jobs:
            words, spec = _schedule(rng)
            script = f"/home/user/bin/{job}.sh"
            files[f"bin/{job}.sh"] = f"#!/bin/sh\n# {job} for {project}\nexit 0\n"
            command = script
            if rng.random() < 0.5:
                command += f" >> /home/user/logs/{job}.log 2>&1"
            expected[command] = spec
            asks.append(f"`{command}` should run {words}")
        env = {"MAILTO": f"ops-{project}@example.com"} if rng.random() < 0.3 else {}
        instruction = (
            f"I need the scheduled jobs for {project} written down as a crontab file at {crontab} "
            "(the ops team installs it later; you don't need to, and can't, load it with "
            "`crontab` yourself). Times are the server's local time on a 24-hour clock. "
            + "; ".join(asks)
            + ". Use each command exactly as written, one entry per job"
            + (f", and have cron mail output to {env['MAILTO']} (MAILTO)." if env else ".")
        )
        lines = [f"MAILTO={v}" for v in env.values()]
        lines += [f"{spec} {command}" for command, spec in expected.items()]
        body = "\n".join(lines)
        solution = dedent(f"""
            mkdir -p /home/user/cron
            cat > {crontab} <<'EOF'
            # {project} jobs
            {{body}}
            EOF
        """).replace("{body}", body)

        consts = {"CRONTAB": crontab, "EXPECTED": expected, "ENV": env}
        initial_test = render_test(
            ["os"],
            consts,
            """
            def test_scripts_present():
                for command in EXPECTED:
                    assert os.path.isfile(command.split()[0])


            def test_crontab_absent():
                assert not os.path.exists(CRONTAB)
        """,
        )
        completion_test = constants(consts) + TEST_BODY
        hard = len(jobs) > 1 or bool(env)
        return FamilyTask(
            instruction=instruction,
            truth={"crontab": crontab, "entries": expected, "env": env},
            files=files,
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="hard" if len(jobs) > 1 and env else "medium" if hard else "easy",
            scenario="sysadmin scheduling maintenance jobs",
        )
