"""File management: sort a messy folder into subfolders by extension or by the date in names."""

from __future__ import annotations

import random

from endless_assets.generation.procedural.base import PEOPLE, PROJECTS, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import render_test, sha256

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


def _content(rng: random.Random, name: str) -> str:
    token = "".join(rng.choice("abcdef0123456789") for _ in range(16))
    return f"placeholder for {name}\nid={token}\n"


Variant = tuple[str, dict[str, str], dict[str, str], str, str]


def _by_extension(rng: random.Random, base: str) -> Variant:
    groups = rng.sample(sorted(GROUPS), rng.randint(2, 4))
    mixed_case = rng.random() < 0.5
    ext_to_group = {ext: g for g in groups for ext in GROUPS[g]}
    exts = sorted(ext_to_group) + rng.sample(UNMAPPED, rng.randint(1, 2))
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    for _ in range(rng.randint(8, 18)):
        ext = rng.choice(exts)
        stem = f"{rng.choice(STEMS)}{rng.choice(['', '_', ' ', '-'])}{rng.randint(1, 99)}"
        shown = ext.upper() if mixed_case and rng.random() < 0.3 else ext
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
    rules = "; ".join(f"`{g}/` gets {', '.join('.' + e for e in GROUPS[g])}" for g in groups)
    case_note = (
        " Extensions should be matched case-insensitively (a `.JPG` counts as `.jpg`), but keep "
        "every file name exactly as it is."
        if mixed_case
        else " Keep every file name exactly as it is."
    )
    instruction = (
        f"My downloads folder {base} is a mess. Please sort the files that sit directly in it "
        f"into subfolders of {base} by extension: {rules}. Anything with another extension stays "
        f"where it is.{case_note} Move the files, don't copy them, and don't change their contents."
    )
    case_arms = []
    for g in groups:
        pats = "|".join(f"*.{e}" for e in GROUPS[g])
        case_arms.append(f"    {pats}) dest={g} ;;")
    solution = dedent("""
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
    """).format(base=base, arms="\n".join(case_arms))
    complexity = "hard" if mixed_case and len(groups) > 2 else "medium" if mixed_case else "easy"
    return instruction, before, after, solution, complexity


def _by_date(rng: random.Random, base: str) -> Variant:
    kind = rng.choice(["invoice", "statement", "payslip", "receipt"])
    ext = rng.choice(["pdf", "txt", "csv"])
    nested = rng.random() < 0.5
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    years = rng.sample(range(2021, 2027), rng.randint(1, 3))
    for _ in range(rng.randint(8, 16)):
        y, m, d = rng.choice(years), rng.randint(1, 12), rng.randint(1, 28)
        name = f"{kind}_{y}-{m:02d}-{d:02d}_{rng.choice(VENDORS)}.{ext}"
        if name in before:
            continue
        before[name] = after[f"{y}/{m:02d}/{name}" if nested else f"{y}/{name}"] = _content(
            rng, name
        )
    for _ in range(rng.randint(2, 4)):  # files that do not follow the pattern stay put
        name = rng.choice(
            [
                f"{kind}_template.{ext}",
                f"{rng.choice(STEMS)}_{rng.randint(1, 9)}.{ext}",
                f"notes_{rng.randint(2021, 2026)}.txt",
                f"{kind}_{rng.randint(2021, 2026)}-{rng.randint(1, 12):02d}.{ext}.bak",
            ]
        )
        before.setdefault(name, _content(rng, name))
        after.setdefault(name, before[name])
    target = f"{base}/<YYYY>/<MM>/" if nested else f"{base}/<YYYY>/"
    instruction = (
        f"I keep every {kind} in {base}, named like `{kind}_YYYY-MM-DD_<vendor>.{ext}`. Please "
        f"file each of those into {target} according to the date in its name (for example "
        f"`{kind}_2024-03-09_acme.{ext}` goes to "
        f"{base}/2024/{'03/' if nested else ''}). Files that don't match that naming pattern "
        "exactly must stay where they are. Move (don't copy) the files, keep their names and "
        "contents unchanged."
    )
    dest = "$y/$m" if nested else "$y"
    solution = dedent(f"""
        cd {base}
        for f in {kind}_*.{ext}; do
          [ -f "$f" ] || continue
          if [[ "$f" =~ ^{kind}_([0-9]{{4}})-([0-9]{{2}})-[0-9]{{2}}_[^/]+\\.{ext}$ ]]; then
            y=${{BASH_REMATCH[1]}}; m=${{BASH_REMATCH[2]}}
            mkdir -p "{dest}" && mv -- "$f" "{dest}/"
          fi
        done
    """)
    return instruction, before, after, solution, "hard" if nested else "medium"


class FileOrganize(Family):
    name = "file_organize"
    category = "file and directory management"

    def make(self, rng: random.Random) -> FamilyTask:
        by_date = rng.random() < 0.5
        if by_date:
            base = (
                f"/home/user/{rng.choice(['paperwork', 'finance', 'scans'])}/{rng.choice(PEOPLE)}"
            )
            instruction, before, after, solution, complexity = _by_date(rng, base)
        else:
            base = f"/home/user/{rng.choice(['Downloads', 'downloads', 'inbox'])}"
            if rng.random() < 0.4:
                base += f"/{rng.choice(PROJECTS)}"
            instruction, before, after, solution, complexity = _by_extension(rng, base)
        rel = base.removeprefix("/home/user/")
        expected = {p: sha256(t) for p, t in after.items()}
        consts = {"BASE": base, "BEFORE": sorted(before), "EXPECTED": expected}
        initial_test = render_test(
            ["os"],
            consts,
            """
            def test_files_present_and_flat():
                for name in BEFORE:
                    assert os.path.isfile(os.path.join(BASE, name)), name
                assert sorted(os.listdir(BASE)) == BEFORE
        """,
        )
        completion_test = render_test(
            ["hashlib", "os"],
            consts,
            """
            def _layout():
                found = {}
                for root, _dirs, files in os.walk(BASE):
                    for name in files:
                        path = os.path.join(root, name)
                        with open(path, "rb") as fh:
                            digest = hashlib.sha256(fh.read()).hexdigest()
                        found[os.path.relpath(path, BASE)] = digest
                return found


            def test_final_layout():
                assert sorted(_layout()) == sorted(EXPECTED)


            def test_contents_preserved():
                found = _layout()
                for path, digest in EXPECTED.items():
                    assert found.get(path) == digest, path
        """,
        )
        top = "/home/user/" + rel.split("/")[0]
        setup = f"import subprocess\n\nsubprocess.run(['chown', '-R', 'user:user', {top!r}])\n"
        return FamilyTask(
            instruction=instruction,
            truth={"base": base, "before": sorted(before), "after": sorted(after)},
            files={f"{rel}/{name}": text for name, text in before.items()},
            setup_script=setup,
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity=complexity,
            scenario="office worker tidying up personal files",
        )
