"""The README is a short guide and docs/ holds the rest: every link between them resolves."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from project import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def split_lines(text: str) -> tuple[list[tuple[int, str]], list[str]]:
    """(line number, line) for every line outside fenced code blocks, and the lines inside."""
    prose, code, fence = [], [], ""
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
            else:
                code.append(line)
            continue
        if match:
            fence = match.group(1)
            continue
        prose.append((number, line))
    return prose, code


def prose_lines(text: str) -> list[tuple[int, str]]:
    return split_lines(text)[0]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text, lower case, without punctuation (letters,
    digits, `_` and `-` stay), spaces made `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "")
    text = re.sub(r"\*+|~~", "", text)  # emphasis markers
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_anchor(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every inline link outside code; link text may span lines."""
    text = page.read_text(encoding="utf-8")
    prose = dict(prose_lines(text))
    lines = [
        _CODE_SPAN.sub(lambda m: " " * len(m.group()), prose.get(number, ""))
        for number in range(1, len(text.splitlines()) + 1)
    ]
    joined = "\n".join(lines)
    return [(joined.count("\n", 0, m.start()) + 1, m.group(1)) for m in _LINK.finditer(joined)]


def relative_links(page: Path) -> list[tuple[int, str]]:
    return [(n, t) for n, t in links(page) if not _SCHEME.match(t) and not t.startswith("//")]


def resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return ((page.parent / unquote(path)).resolve() if path else page), unquote(anchor)


def section(text: str, title: str) -> list[str]:
    """The prose and code lines of the `## title...` section of a page."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("## ") and title in ln)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), None)
    return lines[start + 1 : end]


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_there_are_docs_pages_to_link_to():
    names = {page.name for page in DOCS}
    for name in (
        "pipeline.md",
        "sandbox.md",
        "llm-generator.md",
        "solver.md",
        "data.md",
        "exports-imports.md",
        "scaling.md",
        "benchmarks.md",
    ):
        assert name in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_in_the_docs_resolves(page):
    broken = []
    for number, target in relative_links(page):
        path, anchor = resolve(page, target)
        if not path.exists():
            broken.append(f"line {number}: {target} (no such file)")
        elif anchor and (path.suffix != ".md" or anchor not in anchors(path)):
            broken.append(f"line {number}: {target} (no heading #{anchor} in {path.name})")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {resolve(README, target)[0] for _, target in relative_links(README)}
    assert not [page.name for page in DOCS if page.resolve() not in linked]


def test_the_quick_start_comes_first_and_names_both_commands():
    text = README.read_text(encoding="utf-8")
    headings = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert headings[0].startswith("## Quick start")
    quick_start = section(text, "Quick start")
    opening = quick_start.index(next(ln for ln in quick_start if _FENCE.match(ln)))
    closing = next(i for i in range(opening + 1, len(quick_start)) if _FENCE.match(quick_start[i]))
    commands = [
        ln.split("#", 1)[0].split()[0] for ln in quick_start[opening + 1 : closing] if ln.strip()
    ]
    assert commands[:2] == ["./scripts/run-batch.sh", "./scripts/test.sh"]
    for script in ("scripts/run-batch.sh", "scripts/test.sh"):
        assert (ROOT / script).is_file()


def test_the_readme_starts_the_ui_with_dg_dev_on_the_instance_endless_run_uses():
    code = split_lines(README.read_text(encoding="utf-8"))[1]
    assert [ln for ln in code if "DAGSTER_HOME=$PWD/dagster_home" in ln and "bin/dg dev" in ln]
    assert not [ln for ln in code if "dagster dev" in ln]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Threat model: the reward cannot be forged", "threat-model-the-reward-cannot-be-forged"),
        ("The `dataset_exports` asset", "the-dataset_exports-asset"),
        ("Where a procedural task's time goes", "where-a-procedural-tasks-time-goes"),
        ("`endless stats` and the report", "endless-stats-and-the-report"),
        ("Elsewhere: the base image", "elsewhere-the-base-image"),
        ("**Bold** and [a link](x.md) — dash", "bold-and-a-link--dash"),
    ],
)
def test_anchors_follow_githubs_rules(heading, anchor):
    assert github_anchor(heading) == anchor
