"""How the cron family says a schedule in words and as crontab fields, and its completion test,
which compares schedules by the times they fire rather than by how they are written."""

from __future__ import annotations

import random

DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
ORDINALS = {1: "1st", 2: "2nd", 3: "3rd", 21: "21st", 22: "22nd", 23: "23rd"}


def schedule(rng: random.Random) -> tuple[str, str]:
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


def team_schedule(rng: random.Random, offset: int) -> tuple[str, str]:
    """A schedule said in a team's clock `offset` hours ahead of the server's (UTC), and the
    crontab fields in server time: the day moves back when the hour does not fit."""
    kind = rng.choice(["daily", "weekly", "weekdays", "weekend", "twice"])
    h, m = rng.choice([0, 1, rng.randint(2, 23)]), rng.choice([0, 15, 30, 45])
    utc, back = (h - offset) % 24, h < offset  # back: the previous day in UTC
    at = f"{h:02d}:{m:02d}"
    if kind == "daily":
        return f"every day at {at}", f"{m} {utc} * * *"
    if kind == "weekly":
        d = rng.randrange(7)
        return f"every {DAYS[d]} at {at}", f"{m} {utc} * * {(d - back) % 7}"
    if kind == "weekdays":
        return f"at {at} every weekday (Monday to Friday)", f"{m} {utc} * * {1 - back}-{5 - back}"
    if kind == "weekend":
        days = sorted({(0 - back) % 7, (6 - back) % 7})
        return f"at {at} on Saturdays and Sundays", f"{m} {utc} * * {','.join(map(str, days))}"
    h2 = (h + 12) % 24
    hours = sorted({(h - offset) % 24, (h2 - offset) % 24})
    return (
        f"twice a day, at {at} and at {h2:02d}:{m:02d}",
        f"{m} {','.join(map(str, hours))} * * *",
    )
