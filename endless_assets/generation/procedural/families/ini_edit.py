"""The INI family's leveled files and edits: sections written in several styles (one setting
shared by all, history in comments, comments at line ends, a look-alike section), one file per
environment with CRLF in one; `apply_edits` makes the expected text and runs in the reference."""

from __future__ import annotations

import configparser
import inspect
import random
import re
from dataclasses import dataclass, field
from typing import Any

from endless_assets.generation.procedural.base import by_level, dedent
from endless_assets.generation.procedural.render import kept, render_test, sha256

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
NOTES = ["; tuned in March", "# see runbook", "; do not lower"]
ENVS = ["dev", "staging", "prod"]


def apply_edits(text: str, changes: list, adds: list, removes: list) -> str:
    """`text` with each [section, key, value] of `changes` set (keeping how the line is written
    and a comment at its end), each of `adds` added after its section's last setting, and each
    [section, key] of `removes` deleted; line endings kept. The reference runs it too."""
    setting = r"(\s*)([\w.-]+)(\s*[=:]\s*)([^;#\r\n]*?)(\s*[;#][^\r\n]*)?(\r?\n)?$"
    out, section, last = [], None, {}
    for line in text.splitlines(keepends=True):
        head = re.match(r"\s*\[([^\]]+)\]", line)
        m = None if head else re.match(setting, line)
        if head:
            section = head.group(1)
        elif m and [section, m.group(2)] in removes:
            continue
        elif m:
            for s, k, v in changes:
                if (s, k) == (section, m.group(2)):
                    line = m.group(1) + k + m.group(3) + v + (m.group(5) or "") + (m.group(6) or "")
        out.append(line)
        if m:
            last[section] = len(out)
    eol = "\r\n" if "\r\n" in text else "\n"
    for s, k, v in sorted(adds, key=lambda a: -last[a[0]]):
        out.insert(last[s], f"{k} = {v}{eol}")
    return "".join(out)


@dataclass
class IniEdit:
    project: str
    folder: str
    target: str
    shared: str
    new: str
    level: int
    files: dict[str, str] = field(default_factory=dict)  # path -> text, to edit
    examples: dict[str, str] = field(default_factory=dict)  # path -> text, to leave alone
    old: dict[str, str] = field(default_factory=dict)  # path -> the shared key's value now
    adds: list[list[str]] = field(default_factory=list)
    removes: list[list[str]] = field(default_factory=list)
    decoy: str = ""  # a section whose name starts like the target's

    @property
    def changes(self) -> list[list[str]]:
        return [[self.target, self.shared, self.new]]

    def expected(self, path: str) -> str:
        return apply_edits(self.files[path], self.changes, self.adds, self.removes)


def sample_edit(rng: random.Random, project: str, level: int) -> IniEdit:
    sections = rng.sample(SECTIONS, by_level(level, 3, 4, 5, 5, 6, 6))
    shared = rng.choice(["timeout", "port", "enabled", "log_level", "pool_size", "host"])
    target = rng.choice(sections)
    folder = f"/home/user/{project}/config"
    edit = IniEdit(project, folder, target, shared, KEYS[shared](rng), level)
    if level == 6:
        edit.decoy = f"{target} replica"
        sections.insert(sections.index(target) + 1, edit.decoy)
    keys = {
        s: [*([shared] if level >= 2 or s == target else []), *rng.sample(_others(shared), 3)]
        for s in sections
    }
    twin = rng.choice([s for s in sections if s not in (target, edit.decoy)])
    if level >= 3:
        add_sec = rng.choice([s for s in sections if s not in (target, edit.decoy)])
        key = rng.choice(sorted(NEW_KEYS))
        edit.adds.append([add_sec, key, NEW_KEYS[key](rng)])
    if level >= 4:
        gone = rng.choice([s for s in sections if s not in (target, edit.decoy)])
        edit.removes.append([gone, keys[gone][-1]])
    names = (
        [f"{env}.ini" for env in ENVS] if level >= 5 else [f"{rng.choice(['app', project])}.ini"]
    )
    for name in names:
        path = f"{folder}/{name}"
        values = {s: {k: KEYS[k](rng) for k in keys[s]} for s in sections}
        while values[target][shared] == edit.new:
            values[target][shared] = KEYS[shared](rng)
        if level >= 2:
            values[twin][shared] = values[target][shared]  # the same value elsewhere: a trap
        edit.old[path] = values[target][shared]
        edit.files[path] = _render(rng, edit, sections, values)
    if level >= 5:
        staging = f"{folder}/staging.ini"
        edit.files[staging] = edit.files[staging].replace("\n", "\r\n")
    if level >= 4:
        first = next(iter(edit.files))
        edit.examples[f"{first}.example"] = edit.files[first]
    return edit


def _others(shared: str) -> list[str]:
    return [k for k in KEYS if k != shared]


def _render(rng: random.Random, edit: IniEdit, sections: list[str], values: dict) -> str:
    lines = [f"; {edit.project} configuration", ""]
    for sec in sections:
        lines.append(f"[{sec}]")
        if rng.random() < 0.4:
            lines.append(rng.choice(COMMENTS))
        if sec == edit.target and edit.level >= 3:  # history that mentions the key
            lines.append(f"; {edit.shared} = {KEYS[edit.shared](rng)} (before the migration)")
        for key, value in values[sec].items():
            sep = rng.choice([" = ", "=", ": "]) if edit.level >= 4 else " = "
            note = ""
            if edit.level == 6 and (key == edit.shared or rng.random() < 0.3):
                note = "  " + rng.choice(NOTES)
            lines.append(f"{key}{sep}{value}{note}")
        lines.append("")
    return "\n".join(lines[:-1]) + "\n"


def edit_tests(edit: IniEdit) -> tuple[str, str]:
    files: dict[str, Any] = {}
    setting = re.compile(r"\s*([\w.-]+)\s*[=:]\s*[^;#\r\n]*?(\s*[;#][^\r\n]*)?$")
    for path, text in edit.files.items():
        before = apply_edits(text, [], [], edit.removes).splitlines()
        after = apply_edits(text, edit.changes, [], edit.removes).splitlines()
        changed = {}
        for i, (a, b) in enumerate(zip(before, after, strict=True)):
            if a != b:
                tail = (setting.match(b).group(2) or "").strip()  # type: ignore[union-attr]
                changed[str(i)] = [edit.shared, edit.new, tail]
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(edit.expected(path))
        files[path] = {
            "lines": after,
            "changed": changed,
            "added": edit.adds,
            "final": {s: dict(parser[s]) for s in parser.sections()},
            "crlf": "\r\n" in text,
        }
    consts = {
        "FILES": files,
        "INITIAL": {p: sha256(t) for p, t in {**edit.files, **edit.examples}.items()},
        "UNTOUCHED": {p: sha256(t) for p, t in edit.examples.items()},
    }
    initial = render_test(["hashlib"], consts, INITIAL)
    checks = [COMPLETION, kept("test_examples_untouched", "UNTOUCHED")]
    return initial, render_test(["configparser", "hashlib", "re"], consts, *checks)


def edit_solution(edit: IniEdit) -> str:
    script = dedent(f"""
        import re


        {{source}}

        for path in {list(edit.files)!r}:
            with open(path, newline="") as fh:
                text = fh.read()
            with open(path, "w", newline="") as fh:
                fh.write(apply_edits(text, {edit.changes!r}, {edit.adds!r}, {edit.removes!r}))
    """).replace("{source}", inspect.getsource(apply_edits))
    return f"python3 - <<'PY'\n{script}PY\n"


INITIAL = kept("test_configs_as_shipped", "INITIAL")
COMPLETION = """
    def _section(lines, i):
        for line in reversed(lines[:i]):
            m = re.match(r"\\s*\\[([^\\]]+)\\]", line)
            if m:
                return m.group(1)
        return None


    def _lines(path, spec):
        with open(path, newline="") as fh:
            text = fh.read()
        if spec["crlf"]:
            assert text.count("\\r\\n") == text.count("\\n"), "keep the CRLF line endings"
        lines = text.replace("\\r\\n", "\\n").rstrip("\\n").split("\\n")
        for section, key, value in spec["added"]:
            setting = rf"\\s*{re.escape(key)}\\s*[=:]"
            found = [
                i
                for i, line in enumerate(lines)
                if re.match(setting, line) and _section(lines, i) == section
            ]
            assert len(found) == 1, f"{path}: {key} should be set once in [{section}]"
            line = lines.pop(found[0])
            assert re.fullmatch(rf"\\s*{re.escape(key)}\\s*[=:]\\s*{re.escape(value)}\\s*", line)
        return lines


    def test_edited_lines():
        for path, spec in FILES.items():
            lines = _lines(path, spec)
            assert len(lines) == len(spec["lines"]), path
            for i, (got, want) in enumerate(zip(lines, spec["lines"])):
                if str(i) in spec["changed"]:
                    key, value, tail = spec["changed"][str(i)]
                    pattern = rf"\\s*{key}\\s*[=:]\\s*{re.escape(value)}\\s*{re.escape(tail)}\\s*"
                    assert re.fullmatch(pattern, got), (path, i, got)
                else:
                    assert got.rstrip() == want.rstrip(), (path, i, got)


    def test_settings():
        for path, spec in FILES.items():
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(path)
            assert {s: dict(parser[s]) for s in parser.sections()} == spec["final"], path
"""
