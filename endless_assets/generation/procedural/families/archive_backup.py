"""Backups: pack a project directory into a compressed tarball, leaving out some junk."""

from __future__ import annotations

import fnmatch
import random

from endless_assets.generation.procedural.base import PROJECTS, SERVICES, Family, FamilyTask
from endless_assets.generation.procedural.render import render_test, sha256

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


class ArchiveBackup(Family):
    name = "archive_backup"
    category = "backup and archiving"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        rules = rng.sample(sorted(RULES), rng.randint(1, 3))
        fmt = rng.choice(sorted(FORMATS))
        compressor, suffix, flag = FORMATS[fmt]
        with_top = rng.random() < 0.6
        date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        tree = _tree(rng, rules)
        patterns = [RULES[r][1] for r in rules]
        src = f"/home/user/projects/{project}"
        archive = f"/home/user/backups/{project}-{date}{suffix}"
        prefix = f"{project}/" if with_top else ""
        expected = {
            prefix + rel: sha256(text) for rel, text in tree.items() if not _excluded(rel, patterns)
        }
        sources = {rel: sha256(text) for rel, text in tree.items()}

        excl = "; ".join(RULES[r][0] for r in rules[:-1])
        excl = f"{excl}; and {RULES[rules[-1]][0]}" if excl else RULES[rules[-1]][0]
        layout = (
            f"with every path inside it starting with `{project}/`"
            if with_top
            else f"with paths relative to {src} (no `{project}/` folder at the top)"
        )
        instruction = (
            f"Before I refactor {project}, please back up {src}: create the "
            f"{compressor}-compressed tar archive {archive}, {layout}. Leave out {excl}. "
            "Everything else in the project, including hidden files, must be in it. Keep the "
            "project directory itself as it is."
        )
        excludes = " ".join(f"--exclude='{p}'" for p in patterns)
        if with_top:
            tar = f"tar -c{flag}f {archive} {excludes} -C /home/user/projects {project}"
        else:
            tar = f"tar -c{flag}f {archive} {excludes} -C {src} ."
        solution = f"mkdir -p /home/user/backups\n{tar}\n"

        consts = {
            "SRC": src,
            "ARCHIVE": archive,
            "MODE": f"r:{fmt}",
            "EXPECTED": expected,
            "SOURCES": sources,
        }
        initial_test = render_test(
            ["os"],
            consts,
            """
            def test_project_present():
                for rel in SOURCES:
                    assert os.path.isfile(os.path.join(SRC, rel)), rel


            def test_archive_absent():
                assert not os.path.exists(ARCHIVE)
        """,
        )
        completion_test = render_test(
            ["hashlib", "os", "tarfile"],
            consts,
            """
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


            def test_member_list():
                assert sorted(_members()) == sorted(EXPECTED)


            def test_member_contents():
                found = _members()
                for name, digest in EXPECTED.items():
                    assert found.get(name) == digest, name


            def test_project_kept():
                for rel, digest in SOURCES.items():
                    with open(os.path.join(SRC, rel), "rb") as fh:
                        assert hashlib.sha256(fh.read()).hexdigest() == digest, rel
        """,
        )
        return FamilyTask(
            instruction=instruction,
            truth={
                "source": src,
                "archive": archive,
                "exclude": patterns,
                "members": sorted(expected),
            },
            files={f"projects/{project}/{rel}": text for rel, text in tree.items()},
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="easy"
            if len(rules) == 1 and with_top
            else "hard"
            if len(rules) == 3
            else "medium",
            scenario="backup administrator archiving a project",
        )
