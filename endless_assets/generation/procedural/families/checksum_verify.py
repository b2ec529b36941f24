"""Checksums: find the files of a release mirror that no longer match its SHA256SUMS manifest."""

from __future__ import annotations

import base64
import inspect
import random

from endless_assets.generation.procedural.base import PROJECTS, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import render_test, sha256

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


class ChecksumVerify(Family):
    name = "checksum_verify"
    category = "checksum verification"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        version = f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        base = f"/home/user/mirror/{project}-{version}"
        names = [a.format(p=project, v=version) for a in rng.sample(ARTIFACTS, rng.randint(5, 9))]
        blobs = {n: rng.randbytes(rng.randint(64, 1500)) for n in sorted(names)}
        bad = rng.sample(sorted(blobs), rng.randint(1, min(3, len(blobs) - 2)))
        damage: dict[str, tuple[str, int]] = {}
        for rel in bad:
            op = rng.choice(["flip", "truncate", "append"])
            size = len(blobs[rel])
            damage[rel] = (op, rng.randrange(size) if op != "append" else rng.randint(1, 64))
        with_missing = rng.random() < 0.4
        spare = [n for n in blobs if n not in damage]
        missing = [rng.choice(spare)] if with_missing else []
        extra = rng.choice(["NOTES.txt", "download.log", "mirror-info.txt"])

        final = {
            rel: _corrupt(data, *damage[rel]) if rel in damage else data
            for rel, data in blobs.items()
            if rel not in missing
        }
        manifest = "".join(f"{sha256(d)}  {rel}\n" for rel, d in blobs.items())
        expected = sorted(bad + missing)
        report = f"/home/user/{project}-{version}-failed.txt"

        setup = SETUP.format(
            base=base,
            files={rel: base64.b64encode(d).decode() for rel, d in blobs.items()},
            damage=damage,
            missing=missing,
            extra=extra,
            corrupt=inspect.getsource(_corrupt),
        ).lstrip()
        what = (
            "a file that is listed but absent counts as failed too"
            if with_missing
            else "a file fails if its content no longer matches"
        )
        instruction = (
            f"I mirrored the {project} {version} release into {base}, together with its "
            f"SHA256SUMS manifest, and I suspect the transfer damaged some files. Check every file "
            f"listed in the manifest ({what}). Write the path of every file that fails, exactly as "
            f"it appears in the manifest, to {report}, one per line, sorted alphabetically. "
            "Don't repair, delete or re-download anything, and don't touch the manifest."
        )
        solution = dedent(f"""
            cd {base}
            sha256sum -c SHA256SUMS 2>/dev/null | grep -v ': OK$' \\
              | sed -E 's/: FAILED( open or read)?$//' | sort > {report}
        """)
        consts = {
            "BASE": base,
            "REPORT": report,
            "EXPECTED": expected,
            "MANIFEST_SHA": sha256(manifest),
            "FILES": {rel: sha256(d) for rel, d in final.items()},
        }
        initial_test = render_test(
            ["hashlib", "os"],
            consts,
            """
            def test_manifest_present():
                with open(os.path.join(BASE, "SHA256SUMS"), "rb") as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == MANIFEST_SHA


            def test_files_present():
                for rel, digest in FILES.items():
                    with open(os.path.join(BASE, rel), "rb") as fh:
                        assert hashlib.sha256(fh.read()).hexdigest() == digest, rel


            def test_report_absent():
                assert not os.path.exists(REPORT)
        """,
        )
        completion_test = render_test(
            ["hashlib", "os"],
            consts,
            """
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
        """,
        )
        return FamilyTask(
            instruction=instruction,
            truth={"base": base, "report": report, "failed": expected, "damage": damage},
            setup_script=setup,
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="hard" if with_missing else "medium" if len(bad) > 1 else "easy",
            scenario="release engineer verifying a mirrored download",
        )
