"""SQLite: answer a reporting question from an orders database and/or apply a targeted UPDATE.

Up the levels: a report, an update, both; then (sqlite_shop.py) customers in their own table
to join, a double import to undo first, a second report, and a cutoff on the shop's clock two
hours ahead of the UTC timestamps with a summary of what changed.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass

from endless_assets.generation.procedural.base import Family, FamilyTask
from endless_assets.generation.procedural.families import sqlite_shop
from endless_assets.generation.procedural.names import PEOPLE, PROJECTS
from endless_assets.generation.procedural.render import render_test, sha256

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
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        if r[4] == "paid":
            totals[r[2] if kind == "region_totals" else r[1]] += r[3]
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    if kind == "region_totals":
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
        ranked = ranked[:n]
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


@dataclass
class Plan:
    project: str
    rows: list[Row]
    mode: str  # report, update or both
    final_rows: list[Row]
    parts: list[str]  # what to do, in words
    sql_steps: list[str]
    report_path: str = ""
    expected_csv: list[list[str]] | None = None
    shop: sqlite_shop.Shop | None = None  # levels 4 to 6

    @property
    def db(self) -> str:
        return f"/home/user/data/{self.project}.db"

    @property
    def changed_ids(self) -> list[int]:
        return sorted(r[0] for r, f in zip(self.rows, self.final_rows, strict=True) if r != f)


class SqliteReport(Family[Plan]):
    name = "sqlite_report"
    category = "SQLite database operations via CLI"

    def sample(self, rng: random.Random) -> Plan:
        project, rows = self._orders(rng)
        return self._plan(rng, project, rows, rng.choice(["report", "update", "both"]))

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        if level >= 4:
            project = rng.choice(PROJECTS)
            return Plan(
                project, [], "", [], [], [], shop=sqlite_shop.sample_shop(rng, project, level)
            )
        project, rows = self._orders(rng)
        return self._plan(rng, project, rows, ["report", "update", "both"][level - 1])

    def _orders(self, rng: random.Random) -> tuple[str, list[Row]]:
        project = rng.choice(PROJECTS)
        customers = rng.sample(PEOPLE, rng.randint(6, 12))
        rows: list[Row] = []
        for i in range(1, rng.randint(30, 80)):
            date = f"2026-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}"
            who, region = rng.choice(customers), rng.choice(sqlite_shop.REGIONS)
            amount, status = rng.randint(500, 250_000), rng.choice(sqlite_shop.STATUSES)
            rows.append((i, who, region, amount, status, date))
        return project, rows

    def _plan(self, rng: random.Random, project: str, rows: list[Row], mode: str) -> Plan:
        plan = Plan(project, rows, mode, list(rows), [], [])
        if mode in ("update", "both"):
            cutoff = f"2026-{rng.randint(2, 5):02d}-{rng.choice(['01', '15'])}"
            rows[0] = (*rows[0][:4], "pending", "2026-01-10")  # at least one row to expire
            rows[-1] = (*rows[-1][:4], "pending", "2026-06-20")  # and one that must stay pending
            plan.final_rows = [
                (*r[:4], "expired", r[5]) if r[4] == "pending" and r[5] < cutoff else r
                for r in rows
            ]
            plan.parts.append(
                f"set the status of every order that is still `pending` and was created before "
                f"{cutoff} (`created_at` < '{cutoff}') to `expired`, leaving all other rows alone"
            )
            plan.sql_steps.append(
                f"UPDATE orders SET status = 'expired' WHERE status = 'pending' "
                f"AND created_at < '{cutoff}';"
            )
        plan.expected_csv = []
        if mode in ("report", "both"):
            ask, sql, plan.expected_csv, stem = _report(rng, plan.final_rows)
            plan.report_path = f"/home/user/reports/{project}_{stem}.csv"
            plan.parts.append(f"write {plan.report_path} as a CSV with {ask}")
            plan.sql_steps.append(f".headers on\n.mode csv\n.output {plan.report_path}\n{sql};")
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        if plan.shop:
            deleted, expired, _ = plan.shop.changes()
            truth = {"db": plan.shop.db, "reports": plan.shop.reports}
            truth.update(deleted_ids=deleted, expired_ids=expired, summary=plan.shop.summary)
        else:
            truth = {"db": plan.db, "report": plan.report_path, "expected_csv": plan.expected_csv}
            truth["changed_ids"] = plan.changed_ids
        return self.task(
            plan,
            truth=truth,
            setup_script=sqlite_shop.shop_setup(plan.shop)
            if plan.shop
            else SETUP.format(db=plan.db, rows=plan.rows).lstrip(),
            complexity={"report": "easy", "update": "medium", "both": "hard"}.get(plan.mode, ""),
            scenario="data analyst working with a SQLite database",
        )

    def instruction(self, plan: Plan) -> str:
        if plan.shop:
            return sqlite_shop.shop_instruction(plan.shop)
        parts = plan.parts
        return (
            f"The {plan.project} shop keeps its orders in the SQLite database {plan.db} (table "
            "`orders`; `amount_cents` is an integer, `created_at` is a `YYYY-MM-DD` date). Please "
            + (f"{parts[0]}." if len(parts) == 1 else f"first {parts[0]}. Then {parts[1]}.")
            + " The sqlite3 command-line tool is installed."
        )

    def solution(self, plan: Plan) -> str:
        if plan.shop:
            return sqlite_shop.shop_solution(plan.shop)
        steps = "\n".join(plan.sql_steps)
        return f"mkdir -p /home/user/reports\nsqlite3 {plan.db} <<'SQL'\n{steps}\nSQL\n"

    def tests(self, plan: Plan) -> tuple[str, str]:
        if plan.shop:
            return sqlite_shop.shop_tests(plan.shop)
        consts = {
            "DB": plan.db,
            "REPORT": plan.report_path,
            "EXPECTED_CSV": plan.expected_csv,
            "INITIAL_ROWS_SHA": sha256(repr(plan.rows)),
            "FINAL_ROWS_SHA": sha256(repr(plan.final_rows)),
            "CHANGED_IDS": plan.changed_ids,
        }
        checks = [READER, TABLE_STATE, *([REPORT] if plan.report_path else [])]
        return (
            render_test(["hashlib", "os", "sqlite3"], consts, READER, INITIAL),
            render_test(["csv", "hashlib", "sqlite3"], consts, *checks),
        )


READER = """
    def _rows():
        con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
        try:
            return con.execute("SELECT * FROM orders ORDER BY id").fetchall()
        finally:
            con.close()
"""
INITIAL = """
    def test_database_contents():
        assert hashlib.sha256(repr(_rows()).encode()).hexdigest() == INITIAL_ROWS_SHA


    def test_database_owned_by_user():
        assert os.stat(DB).st_uid == 1000


    def test_report_absent():
        assert not REPORT or not os.path.exists(REPORT)
"""
TABLE_STATE = """
    def test_table_state():
        rows = _rows()
        changed = [r[0] for r in rows if r[4] == "expired"]
        assert changed == CHANGED_IDS
        assert hashlib.sha256(repr(rows).encode()).hexdigest() == FINAL_ROWS_SHA
"""
REPORT = """
    def test_report():
        with open(REPORT, newline="") as fh:
            got = [row for row in csv.reader(fh) if row]
        assert got == EXPECTED_CSV
"""
