"""PostgreSQL in a service of its own: report from the shop's database over the network, and/or
migrate it (a view the application reads, expired orders).

Up the levels: a report from one table; a report over a join; a view (checked by behaviour: the
test adds an order inside a transaction it rolls back and the view must count it); a view over
the join; the view and a report; then an update of pending orders first. The agent connects as
`app` (no superuser; its password in ~/.pgpass); the tests as `checker`, which reads everything,
may add orders, and is no superuser either (what the agent's view runs, runs with its rights).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level
from endless_assets.generation.procedural.families.service_kit import (
    AGENT_PACKAGES,
    postgres,
    secret,
)
from endless_assets.generation.procedural.names import PEOPLE, PROJECTS
from endless_assets.generation.procedural.render import render_test, sha256

REGIONS = ["north", "south", "east", "west", "central"]
STATUSES = ["paid", "paid", "paid", "refunded", "pending"]
Row = tuple[int, int, int, str, str]  # id, customer_id, amount_cents, status, created_at


@dataclass
class Plan:
    project: str
    customers: list[tuple[int, str, str]]  # id, name, region
    rows: list[Row]
    report: bool
    view: bool
    cutoff: str = ""  # expire pending orders created before it ("": no update)
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def report_path(self) -> str:
        return f"/home/user/reports/{self.project}_regions.csv" if self.report else ""

    def final_rows(self) -> list[Row]:
        if not self.cutoff:
            return list(self.rows)
        return [
            (*r[:3], "expired", r[4]) if r[3] == "pending" and r[4] < self.cutoff else r
            for r in self.rows
        ]

    def totals(self) -> list[list[str]]:
        region = {c[0]: c[2] for c in self.customers}
        sums: dict[str, int] = defaultdict(int)
        for r in self.final_rows():
            if r[3] == "paid":
                sums[region[r[1]]] += r[2]
        ranked = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))
        return [["region", "total_cents"], *([k, str(v)] for k, v in ranked)]


TOTALS_SQL = (
    "SELECT c.region, SUM(o.amount_cents) AS total_cents FROM orders o "
    "JOIN customers c ON c.id = o.customer_id WHERE o.status = 'paid' GROUP BY c.region"
)


class PgReport(Family[Plan]):
    name = "pg_report"
    category = "database operations"

    def sample(self, rng: random.Random) -> Plan:
        return self.sample_level(rng, rng.choice([1, 2, 3, 4]))

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        people = rng.sample(PEOPLE, by_level(level, 5, 6, 6, 8, 10, 12))
        customers = [(i + 1, name, rng.choice(REGIONS)) for i, name in enumerate(people)]
        rows: list[Row] = []
        for i in range(1, by_level(level, 20, 30, 30, 40, 60, 80)):
            day = f"2026-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}"
            who, cents = rng.randint(1, len(customers)), rng.randint(500, 90_000)
            rows.append((i, who, cents, rng.choice(STATUSES), day))
        cutoff = ""
        if level == 6:
            cutoff = f"2026-{rng.randint(3, 5):02d}-01"
            rows[0] = (*rows[0][:3], "pending", "2026-01-05")
        passwords = {who: secret(rng) for who in ("postgres", "app", "checker")}
        report, view = by_level(level, (1, 0), (1, 0), (0, 1), (0, 1), (1, 1), (1, 1))
        return Plan(project, customers, rows, bool(report), bool(view), cutoff, passwords)

    def build(self, plan: Plan) -> FamilyTask:
        truth = {"database": "shop", "report": plan.report_path, "view": plan.view}
        truth |= {"expected_csv": plan.totals(), "cutoff": plan.cutoff}
        return self.task(
            plan,
            truth=truth,
            complexity="easy" if not plan.view else "medium" if not plan.report else "hard",
            scenario="backend developer whose application reads a PostgreSQL database",
            setup_script=PGPASS.format(password=plan.passwords["app"]),
            services=[postgres(init_sql(plan))],
            packages=AGENT_PACKAGES,
        )

    def instruction(self, plan: Plan) -> str:
        asks = []
        if plan.cutoff:
            asks.append(
                "set the status of every order still `pending` that was created before "
                f"{plan.cutoff} to `expired`"
            )
        if plan.view:
            asks.append(
                "create the view `public.region_totals` (columns `region`, `total_cents`) that "
                "the application reads: per customer region, the sum of `amount_cents` of paid "
                "orders (status `paid`); it must stay correct as orders come in"
            )
        if plan.report:
            asks.append(
                f"write {plan.report_path} as a CSV with the header `region,total_cents`: the "
                "same per-region totals of paid orders, highest total first (ties by region)"
            )
        steps = asks[0] if len(asks) == 1 else "; then ".join(asks)
        return (
            f"The {plan.project} shop's PostgreSQL database `shop` runs on the host `db` "
            "(port 5432). Tables: `customers(id, name, region)` and `orders(id, customer_id, "
            "amount_cents, status, created_at)`. Connect as the role `app` (its password is in "
            f"~/.pgpass; `psql -h db -U app shop` works). Please {steps}."
        )

    def solution(self, plan: Plan) -> str:
        sql = []
        if plan.cutoff:
            sql.append(
                "UPDATE orders SET status = 'expired' WHERE status = 'pending' "
                f"AND created_at < '{plan.cutoff}';"
            )
        if plan.view:
            sql.append(f"CREATE VIEW public.region_totals AS {TOTALS_SQL};")
        lines = []
        if sql:
            lines.append("psql -h db -U app shop -v ON_ERROR_STOP=1 <<'SQL'\n" + "\n".join(sql))
            lines.append("SQL")
        if plan.report:
            lines.append("mkdir -p /home/user/reports")
            copy = f"COPY ({TOTALS_SQL} ORDER BY total_cents DESC, region) TO STDOUT CSV HEADER"
            lines.append(f'psql -h db -U app shop -c "{copy}" > {plan.report_path}')
        return "\n".join(lines) + "\n"

    def tests(self, plan: Plan) -> tuple[str, str]:
        consts = {
            "PASSWORD": plan.passwords["checker"],
            "REPORT": plan.report_path,
            "EXPECTED_CSV": plan.totals(),
            "VIEW": plan.view,
            "INITIAL_SHA": sha256(repr([list(r) for r in plan.rows])),
            "FINAL_SHA": sha256(repr([list(r) for r in plan.final_rows()])),
            "REGION_OF": {c[0]: c[2] for c in plan.customers},
        }
        modules = ["csv", "hashlib", "os", "subprocess"]
        initial = render_test(modules, consts, SQL_HELPER, INITIAL)
        parts = [SQL_HELPER, ORDERS_STATE]
        parts += [VIEW_BEHAVIOUR] if plan.view else [NO_VIEW]
        parts += [REPORT] if plan.report else []
        return initial, render_test(modules, consts, *parts)


def init_sql(plan: Plan) -> str:
    pw = plan.passwords
    lines = [
        f"ALTER ROLE postgres PASSWORD '{pw['postgres']}';",
        f"CREATE ROLE app LOGIN PASSWORD '{pw['app']}';",
        f"CREATE ROLE checker LOGIN PASSWORD '{pw['checker']}';",
        "CREATE DATABASE shop;",
        "\\connect shop",
        "REVOKE ALL ON SCHEMA public FROM PUBLIC;",
        "GRANT USAGE, CREATE ON SCHEMA public TO app;",
        "GRANT USAGE ON SCHEMA public TO checker;",
        "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, region text NOT "
        "NULL);",
        "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer NOT NULL REFERENCES "
        "customers, amount_cents integer NOT NULL, status text NOT NULL, created_at date NOT "
        "NULL);",
        "GRANT SELECT ON customers, orders TO app, checker;",
        "GRANT INSERT ON orders TO checker;",
        "ALTER DEFAULT PRIVILEGES FOR ROLE app IN SCHEMA public GRANT SELECT ON TABLES TO checker;",
    ]
    if plan.cutoff:
        lines.append("GRANT UPDATE (status) ON orders TO app;")
    lines += [f"INSERT INTO customers VALUES ({i}, '{n}', '{r}');" for i, n, r in plan.customers]
    lines += [
        f"INSERT INTO orders VALUES ({r[0]}, {r[1]}, {r[2]}, '{r[3]}', '{r[4]}');"
        for r in plan.rows
    ]
    return "\n".join(lines) + "\n"


PGPASS = """
import os
path = "/home/user/.pgpass"
with open(path, "w") as fh:
    fh.write("db:5432:shop:app:{password}\\n")
os.chown(path, 1000, 1000)
os.chmod(path, 0o600)
"""
SQL_HELPER = """
    def _sql(query):
        env = {"PATH": "/usr/bin:/bin", "PGPASSWORD": PASSWORD, "PGCONNECT_TIMEOUT": "20"}
        done = subprocess.run(
            ["psql", "-X", "-q", "-At", "-F", ",", "-v", "ON_ERROR_STOP=1", "-h", "db",
             "-U", "checker", "shop", "-c", query],
            capture_output=True, text=True, env=env, timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return [line.split(",") for line in done.stdout.splitlines() if line]


    def _orders_sha():
        rows = _sql("SELECT id, customer_id, amount_cents, status, created_at FROM public.orders "
                    "ORDER BY id")
        return hashlib.sha256(repr([[int(r[0]), int(r[1]), int(r[2]), r[3], r[4]]
                                    for r in rows]).encode()).hexdigest()
"""
INITIAL = """
    def test_database_is_reachable_and_untouched():
        assert _orders_sha() == INITIAL_SHA


    def test_no_view_and_no_report_yet():
        assert _sql("SELECT to_regclass('public.region_totals') IS NULL") == [["t"]]
        assert not REPORT or not os.path.exists(REPORT)
"""
ORDERS_STATE = """
    def test_orders_hold_what_they_should():
        assert _orders_sha() == FINAL_SHA
"""
NO_VIEW = """
    def test_nothing_else_was_asked_of_the_schema():
        assert _sql("SELECT to_regclass('public.region_totals') IS NULL") == [["t"]]
"""
VIEW_BEHAVIOUR = """
    def _totals(extra=""):
        rows = _sql(extra + "SELECT region, total_cents FROM public.region_totals; ROLLBACK;"
                    if extra else "SELECT region, total_cents FROM public.region_totals")
        return {r[0]: int(r[1]) for r in rows}


    def test_the_view_is_a_view():
        got = _sql("SELECT relkind FROM pg_catalog.pg_class WHERE oid = "
                   "'public.region_totals'::regclass")
        assert got == [["v"]]


    def test_the_view_counts_paid_orders_per_region():
        expected = {region: int(total) for region, total in EXPECTED_CSV[1:]}
        assert _totals() == expected


    def test_the_view_follows_new_orders():
        customer = sorted(REGION_OF)[0]
        region = REGION_OF[customer]
        insert = (f"BEGIN; INSERT INTO public.orders VALUES (900001, {customer}, 4321, 'paid', "
                  "'2026-07-01'); INSERT INTO public.orders VALUES (900002, "
                  f"{customer}, 999, 'refunded', '2026-07-02'); ")
        before = _totals().get(region, 0)
        assert _totals(insert).get(region, 0) == before + 4321
"""
REPORT = """
    def test_report():
        with open(REPORT, newline="") as fh:
            got = [row for row in csv.reader(fh) if row]
        assert got == EXPECTED_CSV
"""
