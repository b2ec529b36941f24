"""File management: sort a messy folder into subfolders by extension or by the date in names.

Up the levels: more files, then files that stay, upper-case extensions or month folders, names
with spaces and leading dashes, hidden files, folders that already hold sorted files, dates that
do not exist, links that must stay links, a read-only file that must keep its mode, and a list
of the moves that must agree with the result.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.families import file_tests
from endless_assets.generation.procedural.names import PEOPLE, PROJECTS
from endless_assets.generation.procedural.render import extras_script, render_test, sha256

GROUPS = {
    "images": ["jpg", "png", "gif", "svg"],
    "documents": ["pdf", "docx", "txt", "odt"],
    "spreadsheets": ["csv", "xlsx", "ods"],
    "archives": ["zip", "tgz", "7z"],
    "audio": ["mp3", "wav", "flac"],
    "code": ["py", "sh", "js"],
}
STEMS = [
    "invoice",
    "holiday",
    "scan",
    "meeting notes",
    "budget",
    "draft",
    "photo",
    "report",
    "contract",
    "summary",
    "backup",
    "export",
    "receipt",
    "slides",
    "setup",
    "readme",
]
UNMAPPED = ["iso", "deb", "torrent", "epub", "log"]
VENDORS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"]
HIDDEN = [".DS_Store", ".~lock.budget.ods#", ".thumbnail.jpg", ".directory"]
BAD_DATES = ["2024-02-30", "2023-13-05", "2025-00-10", "2022-04-31"]


def _content(rng: random.Random, name: str) -> str:
    token = "".join(rng.choice("abcdef0123456789") for _ in range(16))
    return f"placeholder for {name}\nid={token}\n"


@dataclass
class Plan:
    base: str
    by_date: bool
    before: dict[str, str] = field(default_factory=dict)  # path under base -> text
    after: dict[str, str] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)  # by extension
    mixed_case: bool = False
    kind: str = ""  # by date: invoice, statement, ...
    ext: str = ""
    nested: bool = False  # by date: <YYYY>/<MM>/ rather than <YYYY>/
    complexity: str = ""
    level: int | None = None
    links: dict[str, str] = field(default_factory=dict)  # name in base -> absolute target
    outside: dict[str, str] = field(default_factory=dict)  # link targets: rel to home -> text
    modes: dict[str, int] = field(default_factory=dict)  # path under base (after) -> mode
    manifest: str = ""  # the list of moves, if asked for

    @property
    def rel(self) -> str:
        return self.base.removeprefix("/home/user/")

    def dest(self, name: str) -> str:
        """Where a file directly in the folder belongs (a folder under base), "" to stay."""
        if self.by_date:
            m = re.fullmatch(rf"{self.kind}_(\d{{4}})-(\d{{2}})-(\d{{2}})_[^/]+\.{self.ext}", name)
            if not m or not _real(*m.groups()):
                return ""
            return f"{m[1]}/{m[2]}" if self.nested else m[1]
        ext = name.rsplit(".", 1)[-1] if "." in name else ""
        ext = ext.lower() if self.mixed_case else ext
        return next((g for g in self.groups if ext in GROUPS[g]), "")


def _real(y: str, m: str, d: str) -> bool:
    try:
        date(int(y), int(m), int(d))
    except ValueError:
        return False
    return True


def _by_extension(rng: random.Random, plan: Plan) -> None:
    groups = rng.sample(sorted(GROUPS), rng.randint(2, 4))
    plan.groups, plan.mixed_case = groups, rng.random() < 0.5
    ext_to_group = {ext: g for g in groups for ext in GROUPS[g]}
    exts = sorted(ext_to_group) + rng.sample(UNMAPPED, rng.randint(1, 2))
    before, after = plan.before, plan.after
    for _ in range(rng.randint(8, 18)):
        ext = rng.choice(exts)
        stem = f"{rng.choice(STEMS)}{rng.choice(['', '_', ' ', '-'])}{rng.randint(1, 99)}"
        shown = ext.upper() if plan.mixed_case and rng.random() < 0.3 else ext
        name = f"{stem}.{shown}"
        if name in before:
            continue
        text = _content(rng, name)
        before[name] = text
        group = ext_to_group.get(ext)
        after[f"{group}/{name}" if group else name] = text
    if not any("/" in k for k in after):  # make sure something has to move
        name = f"{rng.choice(STEMS)}-0.{GROUPS[groups[0]][0]}"
        before[name] = after[f"{groups[0]}/{name}"] = _content(rng, name)
    mixed = plan.mixed_case
    plan.complexity = "hard" if mixed and len(groups) > 2 else "medium" if mixed else "easy"


def _by_date(rng: random.Random, plan: Plan) -> None:
    plan.kind = kind = rng.choice(["invoice", "statement", "payslip", "receipt"])
    plan.ext = ext = rng.choice(["pdf", "txt", "csv"])
    plan.nested = rng.random() < 0.5
    years = rng.sample(range(2021, 2027), rng.randint(1, 3))
    for _ in range(rng.randint(8, 16)):
        y, m, d = rng.choice(years), rng.randint(1, 12), rng.randint(1, 28)
        name = f"{kind}_{y}-{m:02d}-{d:02d}_{rng.choice(VENDORS)}.{ext}"
        if name in plan.before:
            continue
        where = f"{y}/{m:02d}/{name}" if plan.nested else f"{y}/{name}"
        plan.before[name] = plan.after[where] = _content(rng, name)
    for _ in range(rng.randint(2, 4)):  # files that do not follow the pattern stay put
        name = rng.choice(
            [
                f"{kind}_template.{ext}",
                f"{rng.choice(STEMS)}_{rng.randint(1, 9)}.{ext}",
                f"notes_{rng.randint(2021, 2026)}.txt",
                f"{kind}_{rng.randint(2021, 2026)}-{rng.randint(1, 12):02d}.{ext}.bak",
            ]
        )
        plan.before.setdefault(name, _content(rng, name))
        plan.after.setdefault(name, plan.before[name])
    plan.complexity = "hard" if plan.nested else "medium"


class FileOrganize(Family[Plan]):
    name = "file_organize"
    category = "file and directory management"

    def sample(self, rng: random.Random) -> Plan:
        by_date = rng.random() < 0.5
        if by_date:
            top = rng.choice(["paperwork", "finance", "scans"])
            plan = Plan(f"/home/user/{top}/{rng.choice(PEOPLE)}", True)
            _by_date(rng, plan)
        else:
            base = f"/home/user/{rng.choice(['Downloads', 'downloads', 'inbox'])}"
            if rng.random() < 0.4:
                base += f"/{rng.choice(PROJECTS)}"
            plan = Plan(base, False)
            _by_extension(rng, plan)
        return plan

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        by_date = rng.random() < 0.5
        top = rng.choice(["paperwork", "finance"] if by_date else ["Downloads", "inbox"])
        plan = Plan(f"/home/user/{top}/{rng.choice(PEOPLE)}", by_date, level=level)
        if by_date:
            plan.kind = rng.choice(["invoice", "statement", "payslip", "receipt"])
            plan.ext, plan.nested = rng.choice(["pdf", "txt", "csv"]), level >= 3
        else:
            plan.groups = rng.sample(sorted(GROUPS), by_level(level, 2, 3, 3, 4, 4, 5))
            plan.mixed_case = level >= 3
        names = [
            self._name(rng, plan, level) for _ in range(by_level(level, 6, 10, 14, 18, 22, 28))
        ]
        if level >= 2:
            names += [self._stayer(rng, plan) for _ in range(by_level(level, 0, 2, 3, 3, 4, 4))]
        if level >= 4:
            names += rng.sample(HIDDEN, 2)
            if by_date:
                names += [
                    f"{plan.kind}_{d}_{rng.choice(VENDORS)}.{plan.ext}" for d in BAD_DATES[:2]
                ]
            else:
                names.append(f"-{rng.choice(STEMS)}.{GROUPS[plan.groups[0]][0]}")
        for name in names:
            plan.before.setdefault(name, _content(rng, name))
        if level >= 4:  # a folder that already holds sorted files
            first = next(n for n in plan.before if plan.dest(n))
            for k in range(2):
                old = f"{plan.dest(first)}/old-{k}-{first}"
                plan.before[old] = _content(rng, old)
        for name, text in plan.before.items():
            where = plan.dest(name) if "/" not in name and not name.startswith(".") else ""
            plan.after[f"{where}/{name}" if where else name] = text
        if level >= 5:
            for k, name in enumerate(n for n in plan.before if plan.dest(n) and "/" not in n):
                if k >= 2:
                    break
                target = f"shared/{plan.rel.replace('/', '-')}/{name}"
                plan.outside[target] = _content(rng, target)
                plan.links[f"link-{name}"] = f"/home/user/{target}"
        if level == 6:
            moved = sorted(p for p in plan.after if "/" in p and p not in plan.before)
            plan.modes[moved[0]] = 0o444
            plan.manifest = f"/home/user/reports/{top.lower()}-moves.tsv"
        return plan

    def _name(self, rng: random.Random, plan: Plan, level: int) -> str:
        if plan.by_date:
            y, m, d = rng.randint(2022, 2025), rng.randint(1, 12), rng.randint(1, 28)
            vendor = rng.choice(VENDORS) + (" ltd" if level >= 3 and rng.random() < 0.3 else "")
            return f"{plan.kind}_{y}-{m:02d}-{d:02d}_{vendor}.{plan.ext}"
        ext = rng.choice(GROUPS[rng.choice(plan.groups)])
        shown = ext.upper() if plan.mixed_case and rng.random() < 0.3 else ext
        sep = rng.choice(["", "_", " ", "-"] if level >= 3 else ["", "_", "-"])
        return f"{rng.choice(STEMS).replace(' ', sep or '_')}{sep}{rng.randint(1, 99)}.{shown}"

    def _stayer(self, rng: random.Random, plan: Plan) -> str:
        """A name that looks like it belongs but must stay where it is."""
        if plan.by_date:
            kind, ext = plan.kind, plan.ext
            year = rng.randint(2022, 2025)
            return rng.choice(
                [f"{kind}_template.{ext}", f"{kind}_{year}-0{rng.randint(1, 9)}.{ext}.bak"]
            )
        return f"{rng.choice(STEMS)}-{rng.randint(1, 99)}.{rng.choice(UNMAPPED)}"

    def build(self, plan: Plan) -> FamilyTask:
        files = {f"{plan.rel}/{name}": text for name, text in plan.before.items()}
        top = "/home/user/" + plan.rel.split("/")[0]
        if plan.level is None:
            setup = f"import subprocess\n\nsubprocess.run(['chown', '-R', 'user:user', {top!r}])\n"
        else:
            links = {f"{plan.base}/{name}": target for name, target in plan.links.items()}
            # a mode is given where the file starts; the tests check it where it ends
            modes = {f"{plan.base}/{p.rsplit('/', 1)[-1]}": m for p, m in plan.modes.items()}
            owned = [top, *(["/home/user/shared"] if plan.outside else [])]
            setup = extras_script(links=links, modes=modes, owned=owned)
        truth = {"base": plan.base, "before": sorted(plan.before), "after": sorted(plan.after)}
        if plan.manifest:
            truth["manifest"] = plan.manifest
        return self.task(
            plan,
            truth=truth,
            files={**files, **plan.outside},
            setup_script=setup,
            complexity=plan.complexity,
            scenario="office worker tidying up personal files",
        )

    def instruction(self, plan: Plan) -> str:
        base = plan.base
        if plan.by_date:
            kind, ext, nested = plan.kind, plan.ext, plan.nested
            target = f"{base}/<YYYY>/<MM>/" if nested else f"{base}/<YYYY>/"
            text = (
                f"I keep every {kind} in {base}, named like `{kind}_YYYY-MM-DD_<vendor>.{ext}`. "
                f"Please file each of those into {target} according to the date in its name (for "
                f"example `{kind}_2024-03-09_acme.{ext}` goes to "
                f"{base}/2024/{'03/' if nested else ''}). Files that don't match that naming "
                "pattern exactly must stay where they are. Move (don't copy) the files, keep "
                "their names and contents unchanged."
            )
        else:
            rules = "; ".join(
                f"`{g}/` gets {', '.join('.' + e for e in GROUPS[g])}" for g in plan.groups
            )
            case_note = (
                " Extensions should be matched case-insensitively (a `.JPG` counts as `.jpg`), "
                "but keep every file name exactly as it is."
                if plan.mixed_case
                else " Keep every file name exactly as it is."
            )
            text = (
                f"My downloads folder {base} is a mess. Please sort the files that sit directly "
                f"in it into subfolders of {base} by extension: {rules}. Anything with another "
                f"extension stays where it is.{case_note} Move the files, don't copy them, and "
                "don't change their contents."
            )
        notes = []
        if plan.level is not None and plan.level >= 4:
            notes.append(
                "Hidden files (names starting with a dot) stay where they are, and so does "
                "everything already in a subfolder."
            )
            if plan.by_date:
                notes.append(
                    "A name whose date does not exist (say 2023-02-30) is a typo: leave it."
                )
        if plan.links:
            notes.append(
                "Some entries are symbolic links to files elsewhere: leave each link where it "
                "is, as a link."
            )
        if plan.modes:
            notes.append("A file's permissions must be the same after the move.")
        if plan.manifest:
            notes.append(
                f"Finally write {plan.manifest}: one line `<old>\\t<new>` (tab-separated, paths "
                f"relative to {base}) per file you moved."
            )
        return " ".join([text, *notes])

    def tests(self, plan: Plan) -> tuple[str, str]:
        expected = {p: sha256(t) for p, t in plan.after.items()}
        consts = {"BASE": plan.base, "BEFORE": sorted(plan.before), "EXPECTED": expected}
        if plan.level is None:
            return (
                render_test(["os"], consts, file_tests.LEGACY_INITIAL),
                render_test(["hashlib", "os"], consts, *file_tests.LEGACY_COMPLETION),
            )
        consts["EXPECTED"] = {**expected, **{n: "link:" + t for n, t in plan.links.items()}}
        consts["MODES"] = {p: f"{m:o}" for p, m in plan.modes.items()}
        moves = sorted(
            (name, f"{plan.dest(name)}/{name}")
            for name in plan.before
            if "/" not in name and not name.startswith(".") and plan.dest(name)
        )
        consts["MANIFEST"] = plan.manifest
        consts["MOVES"] = "".join(f"{a}\t{b}\n" for a, b in moves)
        return (
            render_test(["os"], consts, file_tests.INITIAL),
            render_test(["hashlib", "os"], consts, *file_tests.COMPLETION),
        )

    def solution(self, plan: Plan) -> str:
        if plan.level is not None:
            rule = (
                {"kind": plan.kind, "ext": plan.ext, "nested": plan.nested}
                if plan.by_date
                else {g: GROUPS[g] for g in plan.groups}
            )
            return f"python3 - <<'PY'\n{file_tests.reference(plan.base, rule, plan.manifest)}PY\n"
        if plan.by_date:
            kind, ext = plan.kind, plan.ext
            dest = "$y/$m" if plan.nested else "$y"
            return dedent(f"""
                cd {plan.base}
                for f in {kind}_*.{ext}; do
                  [ -f "$f" ] || continue
                  if [[ "$f" =~ ^{kind}_([0-9]{{4}})-([0-9]{{2}})-[0-9]{{2}}_[^/]+\\.{ext}$ ]]; then
                    y=${{BASH_REMATCH[1]}}; m=${{BASH_REMATCH[2]}}
                    mkdir -p "{dest}" && mv -- "$f" "{dest}/"
                  fi
                done
            """)
        arms = [f"    {'|'.join(f'*.{e}' for e in GROUPS[g])}) dest={g} ;;" for g in plan.groups]
        return dedent("""
            cd {base}
            for f in *; do
              [ -f "$f" ] || continue
              lower=$(printf '%s' "$f" | tr '[:upper:]' '[:lower:]')
              dest=
              case "$lower" in
            {arms}
              esac
              if [ -n "$dest" ]; then mkdir -p "$dest" && mv -- "$f" "$dest/"; fi
            done
        """).format(base=plan.base, arms="\n".join(arms))
