"""SQLite: answer a reporting question from an orders database and/or apply a targeted UPDATE."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

from endless_assets.generation.procedural.base import PEOPLE, PROJECTS, Family, FamilyTask
from endless_assets.generation.procedural.render import render_test, sha256

REGIONS = ["north", "south", "east", "west", "central"]
STATUSES = ["paid", "paid", "paid", "pending", "refunded", "cancelled"]

SETUP = """
import os
import shutil
import sqlite3

DB = {db!r}
ROWS = {rows!r}

os.makedirs(os.path.dirname(DB), exist_ok=True)
con = sqlite3.connect(DB)
con.execute(
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, region TEXT NOT NULL, "
    "amount_cents INTEGER NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL)"
)
con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", ROWS)
con.commit()
con.close()
shutil.chown(os.path.dirname(DB), "user", "user")
shutil.chown(DB, "user", "user")
"""

Row = tuple[int, str, str, int, str, str]


def _report(rng: random.Random, rows: list[Row]) -> tuple[str, str, list[list[str]], str]:
    """A question in words, its SQL, the expected CSV rows (header first), and a file stem."""
    kind = rng.choice(["region_totals", "top_customers", "monthly_counts"])
    paid = [r for r in rows if r[4] == "paid"]
    if kind == "region_totals":
        totals: dict[str, int] = defaultdict(int)
        for r in paid:
            totals[r[2]] += r[3]
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
        ask = (
            "the total `amount_cents` of paid orders (status `paid`) per region, with the header "
            "`region,total_cents`, highest total first (ties by region name)"
        )
        sql = (
            "SELECT region, SUM(amount_cents) AS total_cents FROM orders WHERE status = 'paid' "
            "GROUP BY region ORDER BY total_cents DESC, region"
        )
        return ask, sql, [["region", "total_cents"], *([k, str(v)] for k, v in ranked)], kind
    if kind == "top_customers":
        n = rng.randint(3, 5)
        totals = defaultdict(int)
        for r in paid:
            totals[r[1]] += r[3]
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        ask = (
            f"the {n} customers who spent the most on paid orders (status `paid`), with the "
            "header `customer,total_cents` (the sum of their `amount_cents`), biggest spender "
            "first (ties by customer name)"
        )
        sql = (
            "SELECT customer, SUM(amount_cents) AS total_cents FROM orders WHERE status = 'paid' "
            f"GROUP BY customer ORDER BY total_cents DESC, customer LIMIT {n}"
        )
        return ask, sql, [["customer", "total_cents"], *([k, str(v)] for k, v in ranked)], kind
    counts = Counter(r[5][:7] for r in rows)
    ask = (
        "the number of orders (any status) created in each month, with the header "
        "`month,orders` where month is written `YYYY-MM`, in chronological order"
    )
    sql = (
        "SELECT substr(created_at, 1, 7) AS month, COUNT(*) AS orders FROM orders "
        "GROUP BY month ORDER BY month"
    )
    return ask, sql, [["month", "orders"], *([k, str(v)] for k, v in sorted(counts.items()))], kind


class SqliteReport(Family):
    name = "sqlite_report"
    category = "SQLite database operations via CLI"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        customers = rng.sample(PEOPLE, rng.randint(6, 12))
        rows: list[Row] = []
        for i in range(1, rng.randint(30, 80)):
            date = f"2026-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}"
            rows.append(
                (
                    i,
                    rng.choice(customers),
                    rng.choice(REGIONS),
                    rng.randint(500, 250_000),
                    rng.choice(STATUSES),
                    date,
                )
            )
        mode = rng.choice(["report", "update", "both"])
        db = f"/home/user/data/{project}.db"
        parts: list[str] = []
        sql_steps: list[str] = []
        final_rows = list(rows)
        if mode in ("update", "both"):
            cutoff = f"2026-{rng.randint(2, 5):02d}-{rng.choice(['01', '15'])}"
            rows[0] = (*rows[0][:4], "pending", "2026-01-10")  # at least one row to expire
            rows[-1] = (*rows[-1][:4], "pending", "2026-06-20")  # and one that must stay pending
            final_rows = [
                (*r[:4], "expired", r[5]) if r[4] == "pending" and r[5] < cutoff else r
                for r in rows
            ]
            parts.append(
                f"set the status of every order that is still `pending` and was created before "
                f"{cutoff} (`created_at` < '{cutoff}') to `expired`, leaving all other rows alone"
            )
            sql_steps.append(
                f"UPDATE orders SET status = 'expired' WHERE status = 'pending' "
                f"AND created_at < '{cutoff}';"
            )
        report_path = ""
        expected_csv: list[list[str]] = []
        if mode in ("report", "both"):
            ask, sql, expected_csv, stem = _report(rng, final_rows)
            report_path = f"/home/user/reports/{project}_{stem}.csv"
            parts.append(f"write {report_path} as a CSV with {ask}")
            sql_steps.append(f".headers on\n.mode csv\n.output {report_path}\n{sql};")
        instruction = (
            f"The {project} shop keeps its orders in the SQLite database {db} (table `orders`; "
            "`amount_cents` is an integer, `created_at` is a `YYYY-MM-DD` date). Please "
            + (f"{parts[0]}." if len(parts) == 1 else f"first {parts[0]}. Then {parts[1]}.")
            + " The sqlite3 command-line tool is installed."
        )
        solution = "mkdir -p /home/user/reports\n" + (
            f"sqlite3 {db} <<'SQL'\n" + "\n".join(sql_steps) + "\nSQL\n"
        )
        consts = {
            "DB": db,
            "REPORT": report_path,
            "EXPECTED_CSV": expected_csv,
            "INITIAL_ROWS_SHA": sha256(repr(rows)),
            "FINAL_ROWS_SHA": sha256(repr(final_rows)),
            "CHANGED_IDS": sorted(r[0] for r, f in zip(rows, final_rows, strict=True) if r != f),
        }
        reader = """
            def _rows():
                con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
                try:
                    return con.execute("SELECT * FROM orders ORDER BY id").fetchall()
                finally:
                    con.close()
        """
        initial_test = render_test(
            ["hashlib", "os", "sqlite3"],
            consts,
            reader,
            """
            def test_database_contents():
                assert hashlib.sha256(repr(_rows()).encode()).hexdigest() == INITIAL_ROWS_SHA


            def test_database_owned_by_user():
                assert os.stat(DB).st_uid == 1000


            def test_report_absent():
                assert not REPORT or not os.path.exists(REPORT)
        """,
        )
        table_state = """
            def test_table_state():
                rows = _rows()
                changed = [r[0] for r in rows if r[4] == "expired"]
                assert changed == CHANGED_IDS
                assert hashlib.sha256(repr(rows).encode()).hexdigest() == FINAL_ROWS_SHA
        """
        report = """
            def test_report():
                with open(REPORT, newline="") as fh:
                    got = [row for row in csv.reader(fh) if row]
                assert got == EXPECTED_CSV
        """
        completion_test = render_test(
            ["csv", "hashlib", "sqlite3"],
            consts,
            reader,
            table_state,
            *([report] if report_path else []),
        )
        return FamilyTask(
            instruction=instruction,
            truth={
                "db": db,
                "report": report_path,
                "expected_csv": expected_csv,
                "changed_ids": consts["CHANGED_IDS"],
            },
            setup_script=SETUP.format(db=db, rows=rows).lstrip(),
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity={"report": "easy", "update": "medium", "both": "hard"}[mode],
            scenario="data analyst working with a SQLite database",
        )
