"""INI files: change one key in one section (and maybe add a key) without touching other lines."""

from __future__ import annotations

import random

from endless_assets.generation.procedural.base import PROJECTS, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import render_test, sha256

SECTIONS = ["server", "database", "cache", "logging", "auth", "queue", "metrics", "storage"]
KEYS = {
    "host": lambda r: r.choice(["0.0.0.0", "127.0.0.1", "10.0.3.17", "db.internal", "localhost"]),
    "port": lambda r: str(r.choice([5432, 6379, 8080, 8443, 9000, 9090, 5672])),
    "timeout": lambda r: str(r.choice([5, 10, 15, 30, 60, 120])),
    "enabled": lambda r: r.choice(["true", "false"]),
    "log_level": lambda r: r.choice(["debug", "info", "warning", "error"]),
    "pool_size": lambda r: str(r.randint(2, 64)),
    "retries": lambda r: str(r.randint(0, 9)),
    "path": lambda r: r.choice(["/var/lib/app", "/srv/data", "/tmp/app-cache", "/var/log/app"]),
}
NEW_KEYS = {
    "max_idle": lambda r: str(r.randint(1, 30)),
    "tls": lambda r: r.choice(["required", "preferred"]),
    "region": lambda r: r.choice(["eu-west-1", "us-east-2"]),
    "compression": lambda r: r.choice(["gzip", "zstd"]),
}
COMMENTS = ["; managed by ops, ask before editing", "# values below are tuned for prod"]


class IniConfig(Family):
    name = "ini_config"
    category = "INI configuration parsing"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        sections = rng.sample(SECTIONS, rng.randint(3, 6))
        shared = rng.choice(["timeout", "port", "enabled", "log_level", "pool_size", "host"])
        lines: list[str] = [f"; {project} configuration", ""]
        where: dict[tuple[str, str], int] = {}  # (section, key) -> line index
        values: dict[str, dict[str, str]] = {}
        for sec in sections:
            lines.append(f"[{sec}]")
            if rng.random() < 0.4:
                lines.append(rng.choice(COMMENTS))
            keys = [shared, *rng.sample([k for k in KEYS if k != shared], rng.randint(2, 4))]
            rng.shuffle(keys)
            values[sec] = {}
            for key in keys:
                values[sec][key] = KEYS[key](rng)
                where[(sec, key)] = len(lines)
                lines.append(f"{key} = {values[sec][key]}")
            lines.append("")
        target = rng.choice(sections)
        old = values[target][shared]
        twin = rng.choice([s for s in sections if s != target])  # same value elsewhere: a trap
        values[twin][shared] = old
        lines[where[(twin, shared)]] = f"{shared} = {old}"
        new = old
        while new == old:
            new = KEYS[shared](rng)
        add = rng.random() < 0.4
        add_sec = rng.choice([s for s in sections if s != target]) if add else ""
        add_key = rng.choice(sorted(NEW_KEYS)) if add else ""
        add_val = NEW_KEYS[add_key](rng) if add else ""

        lines.pop()  # no blank line after the last section
        text = "\n".join(lines) + "\n"
        path = f"/home/user/{project}/config/{rng.choice(['app', 'settings', project])}.ini"
        expected_lines = list(lines)
        idx = where[(target, shared)]
        expected_lines[idx] = f"{shared} = {new}"
        final = {s: dict(kv) for s, kv in values.items()}
        final[target][shared] = new
        if add:
            final[add_sec][add_key] = add_val

        others = ", ".join(f"[{s}]" for s in sections if s != target)
        instruction = (
            f"In {path}, change `{shared}` in the [{target}] section from {old} to {new}. The "
            f"other sections ({others}) have their own `{shared}` settings, which must keep "
            "their values."
        )
        if add:
            instruction += (
                f" Also add the setting `{add_key} = {add_val}` to the [{add_sec}] section."
            )
        instruction += (
            " Keep the rest of the file exactly as it is: every comment, blank line and other "
            "setting should stay where it is, in the same order."
        )
        awk = dedent(f"""
            /^\\[/ {{ cur = $0; gsub(/^\\[|\\].*$/, "", cur) }}
            cur == "{target}" && $0 ~ /^{shared}[ \\t]*[=:]/ {{ print "{shared} = {new}"; next }}
            {{ print }}
        """)
        if add:
            awk += f'/^\\[/ && cur == "{add_sec}" {{ print "{add_key} = {add_val}" }}\n'
        solution = (
            f"awk '\n{awk}' {path} > /tmp/ini.$$ && cat /tmp/ini.$$ > {path} && rm /tmp/ini.$$\n"
        )

        consts = {
            "PATH": path,
            "INITIAL_SHA": sha256(text),
            "EXPECTED_LINES": expected_lines,
            "CHANGED_LINE": idx,
            "KEY": shared,
            "NEW": new,
            "ADDED_KEY": add_key,
            "FINAL": final,
        }
        initial_test = render_test(
            ["hashlib"],
            consts,
            """
            def test_config_as_shipped():
                with open(PATH, "rb") as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == INITIAL_SHA
        """,
        )
        completion_test = render_test(
            ["configparser", "re"],
            consts,
            """
            def _lines():
                with open(PATH) as fh:
                    lines = fh.read().rstrip("\\n").split("\\n")
                if ADDED_KEY:
                    pattern = rf"\\s*{ADDED_KEY}\\s*[=:]"
                    added = [i for i, ln in enumerate(lines) if re.match(pattern, ln)]
                    assert len(added) == 1, "the new setting should appear exactly once"
                    del lines[added[0]]
                return lines


            def test_settings():
                parser = configparser.ConfigParser(interpolation=None)
                parser.read(PATH)
                got = {s: dict(parser[s]) for s in parser.sections()}
                assert got == FINAL


            def test_changed_line():
                line = _lines()[CHANGED_LINE]
                assert re.fullmatch(rf"\\s*{KEY}\\s*[=:]\\s*{re.escape(NEW)}\\s*", line), line


            def test_other_lines_unchanged():
                lines = _lines()
                assert len(lines) == len(EXPECTED_LINES)
                for i, (got, want) in enumerate(zip(lines, EXPECTED_LINES)):
                    if i != CHANGED_LINE:
                        assert got.rstrip() == want, (i, got)
        """,
        )
        return FamilyTask(
            instruction=instruction,
            truth={
                "path": path,
                "section": target,
                "key": shared,
                "old": old,
                "new": new,
                "added": [add_sec, add_key, add_val] if add else [],
            },
            files={path.removeprefix("/home/user/"): text},
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="hard" if add else "medium" if len(sections) > 4 else "easy",
            scenario="platform engineer editing service configuration",
        )
