"""The SQLite family from level 4 on: customers and orders in two tables, a double import to
undo, pending orders to expire before a cutoff (at level 6 on the shop's clock, two hours ahead
of the UTC timestamps), reports that join the tables and a summary of what changed."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from endless_assets.generation.procedural.base import by_level, dedent
from endless_assets.generation.procedural.names import PEOPLE
from endless_assets.generation.procedural.render import render_test, sha256

REGIONS = ["north", "south", "east", "west", "central"]
STATUSES = ["paid", "paid", "paid", "pending", "refunded", "cancelled"]
STAMP = "%Y-%m-%d %H:%M:%S"
Order = tuple[int, int, int, str, str, str]  # id, customer_id, amount_cents, status, at, ref

SETUP = """
import os
import shutil
import sqlite3

DB = {db!r}
CUSTOMERS = {customers!r}
ROWS = {rows!r}

os.makedirs(os.path.dirname(DB), exist_ok=True)
con = sqlite3.connect(DB)
con.execute(
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL)"
)
con.execute(
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES "
    "customers(id), amount_cents INTEGER NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL, "
    "external_ref TEXT NOT NULL)"
)
con.executemany("INSERT INTO customers VALUES (?, ?, ?)", CUSTOMERS)
con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", ROWS)
con.commit()
con.close()
shutil.chown(os.path.dirname(DB), "user", "user")
shutil.chown(DB, "user", "user")
"""


@dataclass
class Shop:
    db: str
    project: str
    customers: list[tuple[int, str, str]]
    rows: list[Order]
    day: str  # the cutoff day, on the shop's clock
    offset: int  # hours the shop's clock is ahead of UTC
    dedupe: bool
    reports: dict[str, list[list[str]]] = field(default_factory=dict)
    summary: str = ""  # where to write what changed, as JSON

    @property
    def cutoff(self) -> str:
        """The cutoff as a UTC timestamp, the way `created_at` is written."""
        local = datetime.strptime(self.day, "%Y-%m-%d")
        return (local - timedelta(hours=self.offset)).strftime(STAMP)

    def changes(self) -> tuple[list[int], list[int], list[Order]]:
        """The ids deleted, the ids expired, and the orders table at the end."""
        seen: set[str] = set()
        deleted = []
        for row in self.rows:
            if self.dedupe and row[5] in seen:
                deleted.append(row[0])
            seen.add(row[5])
        kept = [r for r in self.rows if r[0] not in deleted]
        expired = [r[0] for r in kept if r[3] == "pending" and r[4] < self.cutoff]
        final = [(*r[:3], "expired", *r[4:]) if r[0] in expired else r for r in kept]
        return deleted, expired, final


def sample_shop(rng: random.Random, project: str, level: int) -> Shop:
    names = rng.sample(PEOPLE, rng.randint(8, 12))
    customers = [(i + 1, name, rng.choice(REGIONS)) for i, name in enumerate(names)]
    day = f"2026-{rng.randint(2, 5):02d}-15"
    shop = Shop(f"/home/user/data/{project}.db", project, customers, [], day, 0, level >= 5)
    shop.offset = 2 if level == 6 else 0
    rows = []
    for i in range(1, by_level(level, 0, 0, 0, 50, 60, 70) + 1):
        at = datetime(2026, 1, 1) + timedelta(seconds=rng.randrange(180 * 86400))
        status = rng.choice(STATUSES)
        rows.append((i, rng.choice(customers)[0], rng.randint(500, 250_000), status, at, ""))
    cutoff = datetime.strptime(shop.cutoff, STAMP)
    # pending orders on both sides of the cutoff, close to it
    for k, delta in enumerate((-90 * 24 * 60, -30, 30, 40 * 24 * 60)):
        at = cutoff + timedelta(minutes=delta)
        rows.append((len(rows) + 1, customers[k][0], rng.randint(500, 250_000), "pending", at, ""))
    ref = project[:3].upper()
    shop.rows = [(*r[:4], r[4].strftime(STAMP), f"{ref}-{10_000 + r[0]}") for r in rows]
    if shop.dedupe:  # a double import: the same orders again under new ids
        twins = [*rng.sample(shop.rows[:-4], 3), shop.rows[-3]]
        shop.rows += [(len(shop.rows) + k + 1, *r[1:]) for k, r in enumerate(twins)]
    _, _, final = shop.changes()
    base = f"/home/user/reports/{project}"
    shop.reports[f"{base}_region_totals.csv"] = _region_totals(shop, final)
    if level >= 5:
        months = Counter(r[4][:7] for r in final)
        rows_out = [[m, str(n)] for m, n in sorted(months.items())]
        shop.reports[f"{base}_monthly_orders.csv"] = [["month", "orders"], *rows_out]
    if level == 6:
        shop.summary = f"{base}_cleanup.json"
    return shop


def _region_totals(shop: Shop, final: list[Order]) -> list[list[str]]:
    region = {c[0]: c[2] for c in shop.customers}
    totals: dict[str, int] = defaultdict(int)
    for r in final:
        if r[3] == "paid":
            totals[region[r[1]]] += r[2]
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    return [["region", "total_cents"], *([k, str(v)] for k, v in ranked)]


def shop_instruction(shop: Shop) -> str:
    steps = []
    if shop.dedupe:
        steps.append(
            "remove the duplicate orders a double import left behind: rows with the same "
            "`external_ref` are one order, keep the row with the lowest `id`"
        )
    when = f"before {shop.day}"
    if shop.offset:
        when += (
            f" on the shop's clock, which runs at UTC+{shop.offset:02d}:00 (so before midnight "
            f"starting {shop.day} there; the timestamps are UTC)"
        )
    steps.append(
        f"set the status of every order that is still `pending` and was created {when} to `expired`"
    )
    reports = list(shop.reports)
    steps.append(
        f"write {reports[0]} as a CSV with the total `amount_cents` of paid orders (status "
        "`paid`) per region (the region of the order's customer), with the header "
        "`region,total_cents`, highest total first (ties by region name)"
    )
    if len(reports) > 1:
        steps.append(
            f"write {reports[1]} as a CSV with the number of orders created in each month "
            "(by the UTC timestamp), with the header `month,orders` where month is written "
            "`YYYY-MM`, in chronological order"
        )
    if shop.summary:
        steps.append(
            f'write {shop.summary}: a JSON object `{{"deleted": <rows removed>, "expired": '
            "<rows set to expired>}`"
        )
    said = f"first {steps[0]}. " + "".join(f"Then {s}. " for s in steps[1:-1])
    said += f"Finally {steps[-1]}."
    return (
        f"The {shop.project} shop keeps its data in the SQLite database {shop.db}: table "
        "`customers` (`id`, `name`, `region`) and table `orders` (`customer_id` is the "
        "customer's `id`, `amount_cents` an integer, `created_at` a UTC timestamp "
        "`YYYY-MM-DD HH:MM:SS`, `external_ref` the order's number in the web shop). Please "
        f"{said} Leave every other row, and the customers, as they are. The sqlite3 "
        "command-line tool is installed."
    )


def shop_solution(shop: Shop) -> str:
    cutoff, lines = shop.cutoff, []
    first = "id IN (SELECT MIN(id) FROM orders GROUP BY external_ref)"
    if shop.summary:
        lines += [
            ".output " + shop.summary,
            "SELECT json_object('deleted', (SELECT COUNT(*) - COUNT(DISTINCT external_ref) "
            "FROM orders), 'expired', (SELECT COUNT(*) FROM orders WHERE status = 'pending' "
            f"AND created_at < '{cutoff}' AND {first}));",
        ]
    if shop.dedupe:
        lines.append(f"DELETE FROM orders WHERE NOT {first};")
    expire = "UPDATE orders SET status = 'expired' WHERE status = 'pending' AND created_at"
    lines.append(f"{expire} < '{cutoff}';")
    queries = [
        "SELECT c.region, SUM(o.amount_cents) AS total_cents FROM orders o JOIN customers c "
        "ON c.id = o.customer_id WHERE o.status = 'paid' GROUP BY c.region "
        "ORDER BY total_cents DESC, c.region;",
        "SELECT substr(created_at, 1, 7) AS month, COUNT(*) AS orders FROM orders "
        "GROUP BY month ORDER BY month;",
    ]
    lines += [".headers on", ".mode csv"]
    for path, query in zip(shop.reports, queries, strict=False):
        lines += [f".output {path}", query]
    sql = "\n".join(lines)
    return f"mkdir -p /home/user/reports\nsqlite3 {shop.db} <<'SQL'\n{sql}\nSQL\n"


def shop_tests(shop: Shop) -> tuple[str, str]:
    deleted, expired, final = shop.changes()
    consts = {
        "DB": shop.db,
        "REPORTS": shop.reports,
        "SUMMARY": shop.summary,
        "COUNTS": {"deleted": len(deleted), "expired": len(expired)},
        "CUSTOMERS_SHA": sha256(repr(shop.customers)),
        "INITIAL_SHA": sha256(repr(shop.rows)),
        "FINAL_IDS": [r[0] for r in final],
        "EXPIRED_IDS": expired,
        "FINAL_SHA": sha256(repr(final)),
    }
    initial = render_test(["hashlib", "os", "sqlite3"], consts, READER, INITIAL)
    return initial, render_test(["csv", "hashlib", "json", "sqlite3"], consts, READER, COMPLETION)


def shop_setup(shop: Shop) -> str:
    return dedent(SETUP).format(db=shop.db, customers=shop.customers, rows=shop.rows)


READER = """
    def _rows(table):
        con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
        try:
            return con.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
        finally:
            con.close()


    def _sha(rows):
        return hashlib.sha256(repr(rows).encode()).hexdigest()
"""
INITIAL = """
    def test_database_contents():
        assert _sha(_rows("orders")) == INITIAL_SHA
        assert _sha(_rows("customers")) == CUSTOMERS_SHA


    def test_database_owned_by_user():
        assert os.stat(DB).st_uid == 1000


    def test_outputs_absent():
        for path in [*REPORTS, SUMMARY]:
            assert not path or not os.path.exists(path), path
"""
COMPLETION = """
    def test_orders():
        rows = _rows("orders")
        assert [r[0] for r in rows] == FINAL_IDS
        assert [r[0] for r in rows if r[3] == "expired"] == EXPIRED_IDS
        assert _sha(rows) == FINAL_SHA


    def test_customers_untouched():
        assert _sha(_rows("customers")) == CUSTOMERS_SHA


    def test_reports():
        for path, expected in REPORTS.items():
            with open(path, newline="") as fh:
                got = [row for row in csv.reader(fh) if row]
            assert got == expected, path


    def test_summary():
        if SUMMARY:
            with open(SUMMARY) as fh:
                assert json.load(fh) == COUNTS
"""
