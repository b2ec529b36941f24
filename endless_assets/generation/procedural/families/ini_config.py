"""INI files: change one key in one section (and maybe add a key) without touching other lines.

Up the levels (ini_edit.py): the key in every section with the same value in another, then a
key to add and history in comments, a key to remove, lines written in several styles and an
example file to leave alone, one file per environment (one with CRLF endings), and comments at
line ends with a section whose name starts like the target's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from endless_assets.generation.procedural.base import Family, FamilyTask, dedent
from endless_assets.generation.procedural.families import ini_edit
from endless_assets.generation.procedural.names import PROJECTS
from endless_assets.generation.procedural.render import kept, render_test, sha256


@dataclass
class Plan:
    project: str
    path: str = ""
    text: str = ""
    sections: list[str] = field(default_factory=list)
    target: str = ""
    shared: str = ""
    old: str = ""
    new: str = ""
    add: list[str] = field(default_factory=list)  # section, key, value ([] for none)
    expected_lines: list[str] = field(default_factory=list)
    idx: int = 0  # the changed line
    final: dict[str, dict[str, str]] = field(default_factory=dict)
    edit: ini_edit.IniEdit | None = None  # leveled


class IniConfig(Family[Plan]):
    name = "ini_config"
    category = "INI configuration parsing"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        sections = rng.sample(ini_edit.SECTIONS, rng.randint(3, 6))
        shared = rng.choice(["timeout", "port", "enabled", "log_level", "pool_size", "host"])
        lines: list[str] = [f"; {project} configuration", ""]
        where: dict[tuple[str, str], int] = {}  # (section, key) -> line index
        values: dict[str, dict[str, str]] = {}
        for sec in sections:
            lines.append(f"[{sec}]")
            if rng.random() < 0.4:
                lines.append(rng.choice(ini_edit.COMMENTS))
            keys = [
                shared,
                *rng.sample([k for k in ini_edit.KEYS if k != shared], rng.randint(2, 4)),
            ]
            rng.shuffle(keys)
            values[sec] = {}
            for key in keys:
                values[sec][key] = ini_edit.KEYS[key](rng)
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
            new = ini_edit.KEYS[shared](rng)
        adds = []  # the setting to add, if any: section, key, value
        if rng.random() < 0.4:
            add_sec = rng.choice([s for s in sections if s != target])
            add_key = rng.choice(sorted(ini_edit.NEW_KEYS))
            adds = [add_sec, add_key, ini_edit.NEW_KEYS[add_key](rng)]

        lines.pop()  # no blank line after the last section
        text = "\n".join(lines) + "\n"
        path = f"/home/user/{project}/config/{rng.choice(['app', 'settings', project])}.ini"
        idx = where[(target, shared)]
        expected = [*lines[:idx], f"{shared} = {new}", *lines[idx + 1 :]]
        final = {s: dict(kv) for s, kv in values.items()}
        final[target][shared] = new
        if adds:
            final[adds[0]][adds[1]] = adds[2]
        return Plan(
            project, path, text, sections, target, shared, old, new, adds, expected, idx, final
        )

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        return Plan(project, edit=ini_edit.sample_edit(rng, project, level))

    def build(self, plan: Plan) -> FamilyTask:
        edit = plan.edit
        if edit:
            truth: dict[str, Any] = {"files": list(edit.files), "section": edit.target}
            truth.update(key=edit.shared, old=edit.old, new=edit.new)
            truth.update(added=edit.adds, removed=edit.removes, examples=list(edit.examples))
            files = {**edit.files, **edit.examples}
        else:
            truth = {
                "path": plan.path,
                "section": plan.target,
                "key": plan.shared,
                "old": plan.old,
                "new": plan.new,
                "added": plan.add,
            }
            files = {plan.path: plan.text}
        return self.task(
            plan,
            truth=truth,
            files={p.removeprefix("/home/user/"): t for p, t in files.items()},
            complexity="hard" if plan.add else "medium" if len(plan.sections) > 4 else "easy",
            scenario="platform engineer editing service configuration",
        )

    def instruction(self, plan: Plan) -> str:
        if plan.edit:
            return _leveled_instruction(plan.edit)
        shared, target = plan.shared, plan.target
        others = ", ".join(f"[{s}]" for s in plan.sections if s != target)
        instruction = (
            f"In {plan.path}, change `{shared}` in the [{target}] section from {plan.old} to "
            f"{plan.new}. The other sections ({others}) have their own `{shared}` settings, which "
            "must keep their values."
        )
        if plan.add:
            add_sec, add_key, add_val = plan.add
            instruction += (
                f" Also add the setting `{add_key} = {add_val}` to the [{add_sec}] section."
            )
        return instruction + (
            " Keep the rest of the file exactly as it is: every comment, blank line and other "
            "setting should stay where it is, in the same order."
        )

    def solution(self, plan: Plan) -> str:
        if plan.edit:
            return ini_edit.edit_solution(plan.edit)
        target, shared, new, path = plan.target, plan.shared, plan.new, plan.path
        awk = dedent(f"""
            /^\\[/ {{ cur = $0; gsub(/^\\[|\\].*$/, "", cur) }}
            cur == "{target}" && $0 ~ /^{shared}[ \\t]*[=:]/ {{ print "{shared} = {new}"; next }}
            {{ print }}
        """)
        if plan.add:
            add_sec, add_key, add_val = plan.add
            awk += f'/^\\[/ && cur == "{add_sec}" {{ print "{add_key} = {add_val}" }}\n'
        return f"awk '\n{awk}' {path} > /tmp/ini.$$ && cat /tmp/ini.$$ > {path} && rm /tmp/ini.$$\n"

    def tests(self, plan: Plan) -> tuple[str, str]:
        if plan.edit:
            return ini_edit.edit_tests(plan.edit)
        consts = {
            "PATH": plan.path,
            "INITIAL_SHA": sha256(plan.text),
            "EXPECTED_LINES": plan.expected_lines,
            "CHANGED_LINE": plan.idx,
            "KEY": plan.shared,
            "NEW": plan.new,
            "ADDED_KEY": plan.add[1] if plan.add else "",
            "FINAL": plan.final,
        }
        return (
            render_test(["hashlib"], consts, LEGACY_INITIAL),
            render_test(["configparser", "re"], consts, LEGACY_COMPLETION),
        )


def _leveled_instruction(edit: ini_edit.IniEdit) -> str:
    files = list(edit.files)
    shared, target, new = edit.shared, edit.target, edit.new
    if len(files) == 1:
        text = f"In {files[0]}, change `{shared}` in the [{target}] section from "
        text += f"{edit.old[files[0]]} to {new}."
    else:
        names = ", ".join(f.rsplit("/", 1)[1] for f in files)
        text = (
            f"Our {edit.project} service has one config file per environment in {edit.folder} "
            f"({names}). In each of them, set `{shared}` in the [{target}] section to {new}, "
            "whatever it is now."
        )
    if edit.level >= 2:
        text += f" Other sections have their own `{shared}` settings, which must keep their values."
    if edit.decoy:
        text += f" [{edit.decoy}] is a different section from [{target}]."
    for section, key, value in edit.adds:
        text += f" Also add the setting `{key} = {value}` to the [{section}] section."
    if edit.level >= 3:
        text += " Commented-out lines are history: leave them as they are."
    for section, key in edit.removes:
        text += f" Remove the `{key}` setting from the [{section}] section."
    for path in edit.examples:
        text += f" {path} documents the shipped defaults: don't change it."
    return text + (
        " Keep the rest of each file exactly as it is: every comment (also one at the end of a "
        "line), blank line and other setting should stay where it is, written the same way, "
        "with the same line endings."
    )


LEGACY_INITIAL = kept("test_config_as_shipped", "PATH", digest="INITIAL_SHA")
LEGACY_COMPLETION = """
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
"""
