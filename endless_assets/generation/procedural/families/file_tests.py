"""The file-sorting family's tests (unleveled and leveled) and its leveled reference script."""

from __future__ import annotations

from typing import Any

from endless_assets.generation.procedural.base import dedent
from endless_assets.generation.procedural.render import matched

LEGACY_INITIAL = """
    def test_files_present_and_flat():
        for name in BEFORE:
            assert os.path.isfile(os.path.join(BASE, name)), name
        assert sorted(os.listdir(BASE)) == BEFORE
"""
LEGACY_LAYOUT = """
    def _layout():
        found = {}
        for root, _dirs, files in os.walk(BASE):
            for name in files:
                path = os.path.join(root, name)
                with open(path, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                found[os.path.relpath(path, BASE)] = digest
        return found
"""
LEGACY_COMPLETION = (
    LEGACY_LAYOUT,
    matched("_layout", "test_final_layout", "test_contents_preserved"),
)
INITIAL = """
    def test_files_present():
        for name in BEFORE:
            assert os.path.isfile(os.path.join(BASE, name)), name


    def test_nothing_sorted_yet():
        for path in EXPECTED:
            if path not in BEFORE and not EXPECTED[path].startswith("link:"):
                assert not os.path.lexists(os.path.join(BASE, path)), path
"""
LAYOUT = """
    def _layout():
        found = {}
        for root, dirs, files in os.walk(BASE):
            for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                path = os.path.join(root, name)
                if os.path.islink(path):
                    digest = "link:" + os.readlink(path)
                else:
                    with open(path, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).hexdigest()
                found[os.path.relpath(path, BASE)] = digest
        return found
"""
MODES_AND_MOVES = """
    def test_modes_kept():
        for path, mode in MODES.items():
            assert f"{os.stat(os.path.join(BASE, path)).st_mode & 0o7777:o}" == mode, path


    def test_moves_listed():
        if MANIFEST:
            with open(MANIFEST) as fh:
                lines = [line.rstrip("\\r") for line in fh.read().splitlines() if line.strip()]
            assert sorted(lines) == MOVES.splitlines()
"""
COMPLETION = (
    LAYOUT,
    matched("_layout", "test_final_layout", "test_contents_and_links_preserved"),
    MODES_AND_MOVES,
)
REFERENCE = """
    import datetime, os, re

    BASE, RULE, MANIFEST = {base!r}, {rule!r}, {manifest!r}


    def dest(name):
        if "kind" not in RULE:
            ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
            return next((group for group, exts in RULE.items() if ext in exts), "")
        pattern = RULE["kind"] + r"_(\\d{{4}})-(\\d{{2}})-(\\d{{2}})_[^/]+\\." + RULE["ext"]
        m = re.fullmatch(pattern, name)
        try:
            datetime.date(int(m[1]), int(m[2]), int(m[3]))
        except (TypeError, ValueError):
            return ""
        return f"{{m[1]}}/{{m[2]}}" if RULE["nested"] else m[1]


    moves = []
    for name in sorted(os.listdir(BASE)):
        path = os.path.join(BASE, name)
        if name.startswith(".") or os.path.islink(path) or not os.path.isfile(path):
            continue
        if where := dest(name):
            os.makedirs(os.path.join(BASE, where), exist_ok=True)
            os.rename(path, os.path.join(BASE, where, name))
            moves.append(f"{{name}}\\t{{where}}/{{name}}\\n")
    if MANIFEST:
        os.makedirs(os.path.dirname(MANIFEST), exist_ok=True)
        with open(MANIFEST, "w") as fh:
            fh.writelines(moves)
"""


def reference(base: str, rule: dict[str, Any], manifest: str) -> str:
    """The leveled reference (Python): `rule` maps each group to its extensions, or names the
    date pattern (kind, ext, nested)."""
    return dedent(REFERENCE).format(base=base, rule=rule, manifest=manifest)
