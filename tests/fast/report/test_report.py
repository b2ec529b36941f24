"""`endless report`: one self-contained HTML file, with the charts and a sample of tasks, and
no way for task text to become markup."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import polars as pl
import pytest
from synthetic_lake import Spec, write_synthetic_lake
from typer.testing import CliRunner

from endless_assets.cli.app import app
from endless_assets.report import build_report
from endless_assets.report.tables import headline, stats_tables
from endless_assets.sampling.simulation import frontier, simulate
from endless_assets.sampling.worlds import shaped_world
from endless_assets.store.catalog import rebuild_catalog
from endless_assets.store.lake import Lake

HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("report-lake"))
    write_synthetic_lake(lake, Spec(batches=2, tasks_per_batch=30, k=4))
    # A kept task whose text tries to inject markup into the report.
    batch = lake.batches("filtered_dataset")[0]
    frame = lake.read("filtered_dataset", batch)
    first = frame.filter(pl.col("kept"))["task_id"][0]
    frame = frame.with_columns(
        instruction=pl.when(pl.col("task_id") == first)
        .then(pl.lit(f"Fix it {HOSTILE}"))
        .otherwise(pl.col("instruction")),
        category=pl.when(pl.col("task_id") == first)
        .then(pl.lit(f"cat {HOSTILE}"))
        .otherwise(pl.col("category")),
    )
    lake.write("filtered_dataset", batch, frame)
    rebuild_catalog(lake)
    return lake


class Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


@pytest.fixture(scope="module")
def html(lake) -> str:
    return build_report(lake, sample=500)


def test_the_report_is_self_contained(html):
    parsed = Collector()
    parsed.feed(html)
    for tag, attrs in parsed.tags:
        for name in ("src", "href"):
            assert name not in attrs, (tag, attrs)  # nothing loaded from anywhere
        assert tag != "link" and tag != "iframe"
    urls = set(re.findall(r"https?://[^\s'\"<>]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never fetched
    # One inline script (the sample filter), and it is ours.
    assert len(parsed.scripts) == 1 and "function filterTasks" in parsed.scripts[0]


def test_the_report_has_every_section_and_chart(lake, html):
    for title in (
        "Funnel",
        "Learnable share",
        "Category mix",
        "Difficulty",
        "Failure modes",
        "Turns per episode",
        "Token cost",
        "Models",
        "Sample of kept tasks",
    ):
        assert f"<h2>{title}</h2>" in html
    # Funnel, learnable share, category mix, a difficulty histogram per solver, failure modes,
    # turns.
    assert html.count("<svg") == 7
    assert "chat/model-a" in html and "chat/model-b" in html
    figures = headline(lake)
    assert f"<b>{figures['tasks_kept']:,}</b>tasks kept" in html
    kept = lake.read_all("filtered_dataset").filter(pl.col("kept"))
    assert html.count("<details class='task'") == len(kept)


def test_task_text_is_escaped(html):
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html
    parsed = Collector()
    parsed.feed(html)
    assert not [t for t, attrs in parsed.tags if t == "img"]
    assert all("onerror" not in attrs for _, attrs in parsed.tags)


def test_endless_report_writes_the_file(lake, tmp_path, monkeypatch):
    monkeypatch.setenv("ENDLESS_DATA_DIR", str(lake.data_dir))
    batch = lake.batches("filtered_dataset")[1]
    out = tmp_path / "sub" / "report.html"
    result = CliRunner().invoke(app, ["report", "--out", str(out), "--batch", batch])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and batch in text
    other = lake.batches("filtered_dataset")[0]
    assert f"batch {other}" not in text  # only the chosen batch's tasks are sampled
    bad = CliRunner().invoke(app, ["report", "--out", str(out), "--batch", "nope"])
    assert bad.exit_code == 2 and "no batch nope" in bad.output


def test_the_report_sets_what_each_draw_expected_next_to_what_was_measured(tmp_path):
    lake = Lake(tmp_path)
    write_synthetic_lake(lake, Spec(batches=2, tasks_per_batch=30, k=4))
    first, second = lake.batches("filtered_dataset")
    world = shaped_world("additive", 4, seed=0)
    run = simulate(world, frontier, batches=2, n=30, k=4)
    for batch, made in ((first, run.draws[0]), (second, run.draws[1])):
        draws = made.frame().with_columns(batch=pl.lit(batch), solver=pl.lit("chat/model-a"))
        lake.write("task_draws", batch, draws)
    rebuild_catalog(lake)
    html = build_report(lake, sample=0)
    expected = run.draws[1].expected()["learnable_share"]
    assert "expected before the batch" in html and "measured after it" in html
    assert f"expected before the batch: {expected:.3g}" in html  # the bar's title
    stats = {t.name: t.frame for t in stats_tables(lake)}["frontier_batches"]
    assert stats["batch"].to_list() == [first, second]
    assert stats["expected_learnable_share"].to_list() == [None, pytest.approx(expected, abs=1e-4)]
    assert stats["learnable_share"].null_count() == 0
