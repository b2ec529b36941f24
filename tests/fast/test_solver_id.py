"""A solver's name, stated once: the same in Python, polars and SQL, and read back whole."""

from __future__ import annotations

import duckdb
import polars as pl

from endless_assets.solver_id import SolverId


def test_a_solver_name_reads_back_as_the_same_solver_even_with_slashes_in_its_model():
    for solver in (SolverId("chat", "o3"), SolverId("chat", "vendor/org/model"), SolverId("noop")):
        assert SolverId.parse(str(solver)) == solver
    assert str(SolverId("oracle", "")) == "oracle" and str(SolverId("chat", "o3")) == "chat/o3"


def test_python_polars_and_sql_name_a_solver_alike():
    frame = pl.DataFrame(
        {"policy": ["chat", "oracle", "noop"], "model": ["o3", "reference-solution", None]}
    )
    expected = [str(SolverId(p, m or "")) for p, m in frame.iter_rows()]
    assert frame.select(SolverId.expr())["policy"].to_list() == expected
    assert expected == ["chat/o3", "oracle/reference-solution", "noop"]
    with duckdb.connect() as db:
        db.register("rollouts", frame.to_arrow())
        named = db.sql(f"select {SolverId.sql()} as solver from rollouts").pl()
    assert named["solver"].to_list() == expected
