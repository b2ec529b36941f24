"""Backups: pack a project directory into a compressed tarball, leaving out some junk.

Up the levels: more kinds of junk to leave out, then names with spaces and near-miss names that
must stay, links that must be archived as links and a script that must keep its mode, a checksum
file of the archive, and a build folder excluded at the top only, with a listing of the archive.
"""

from __future__ import annotations

import fnmatch
import random
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.names import PROJECTS, SERVICES
from endless_assets.generation.procedural.render import (
    extras_script,
    kept,
    matched,
    render_test,
    sha256,
)

FORMATS = {  # tarfile compression -> (name, file suffix, tar flag)
    "gz": ("gzip", ".tar.gz", "z"),
    "bz2": ("bzip2", ".tar.bz2", "j"),
    "xz": ("xz", ".tar.xz", "J"),
}
# exclusion rule -> (how it is described, tar --exclude pattern)
RULES = {
    "logs": ("log files (`*.log`, wherever they are)", "*.log"),
    "tmp": ("temporary files (`*.tmp`, wherever they are)", "*.tmp"),
    "node_modules": ("every `node_modules` directory with everything inside it", "node_modules"),
    "pycache": ("every `__pycache__` directory with everything inside it", "__pycache__"),
    "cache": ("the `.cache` directory with everything inside it", ".cache"),
}


def _excluded(rel: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(part, pat) for part in rel.split("/") for pat in patterns)


def _tree(rng: random.Random, rules: list[str]) -> dict[str, str]:
    svc = rng.sample(SERVICES, 3)
    paths = [
        "README.md",
        "config.yaml",
        "docs/changelog.md",  # contains "log" but is not a log file
        "logs/README.md",
        *(f"src/{s}.py" for s in svc),
        f"src/{svc[0]}/util.py",
        f"tests/test_{svc[1]}.py",
        f"data/{rng.choice(['seed', 'fixtures', 'sample'])}.csv",
    ]
    junk = {
        "logs": ["logs/app.log", f"logs/{svc[2]}.log", "debug.log"],
        "tmp": ["upload.tmp", f"data/{svc[0]}.tmp", "src/.swap.tmp"],
        "node_modules": ["node_modules/left-pad/index.js", "web/node_modules/react/package.json"],
        "pycache": [f"src/__pycache__/{svc[0]}.cpython-311.pyc", "tests/__pycache__/conf.pyc"],
        "cache": [".cache/pip/wheel.txt", ".cache/index.json"],
    }
    for rule in RULES:  # junk of the kinds not excluded stays in the archive
        paths += rng.sample(junk[rule], rng.randint(1, len(junk[rule])) if rule in rules else 1)
    return {
        p: f"# {p}\n"
        + "".join(f"line {i} {rng.getrandbits(32):08x}\n" for i in range(rng.randint(1, 6)))
        for p in paths
    }


@dataclass
class Plan:
    project: str
    rules: list[str]
    fmt: str
    with_top: bool
    date: str
    tree: dict[str, str]  # path under the project -> text
    level: int | None = None
    links: dict[str, str] = field(default_factory=dict)  # path under the project -> target
    modes: dict[str, int] = field(default_factory=dict)  # path under the project -> mode
    top_only: str = ""  # a folder excluded at the top of the project only
    checksum: bool = False  # write <archive>.sha256
    listing: bool = False  # write <archive>.list

    @property
    def src(self) -> str:
        return f"/home/user/projects/{self.project}"

    @property
    def archive(self) -> str:
        return f"/home/user/backups/{self.project}-{self.date}{FORMATS[self.fmt][1]}"

    @property
    def prefix(self) -> str:
        return f"{self.project}/" if self.with_top else ""

    def excluded(self, rel: str) -> bool:
        top = self.top_only and rel.split("/")[0] == self.top_only
        return top or _excluded(rel, [RULES[r][1] for r in self.rules])

    def members(self) -> dict[str, str]:
        """The archive's file members (name -> sha256 of the content)."""
        kept = {rel: t for rel, t in self.tree.items() if not self.excluded(rel)}
        return {self.prefix + rel: sha256(text) for rel, text in kept.items()}


def _extras(rng: random.Random, plan: Plan, level: int) -> None:
    """What the levels add to the project: odd names, links, a script, a build folder."""
    svc = rng.choice(SERVICES)
    add = {"docs/design notes.md": "spaces in the name\n", f"src/{svc} client.py": "pass\n"}
    if level >= 4:
        add["bin/deploy.sh"] = "#!/bin/sh\necho deploying\n"
        plan.modes["bin/deploy.sh"] = 0o755
        plan.links["current"] = f"src/{svc} client.py"
        plan.links["data/latest.csv"] = next(
            p.split("/")[-1] for p in plan.tree if p.startswith("data/")
        )
    if level >= 5:  # names that look like junk and are not
        add.update({"src/cache.py": "CACHE = {}\n", "docs/logging.md": "# logs\n", "tmp.md": "x\n"})
    if level >= 6:
        plan.top_only = "build"
        add["build/app.bin"] = f"{rng.getrandbits(64):016x}\n"
        add["build/out/report.txt"] = "generated\n"
        add["src/build/generate.py"] = "print('build step')\n"
    plan.tree.update(add)


class ArchiveBackup(Family[Plan]):
    name = "archive_backup"
    category = "backup and archiving"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        rules = rng.sample(sorted(RULES), rng.randint(1, 3))
        fmt = rng.choice(sorted(FORMATS))
        with_top = rng.random() < 0.6
        date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return Plan(project, rules, fmt, with_top, date, _tree(rng, rules))

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        rules = rng.sample(sorted(RULES), by_level(level, 1, 2, 3, 3, 4, 5))
        fmt = "gz" if level == 1 else rng.choice(sorted(FORMATS))
        with_top = level == 1 or rng.random() < 0.5
        date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        plan = Plan(project, rules, fmt, with_top, date, _tree(rng, rules), level=level)
        if level >= 3:
            _extras(rng, plan, level)
        plan.checksum, plan.listing = level >= 5, level >= 6
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        rules = plan.rules
        setup = ""
        if plan.links or plan.modes:
            links = {f"{plan.src}/{p}": t for p, t in plan.links.items()}
            modes = {f"{plan.src}/{p}": m for p, m in plan.modes.items()}
            setup = extras_script(links=links, modes=modes, owned=["/home/user/projects"])
        truth = {
            "source": plan.src,
            "archive": plan.archive,
            "exclude": [RULES[r][1] for r in rules],
            "members": sorted(plan.members()),
        }
        if plan.level is not None:
            truth["exclude_at_top"] = plan.top_only
            truth["links"] = {plan.prefix + p: t for p, t in plan.links.items()}
        complexity = "hard" if len(rules) == 3 else "medium"
        return self.task(
            plan,
            truth=truth,
            files={f"projects/{plan.project}/{rel}": text for rel, text in plan.tree.items()},
            setup_script=setup,
            complexity="easy" if len(rules) == 1 and plan.with_top else complexity,
            scenario="backup administrator archiving a project",
        )

    def instruction(self, plan: Plan) -> str:
        rules, project, src = plan.rules, plan.project, plan.src
        excl = "; ".join(RULES[r][0] for r in rules[:-1])
        excl = f"{excl}; and {RULES[rules[-1]][0]}" if excl else RULES[rules[-1]][0]
        if plan.top_only:
            excl = (
                f"the `{plan.top_only}/` folder at the top of the project (only that one); {excl}"
            )
        layout = (
            f"with every path inside it starting with `{project}/`"
            if plan.with_top
            else f"with paths relative to {src} (no `{project}/` folder at the top)"
        )
        text = (
            f"Before I refactor {project}, please back up {src}: create the "
            f"{FORMATS[plan.fmt][0]}-compressed tar archive {plan.archive}, {layout}. Leave out "
            f"{excl}. Everything else in the project, including hidden files, must be in it."
        )
        if plan.links:
            text += " Symbolic links go in as links, and every file keeps its permissions."
        if plan.checksum:
            name = plan.archive.rsplit("/", 1)[1]
            text += (
                f" Next to the archive, write {plan.archive}.sha256 in the format of `sha256sum` "
                f"(`<hash>  {name}`), so that `sha256sum -c` run in /home/user/backups checks it."
            )
        if plan.listing:
            text += (
                f" Also write {plan.archive}.list: the name of every file and link in the "
                "archive, one per line, as tar lists them (without a leading `./`)."
            )
        return text + " Keep the project directory itself as it is."

    def tests(self, plan: Plan) -> tuple[str, str]:
        consts = {
            "SRC": plan.src,
            "ARCHIVE": plan.archive,
            "MODE": f"r:{plan.fmt}",
            "EXPECTED": plan.members(),
            "SOURCES": {rel: sha256(text) for rel, text in plan.tree.items()},
        }
        parts = [
            COMPLETION,
            matched("_members", "test_member_list", "test_member_contents", "name"),
            kept("test_project_kept", "SOURCES", "SRC"),
        ]
        if plan.level is not None:
            consts["LINKS"] = {plan.prefix + p: t for p, t in plan.links.items()}
            consts["MODES"] = {plan.prefix + p: f"{m:o}" for p, m in plan.modes.items()}
            consts.update(CHECKSUM=plan.checksum, LISTING=plan.listing)
            parts.append(LEVELED)
        tar_test = render_test(["hashlib", "os", "tarfile"], consts, *parts)
        return render_test(["os"], consts, INITIAL), tar_test

    def solution(self, plan: Plan) -> str:
        flag, archive, project, src = FORMATS[plan.fmt][2], plan.archive, plan.project, plan.src
        patterns = [RULES[r][1] for r in plan.rules]
        if plan.top_only:
            patterns.insert(
                0, f"{project}/{plan.top_only}" if plan.with_top else f"./{plan.top_only}"
            )
        excludes = " ".join(f"--exclude='{p}'" for p in patterns)
        if plan.with_top:
            tar = f"tar -c{flag}f {archive} {excludes} -C /home/user/projects {project}"
        else:
            tar = f"tar -c{flag}f {archive} {excludes} -C {src} ."
        lines = ["mkdir -p /home/user/backups", tar]
        name = archive.rsplit("/", 1)[1]
        if plan.checksum:
            lines.append(f"(cd /home/user/backups && sha256sum {name} > {name}.sha256)")
        if plan.listing:
            lines.append(
                dedent(f"""
                    python3 - <<'PY'
                    import tarfile
                    with tarfile.open({archive!r}) as tar:
                        names = [m.name.removeprefix("./") for m in tar if m.isfile() or m.issym()]
                    with open({archive + ".list"!r}, "w") as fh:
                        fh.writelines(n + "\\n" for n in sorted(names))
                    PY
                """).rstrip("\n")
            )
        return "\n".join(lines) + "\n"


INITIAL = """
    def test_project_present():
        for rel in SOURCES:
            assert os.path.isfile(os.path.join(SRC, rel)), rel


    def test_archive_absent():
        assert not os.path.exists(ARCHIVE)
"""
COMPLETION = """
    def _members():
        assert os.path.isfile(ARCHIVE), "the archive was not created"
        found = {}
        with tarfile.open(ARCHIVE, MODE) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    name = member.name
                    while name.startswith("./"):
                        name = name[2:]
                    found[name] = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
        return found
"""
LEVELED = """
    def _entries():
        with tarfile.open(ARCHIVE, MODE) as tar:
            return {m.name.removeprefix("./"): m for m in tar.getmembers()}


    def test_links_and_modes():
        entries = _entries()
        for name, target in LINKS.items():
            assert entries[name].issym() and entries[name].linkname == target, name
        for name, mode in MODES.items():
            assert f"{entries[name].mode & 0o7777:o}" == mode, name


    def test_checksum_file():
        if CHECKSUM:
            with open(ARCHIVE, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            with open(ARCHIVE + ".sha256") as fh:
                assert fh.read().split() == [digest, os.path.basename(ARCHIVE)]


    def test_listing():
        if LISTING:
            with open(ARCHIVE + ".list") as fh:
                lines = [line.strip().removeprefix("./") for line in fh if line.strip()]
            want = sorted(n for n, m in _entries().items() if m.isfile() or m.issym())
            assert sorted(lines) == want == sorted([*EXPECTED, *LINKS])
"""
