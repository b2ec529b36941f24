"""`endless settings` as a table, CSV or JSON: piped, nothing is cut."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from project import ROOT

from endless_assets.settings import FIELDS


def settings(tmp_path: Path, *args: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ENDLESS_")}
    environ.update(ENDLESS_DATA_DIR=str(tmp_path / "data"), COLUMNS="60", **env)
    proc = subprocess.run(
        [sys.executable, "-m", "endless_assets.cli", "settings", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_settings_piped_print_every_variable_whole(tmp_path):
    table = settings(tmp_path)  # stdout is a pipe, and COLUMNS says 60
    assert "…" not in table
    for field in FIELDS:
        assert f" {field.env} " in table


def test_settings_come_as_csv_or_json_with_their_current_values(tmp_path):
    rows = list(csv.DictReader(io.StringIO(settings(tmp_path, "--format", "csv"))))
    assert [r["env"] for r in rows] == [f.env for f in FIELDS]
    as_json = json.loads(settings(tmp_path, "-f", "json", ENDLESS_TASKS="7"))
    assert {r["setting"]: r["current"] for r in as_json}["tasks"] == "7"
