"""Exports never delete what is not theirs: `--overwrite` replaces only an empty directory or an
earlier export (marked `.endless-export`), never the data directory (nor above or inside it),
the working or home directory or `/`; a destination that cannot be written is one line, exit 2.

The CLI runs in a subprocess on a real lake (a real Parquet partition of filtered_dataset with
no kept task, so the exports are real and small); nothing here needs Docker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from endless_assets.interop import FORMATS, MARKER, OutputError, export_dataset
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import empty_frame

ENDLESS = [sys.executable, "-m", "endless_assets.cli"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def place(tmp_path) -> dict[str, Path]:
    """A data directory with a lake, a project directory to run in, a home directory."""
    data = tmp_path / "data"
    Lake(data).write("filtered_dataset", "2026-01-02", empty_frame("filtered_dataset"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    return {"data": data, "project": project, "home": home, "root": tmp_path}


def export(place: dict[str, Path], *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    env.update(
        ENDLESS_DATA_DIR=str(place["data"]),
        DAGSTER_HOME=str(place["root"] / "dagster_home"),
        HOME=str(place["home"]),
        COLUMNS="60",  # a narrow terminal must not fold the error line
    )
    return subprocess.run(
        [*ENDLESS, "export", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=place["project"],
        check=False,
    )


def assert_one_line(proc: subprocess.CompletedProcess, *needles: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def mark(directory: Path, fmt: str = "rl") -> None:
    (directory / MARKER).write_text(json.dumps({"format": fmt, "time": "2026-01-02T00:00:00"}))


def test_overwrite_refuses_the_data_directory_and_keeps_the_lake(place):
    data = place["data"]
    mark(data)  # a marker does not make the data directory an export
    before = snapshot(place["root"])
    for fmt, out, reason in [
        ("rl", data, "it is the data directory"),
        ("harbor", data / "lake", "inside the data directory"),
    ]:
        proc = export(place, "--format", fmt, "--out", str(out), "--overwrite")
        assert_one_line(proc, str(out), reason)
    assert snapshot(place["root"]) == before


def test_overwrite_refuses_the_working_directory_and_root_even_when_marked(place):
    mark(place["project"], "harbor")
    before = snapshot(place["root"])
    for out, reason in [(".", "it is the working directory"), ("/", "it is /")]:
        proc = export(place, "--format", "harbor", "--out", out, "--overwrite")
        assert_one_line(proc, reason)
    assert snapshot(place["root"]) == before


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("data", "it is the data directory"),
        ("data/lake", "inside the data directory"),
        ("data/lake/filtered_dataset", "inside the data directory"),
        ("data/exports", "inside the data directory"),
        (".", "it holds the"),  # above the data, working and home directories
        ("project", "it is the working directory"),
        ("home", "it is the home directory"),
        ("/", "it is /"),
    ],
)
def test_no_protected_directory_is_a_destination_even_when_marked_or_empty(
    place, monkeypatch, where, reason
):
    monkeypatch.chdir(place["project"])
    monkeypatch.setenv("HOME", str(place["home"]))
    out = place["root"] / where
    out.mkdir(parents=True, exist_ok=True)
    if where != "/":
        mark(out)
    before = snapshot(place["root"])
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=reason):
            export_dataset(Lake(place["data"]), "rl", out, overwrite=overwrite)
    assert snapshot(place["root"]) == before


def test_an_out_under_a_file_or_in_proc_gets_one_line_and_exit_2(place):
    (place["project"] / "notes.txt").write_text("mine")
    before = snapshot(place["root"])
    proc = export(place, "--format", "rl", "--out", "notes.txt/x")
    assert_one_line(proc, str(place["project"] / "notes.txt"), "is not a directory")
    proc = export(place, "--format", "sft", "--out", "/proc/endless-export-test", "--overwrite")
    assert_one_line(proc, "/proc/endless-export-test", "cannot export")
    assert snapshot(place["root"]) == before
    assert not [p for p in place["project"].iterdir() if p.name.startswith(".")]


def test_overwrite_replaces_an_earlier_export_and_nothing_else(place):
    out = place["root"] / "exports-here"
    proc = export(place, "--format", "rl", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    marker = json.loads((out / MARKER).read_text())
    assert marker["format"] == "rl" and marker["time"]
    assert (out / "train.parquet").is_file()
    proc = export(place, "--format", "harbor", "--out", str(out))
    assert proc.returncode == 2 and "use --overwrite" in proc.stderr  # not without asking
    proc = export(place, "--format", "harbor", "--out", str(out), "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / MARKER).read_text())["format"] == "harbor"
    assert not (out / "train.parquet").exists()

    theirs = place["root"] / "someone-elses"
    theirs.mkdir()
    (theirs / "thesis.tex").write_text("years of work")
    proc = export(place, "--format", "rl", "--out", str(theirs), "--overwrite")
    assert_one_line(proc, str(theirs), f"holds no {MARKER} marker")
    assert (theirs / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in theirs.iterdir()) == ["thesis.tex"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_marks_its_directory_and_refuses_the_data_directory(place, fmt):
    lake = Lake(place["data"])
    out = place["root"] / f"out-{fmt}"
    export_dataset(lake, fmt, out)
    assert json.loads((out / MARKER).read_text())["format"] == fmt
    export_dataset(lake, fmt, out, overwrite=True)  # an earlier export: replaced
    empty = place["root"] / f"empty-{fmt}"
    empty.mkdir()
    export_dataset(lake, fmt, empty)  # an empty directory needs no --overwrite
    before = snapshot(place["data"])
    for target in (place["data"], place["data"] / "lake", place["data"] / "exports"):
        with pytest.raises(OutputError, match="data directory"):
            export_dataset(lake, fmt, target, overwrite=True)
    assert snapshot(place["data"]) == before


def test_the_exports_asset_writes_under_data_dir_exports_and_nowhere_else_inside_it(place):
    from endless_assets.defs.exports import dataset_exports
    from endless_assets.defs.resources import PipelineSettings

    data = place["data"]

    def materialize(config: dict) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [dataset_exports],
            instance=dg.DagsterInstance.ephemeral(),
            resources={"pipeline": PipelineSettings(data_dir=str(data))},
            run_config={"ops": {"dataset_exports": {"config": {"report": False, **config}}}},
            raise_on_error=False,
        )

    assert materialize({"formats": ["rl", "harbor"]}).success
    assert json.loads((data / "exports/rl" / MARKER).read_text())["format"] == "rl"
    assert materialize({"formats": ["rl"]}).success  # replaces its own export
    before = snapshot(data)
    result = materialize({"formats": ["rl"], "out_dir": str(data)})
    assert not result.success
    assert snapshot(data) == before and not (data / "rl").exists()
