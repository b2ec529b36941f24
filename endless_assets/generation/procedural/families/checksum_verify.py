"""Checksums: find the files of a release mirror that no longer match its SHA256SUMS manifest.

Up the levels: more files and more damage, then files listed but missing and files not listed,
a manifest mixing `*` markers, `./` prefixes, comments and a name with a space, a second
manifest in a subfolder beside a stale one that does not count, upper-case digests and CRLF
line endings, and a list of the files that passed, which must agree with the failures.
"""

from __future__ import annotations

import base64
import inspect
import random
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.names import PROJECTS
from endless_assets.generation.procedural.render import extras_script, kept, render_test, sha256

ARTIFACTS = [
    "{p}-{v}-linux-amd64.tar.gz",
    "{p}-{v}-linux-arm64.tar.gz",
    "{p}-{v}-darwin-arm64.zip",
    "{p}-{v}-windows-amd64.zip",
    "{p}_{v}_amd64.deb",
    "{p}-{v}.x86_64.rpm",
    "docs/{p}-{v}-manual.pdf",
    "docs/CHANGELOG.txt",
    "src/{p}-{v}.tar.xz",
    "sbom/{p}-{v}.spdx.json",
    "keys/release-signing.asc",
]


def _corrupt(data: bytes, op: str, arg: int) -> bytes:
    """Damage a file the way a bad transfer would."""
    if op == "flip":
        return data[:arg] + bytes([data[arg] ^ 0xFF]) + data[arg + 1 :]
    if op == "truncate":
        return data[:arg]
    return data + b"\0" * arg  # "append"


SETUP = """
import base64
import hashlib
import os
import shutil

BASE = {base!r}
FILES = {files!r}
DAMAGE = {damage!r}
MISSING = {missing!r}
EXTRA = {extra!r}

{corrupt}

lines = []
for rel, blob in FILES.items():
    data = base64.b64decode(blob)
    path = os.path.join(BASE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    lines.append(f"{{hashlib.sha256(data).hexdigest()}}  {{rel}}\\n")
with open(os.path.join(BASE, "SHA256SUMS"), "w") as fh:
    fh.writelines(lines)
# only now, with the manifest written, do the files get damaged
for rel, (op, arg) in DAMAGE.items():
    path = os.path.join(BASE, rel)
    with open(path, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as fh:
        fh.write(_corrupt(data, op, arg))
for rel in MISSING:
    os.remove(os.path.join(BASE, rel))
with open(os.path.join(BASE, EXTRA), "wb") as fh:
    fh.write(b"local notes, not part of the release\\n")
shutil.chown(os.path.dirname(BASE), "user", "user")
for root, dirs, files in os.walk(BASE):
    for name in [root] + [os.path.join(root, n) for n in files]:
        shutil.chown(name, "user", "user")
"""


@dataclass
class Plan:
    project: str
    version: str
    blobs: dict[str, bytes]  # path under base -> bytes as released
    damage: dict[str, tuple[str, int]]
    missing: list[str]
    extra: str
    level: int | None = None
    manifests: dict[str, str] = field(default_factory=dict)  # path under base -> text
    decoy: str = ""  # a stale manifest that does not count
    passed: bool = False  # also list the files that pass

    @property
    def base(self) -> str:
        return f"/home/user/mirror/{self.project}-{self.version}"

    @property
    def report(self) -> str:
        return f"/home/user/{self.project}-{self.version}-failed.txt"

    @property
    def ok_report(self) -> str:
        return f"/home/user/{self.project}-{self.version}-ok.txt" if self.passed else ""

    def final(self) -> dict[str, bytes]:
        """The files as the mirror holds them: damaged ones damaged, missing ones gone."""
        return {
            rel: _corrupt(data, *self.damage[rel]) if rel in self.damage else data
            for rel, data in self.blobs.items()
            if rel not in self.missing
        }

    def failed(self) -> list[str]:
        return sorted([*self.damage, *self.missing])


def _manifests(rng: random.Random, plan: Plan, level: int) -> None:
    """The leveled manifests: docs/ gets its own from level 5, odd spellings from level 4."""
    lines: dict[str, list[str]] = {"SHA256SUMS": [], "docs/SHA256SUMS": []}
    for rel, data in plan.blobs.items():
        where = "docs/SHA256SUMS" if level >= 5 and rel.startswith("docs/") else "SHA256SUMS"
        name = rel.removeprefix("docs/") if where.startswith("docs/") else rel
        digest = sha256(data)
        if level >= 6 and rng.random() < 0.3:
            digest = digest.upper()
        marker = "*" if level >= 4 and rng.random() < 0.3 else " "
        if level >= 4 and rng.random() < 0.3:
            name = "./" + name
        lines[where].append(f"{digest} {marker}{name}\n")
    head = f"# {plan.project} {plan.version} release checksums\n" if level >= 4 else ""
    plan.manifests["SHA256SUMS"] = head + "".join(lines["SHA256SUMS"])
    if lines["docs/SHA256SUMS"]:
        plan.manifests["docs/SHA256SUMS"] = "".join(lines["docs/SHA256SUMS"])
    if level >= 6:
        plan.manifests["SHA256SUMS"] = plan.manifests["SHA256SUMS"].replace("\n", "\r\n")
    if level >= 5:
        plan.decoy = "SHA256SUMS.old"
        stale = (f"{sha256(rel)}  {rel}\n" for rel in plan.blobs)
        plan.manifests[plan.decoy] = "".join(stale)


class ChecksumVerify(Family[Plan]):
    name = "checksum_verify"
    category = "checksum verification"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        version = f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        names = [a.format(p=project, v=version) for a in rng.sample(ARTIFACTS, rng.randint(5, 9))]
        blobs = {n: rng.randbytes(rng.randint(64, 1500)) for n in sorted(names)}
        bad = rng.sample(sorted(blobs), rng.randint(1, min(3, len(blobs) - 2)))
        damage = self._damage(rng, blobs, bad)
        with_missing = rng.random() < 0.4
        spare = [n for n in blobs if n not in damage]
        missing = [rng.choice(spare)] if with_missing else []
        extra = rng.choice(["NOTES.txt", "download.log", "mirror-info.txt"])
        return Plan(project, version, blobs, damage, missing, extra)

    def _damage(
        self, rng: random.Random, blobs: dict[str, bytes], bad: list[str]
    ) -> dict[str, tuple[str, int]]:
        damage: dict[str, tuple[str, int]] = {}
        for rel in bad:
            op = rng.choice(["flip", "truncate", "append"])
            size = len(blobs[rel])
            damage[rel] = (op, rng.randrange(size) if op != "append" else rng.randint(1, 64))
        return damage

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        version = f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        pool = [a for a in ARTIFACTS if not a.startswith("docs/")]
        count = by_level(level, 4, 6, 7, 6, 7, 8)
        chosen = rng.sample(pool, min(count, len(pool)))
        if level >= 4:
            chosen += ["docs/{p}-{v}-manual.pdf", "docs/CHANGELOG.txt", "docs/{p} {v} notes.txt"]
        names = [a.format(p=project, v=version) for a in chosen]
        blobs = {n: rng.randbytes(rng.randint(64, 1500)) for n in sorted(names)}
        bad = rng.sample(sorted(blobs), by_level(level, 1, 2, 2, 3, 3, 4))
        if level >= 5 and not any(b.startswith("docs/") for b in bad):
            bad[-1] = rng.choice([n for n in blobs if n.startswith("docs/")])
        damage = self._damage(rng, blobs, bad)
        spare = [n for n in blobs if n not in damage]
        missing = rng.sample(spare, by_level(level, 0, 0, 1, 1, 2, 2))
        plan = Plan(project, version, blobs, damage, missing, "NOTES.txt", level=level)
        plan.passed = level >= 6
        if level >= 2:
            _manifests(rng, plan, level)
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        if plan.level is None or not plan.manifests:
            setup = SETUP.format(
                base=plan.base,
                files={rel: base64.b64encode(d).decode() for rel, d in plan.blobs.items()},
                damage=plan.damage,
                missing=plan.missing,
                extra=plan.extra,
                corrupt=inspect.getsource(_corrupt),
            ).lstrip()
        else:
            blobs = {f"{plan.base}/{rel}": d for rel, d in plan.final().items()}
            blobs.update({f"{plan.base}/{rel}": t.encode() for rel, t in plan.manifests.items()})
            blobs[f"{plan.base}/{plan.extra}"] = b"local notes, not part of the release\n"
            setup = extras_script(blobs, owned=["/home/user/mirror"])
        truth = {
            "base": plan.base,
            "report": plan.report,
            "failed": plan.failed(),
            "damage": plan.damage,
        }
        if plan.passed:
            truth["ok_report"] = plan.ok_report
        bad, with_missing = plan.damage, bool(plan.missing)
        return self.task(
            plan,
            truth=truth,
            setup_script=setup,
            complexity="hard" if with_missing else "medium" if len(bad) > 1 else "easy",
            scenario="release engineer verifying a mirrored download",
        )

    def instruction(self, plan: Plan) -> str:
        what = (
            "a file that is listed but absent counts as failed too"
            if plan.missing
            else "a file fails if its content no longer matches"
        )
        where = "SHA256SUMS manifest"
        if "docs/SHA256SUMS" in plan.manifests:
            where = (
                "SHA256SUMS manifest (the files under docs/ are listed in docs/SHA256SUMS, with "
                "paths relative to docs/; SHA256SUMS.old is an outdated manifest, ignore it)"
            )
        listed = "exactly as it appears in the manifest"
        if plan.manifests:
            listed = f"relative to {plan.base} (no leading `./`)"
        text = (
            f"I mirrored the {plan.project} {plan.version} release into {plan.base}, together with "
            f"its {where}, and I suspect the transfer damaged some files. Check every file listed "
            f"in the manifest ({what}). Write the path of every file that fails, {listed}, to "
            f"{plan.report}, one per line, sorted alphabetically."
        )
        if plan.passed:
            text += f" Write the paths of the files that pass the same way to {plan.ok_report}."
        return text + (
            " Don't repair, delete or re-download anything, and don't touch the manifest"
            + ("s." if len(plan.manifests) > 1 else ".")
        )

    def tests(self, plan: Plan) -> tuple[str, str]:
        manifest = "".join(f"{sha256(d)}  {rel}\n" for rel, d in plan.blobs.items())
        consts = {
            "BASE": plan.base,
            "REPORT": plan.report,
            "EXPECTED": plan.failed(),
            "MANIFEST_SHA": sha256(manifest),
            "FILES": {rel: sha256(d) for rel, d in plan.final().items()},
        }
        completion = [COMPLETION]
        if plan.level is not None:
            if plan.manifests:
                consts["MANIFEST_SHA"] = sha256(plan.manifests["SHA256SUMS"])
                for rel, text in plan.manifests.items():
                    consts["FILES"][rel] = sha256(text)
            consts["OK_REPORT"] = plan.ok_report
            consts["PASSED"] = sorted(set(plan.final()) - set(plan.failed()))
            completion.append(PASSED)
        return (
            render_test(["hashlib", "os"], consts, *INITIAL),
            render_test(["hashlib", "os"], consts, *completion),
        )

    def solution(self, plan: Plan) -> str:
        if plan.level is None or plan.level <= 3:
            return dedent(f"""
                cd {plan.base}
                sha256sum -c SHA256SUMS 2>/dev/null | grep -v ': OK$' \\
                  | sed -E 's/: FAILED( open or read)?$//' | sort > {plan.report}
            """)
        manifests = [m for m in plan.manifests if m != plan.decoy]
        script = REFERENCE.format(
            base=plan.base, manifests=manifests, report=plan.report, ok=plan.ok_report
        )
        return f"python3 - <<'PY'\n{dedent(script)}PY\n"


INITIAL = (
    kept("test_manifest_present", 'os.path.join(BASE, "SHA256SUMS")', digest="MANIFEST_SHA"),
    kept("test_files_present", "FILES", "BASE"),
    """
    def test_report_absent():
        assert not os.path.exists(REPORT)
""",
)
COMPLETION = """
    def test_report():
        with open(REPORT) as fh:
            got = [line.strip() for line in fh if line.strip()]
        assert got == EXPECTED


    def test_release_untouched():
        with open(os.path.join(BASE, "SHA256SUMS"), "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == MANIFEST_SHA
        for rel, digest in FILES.items():
            with open(os.path.join(BASE, rel), "rb") as fh:
                assert hashlib.sha256(fh.read()).hexdigest() == digest, rel
"""
PASSED = """
    def test_passed_listed():
        if OK_REPORT:
            with open(OK_REPORT) as fh:
                got = [line.strip() for line in fh if line.strip()]
            assert sorted(got) == PASSED
"""
REFERENCE = """
    import hashlib, os

    BASE, MANIFESTS, REPORT, OK = {base!r}, {manifests!r}, {report!r}, {ok!r}
    failed, passed = [], []
    for manifest in MANIFESTS:
        folder = os.path.dirname(manifest)
        with open(os.path.join(BASE, manifest)) as fh:
            lines = [line.rstrip("\\r\\n") for line in fh]
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            digest, name = line[:64].lower(), line[66:]
            rel = os.path.normpath(os.path.join(folder, name))
            try:
                with open(os.path.join(BASE, rel), "rb") as data:
                    good = hashlib.sha256(data.read()).hexdigest() == digest
            except FileNotFoundError:
                good = False
            (passed if good else failed).append(rel)
    for path, names in ((REPORT, failed), (OK, passed)):
        if path:
            with open(path, "w") as fh:
                fh.writelines(name + "\\n" for name in sorted(names))
"""
