"""CSV manipulation: group the rows of a CSV by one column and sum or average another.

Up the levels: more rows, then a status filter, quoted fields with commas, CRLF with a BOM and
sloppy status spellings, quarterly exports that overlap (duplicate orders) beside a test export
that does not count, a Latin-1 export, a date range, and the same answer in CSV and JSON.
"""

from __future__ import annotations

import csv
import io
import random
from collections import defaultdict
from dataclasses import dataclass

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.names import PEOPLE, PROJECTS
from endless_assets.generation.procedural.render import extras_script, kept, render_test, sha256

REGIONS = ["north", "south", "east", "west", "central", "apac", "emea", "latam"]
PRODUCTS = ["widget", "gadget", "sprocket", "gizmo", "doohickey", "flange", "bracket", "valve"]
CHANNELS = ["web", "retail", "partner", "phone"]
POOLS = {"region": REGIONS, "product": PRODUCTS, "channel": CHANNELS}  # the columns to group by
STATUSES = ["completed", "completed", "completed", "refunded", "pending"]
SURNAMES = ["Smith", "Jones", "Garcia", "Chen", "Okafor", "Novak", "Silva", "Kowalski"]
ACCENTED = ["Müller", "Ibáñez", "Çelik", "Nørgaard", "Gómez", "Lefèvre"]
SLOPPY = [" completed", "Completed", "COMPLETED", "completed "]
HEADER = ["order_id", "date", "region", "product", "channel", "units", "revenue", "status"]
SCENARIO = "sales analyst summarising order exports"


@dataclass
class Plan:
    project: str
    key_col: str
    keys: list[str]
    value_col: str
    agg: str
    only_completed: bool
    as_json: bool
    quoted: bool  # a customer column whose values contain commas
    sources: dict[str, list[dict[str, str]]]  # path -> its rows
    level: int | None = None
    latin1: str = ""  # the source written in Latin-1
    crlf: bool = False  # CRLF line endings and a UTF-8 byte-order mark
    decoy: str = ""  # an export in the same folder that does not count
    dates: tuple[str, str] | None = None  # inclusive range of `date`
    both: bool = False  # the answer in CSV and in JSON

    @property
    def header(self) -> list[str]:
        return [*HEADER[:2], "customer", *HEADER[2:]] if self.quoted else HEADER

    @property
    def out_col(self) -> str:
        return f"{'total' if self.agg == 'sum' else 'avg'}_{self.value_col}"

    @property
    def outputs(self) -> list[str]:
        stem = f"/home/user/reports/{self.key_col}_{self.out_col}"
        if self.both:
            return [f"{stem}.csv", f"{stem}.json"]
        return [f"{stem}.{'json' if self.as_json else 'csv'}"]

    def data(self) -> dict[str, bytes]:
        """Every source file (the decoy too) as its bytes."""
        found = {}
        for path, rows in self.sources.items():
            buf = io.StringIO()
            ending = "\r\n" if self.crlf else "\n"
            writer = csv.DictWriter(buf, fieldnames=self.header, lineterminator=ending)
            writer.writeheader()
            writer.writerows(rows)
            if path == self.latin1:
                found[path] = buf.getvalue().encode("latin-1")
            else:
                found[path] = (("\ufeff" if self.crlf else "") + buf.getvalue()).encode()
        return found

    def expected(self) -> dict[str, float]:
        groups: dict[str, list[float]] = defaultdict(list)
        seen: set[str] = set()
        for path, rows in self.sources.items():
            for row in rows if path != self.decoy else []:
                if row["order_id"] in seen:
                    continue
                seen.add(row["order_id"])
                if self.only_completed and row["status"].strip().lower() != "completed":
                    continue
                if self.dates and not self.dates[0] <= row["date"] <= self.dates[1]:
                    continue
                groups[row[self.key_col]].append(float(row[self.value_col]))
        if self.agg == "sum":
            return {k: round(sum(v), 2) for k, v in groups.items()}
        return {k: round(sum(v) / len(v), 2) for k, v in groups.items()}


def _row(rng: random.Random, plan: Plan, i: int) -> dict[str, str]:
    units = rng.randint(1, 40)
    row = {
        "order_id": str(1000 + i),
        "date": f"2026-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}",
        "customer": f"{rng.choice(SURNAMES)}, {rng.choice(PEOPLE).title()}",
        **{col: rng.choice(plan.keys if plan.key_col == col else p) for col, p in POOLS.items()},
        "units": str(units),
        "revenue": f"{units * rng.randint(199, 4999) / 100:.2f}",
        "status": rng.choice(STATUSES),
    }
    return {k: row[k] for k in plan.header}


class CsvAggregate(Family[Plan]):
    name = "csv_aggregate"
    category = "CSV/JSON data manipulation"

    def sample(self, rng: random.Random) -> Plan:
        project, key_col = rng.choice(PROJECTS), rng.choice(list(POOLS))
        keys = rng.sample(POOLS[key_col], rng.randint(3, len(POOLS[key_col])))
        value_col = rng.choice(["units", "revenue"])
        agg = rng.choice(["sum", "mean"])
        only_completed = rng.random() < 0.5
        as_json = rng.random() < 0.4
        quoted = rng.random() < 0.4
        src = f"/home/user/data/{project}/orders.csv"
        plan = Plan(project, key_col, keys, value_col, agg, only_completed, as_json, quoted, {})
        plan.sources[src] = [_row(rng, plan, i) for i in range(rng.randint(25, 90))]
        return plan

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project, key_col = rng.choice(PROJECTS), rng.choice(list(POOLS))
        pool = POOLS[key_col]
        keys = rng.sample(pool, by_level(level, 3, 3, 4, 4, len(pool), len(pool)))
        value_col = rng.choice(["units", "revenue"])
        agg = "sum" if level == 1 else rng.choice(["sum", "mean"])
        as_json = level in (2, 3, 4, 5) and rng.random() < 0.4
        plan = Plan(project, key_col, keys, value_col, agg, level >= 2, as_json, level >= 3, {})
        plan.level, plan.crlf, plan.both = level, level >= 4, level == 6
        base = f"/home/user/data/{project}"
        n_rows = by_level(level, 20, 35, 50, 60, 40, 45)
        if level <= 4:
            plan.sources[f"{base}/orders.csv"] = self._rows(rng, plan, range(n_rows), 0)
        else:
            plan.latin1 = f"{base}/orders-2026-q1.csv" if level == 6 else ""
            for q in range(by_level(level, 0, 0, 0, 0, 2, 3)):
                rows = self._rows(rng, plan, range(100 * q, 100 * q + n_rows), q + 1)
                if q:  # the export overlaps the previous one by a few orders
                    rows[:0] = [dict(r) for r in plan.sources[f"{base}/orders-2026-q{q}.csv"][-3:]]
                plan.sources[f"{base}/orders-2026-q{q + 1}.csv"] = rows
            plan.decoy = f"{base}/orders-test.csv"
            plan.sources[plan.decoy] = [_row(rng, plan, 9000 + i) for i in range(8)]
        if level == 6:
            plan.dates = ("2026-02-01", f"2026-0{rng.randint(5, 8)}-15")
        return plan

    def _rows(self, rng: random.Random, plan: Plan, ids: range, quarter: int) -> list[dict]:
        """A leveled export's rows: its quarter's dates, sloppy statuses from level 4 on, and
        accented names in the Latin-1 export."""
        rows = [_row(rng, plan, i) for i in ids]
        for row in rows:
            if quarter:
                row["date"] = f"2026-{3 * quarter - rng.randint(0, 2):02d}-{rng.randint(1, 28):02d}"
            if plan.crlf and rng.random() < 0.15:
                row["status"] = rng.choice(SLOPPY)
            if quarter == 1 and plan.latin1 and rng.random() < 0.3:
                row["customer"] = f"{rng.choice(ACCENTED)}, {rng.choice(PEOPLE).title()}"
        return rows

    def build(self, plan: Plan) -> FamilyTask:
        data = plan.data()
        text = {p: d.decode() for p, d in data.items() if p != plan.latin1}
        blobs = {p: d for p, d in data.items() if p == plan.latin1}
        out = plan.outputs[0] if len(plan.outputs) == 1 else plan.outputs
        src = plan.decoy.rsplit("/", 1)[0] if plan.decoy else next(iter(plan.sources))
        hard = sum([plan.only_completed, plan.quoted, plan.agg == "mean"])
        return self.task(
            plan,
            self.tests(plan, data),
            truth={"source": src, "output": out, "expected": plan.expected()},
            files={p.removeprefix("/home/user/"): t for p, t in text.items()},
            setup_script=extras_script(blobs, owned=["/home/user/data"]) if blobs else "",
            complexity=["easy", "medium", "medium", "hard"][hard],
            scenario=SCENARIO,
        )

    def instruction(self, plan: Plan) -> str:
        key_col, value_col, keys = plan.key_col, plan.value_col, plan.keys
        what = "sum" if plan.agg == "sum" else "average (mean)"
        scope = (
            "only the orders whose status is `completed`" if plan.only_completed else "every order"
        )
        outs = plan.outputs
        as_csv = f"as a CSV with the header `{key_col},{plan.out_col}` and one row per {key_col}, "
        as_csv += f"sorted alphabetically by {key_col}"
        if plan.both:
            fmt = f"Write {outs[0]} {as_csv}, and {outs[1]} as a single JSON object mapping each "
            fmt += f"{key_col} to the same number."
        elif plan.as_json:
            fmt = (
                f"Write {outs[0]} as a single JSON object mapping each {key_col} to that number, "
                f'e.g. {{"{keys[0]}": 123.45, ...}}.'
            )
        else:
            fmt = f"Write {outs[0]} {as_csv}."
        if plan.decoy:
            folder = plan.decoy.rsplit("/", 1)[0]
            names = ", ".join(p.rsplit("/", 1)[1] for p in plan.sources if p != plan.decoy)
            source = (
                f"{folder} holds the quarterly exports of our {plan.project} orders ({names}: "
                "normal CSVs with a header row; orders-test.csv is a test export and does not "
                "count). Consecutive exports overlap: an `order_id` in two of them is one order, "
                "count it once."
            )
        else:
            source = (
                f"{next(iter(plan.sources))} is an export of our {plan.project} orders (a normal "
                "CSV with a header row)."
            )
        text = (
            f"{source} For each {key_col}, I need the {what} of the `{value_col}` column over "
            f"{scope}, rounded to 2 decimal places. Only include {key_col}s that have at least "
            f"one such order. {fmt} Don't modify the export{'s' if plan.decoy else ''}."
        )
        if plan.quoted:
            text += " Careful: some fields are quoted and contain commas."
        if plan.crlf:
            text += (
                " The files come from a Windows tool (CRLF line endings, a byte-order mark), and "
                "status values are not always written consistently: ` Completed` is `completed`."
            )
        if plan.latin1:
            text += f" {plan.latin1.rsplit('/', 1)[1]} came from the old system, in Latin-1."
        if plan.dates:
            text += f" Only orders dated {plan.dates[0]} to {plan.dates[1]} (inclusive) count."
        return text

    def tests(self, plan: Plan, data: dict[str, bytes]) -> tuple[str, str]:
        src = next(iter(plan.sources))
        consts = {
            "SRC": src,
            "OUT": plan.outputs[0],
            "KEY": plan.key_col,
            "COL": plan.out_col,
            "EXPECTED": plan.expected(),
            "SRC_SHA": sha256(data[src]),
        }
        reader = JSON_READER if plan.as_json else CSV_READER
        if plan.level is None:
            initial = render_test(["os"], consts, INITIAL)
            return initial, render_test(["csv", "hashlib", "json"], consts, reader, GROUPS, SOURCE)
        del consts["SRC_SHA"]
        consts["SOURCES"] = {p: sha256(d) for p, d in data.items()}
        consts["JSON_OUT"] = plan.outputs[-1] if plan.both else ""
        initial = render_test(["os"], consts, INITIAL)
        parts = [reader, GROUPS, SOURCES, *([AGREES] if plan.both else [])]
        return initial, render_test(["csv", "hashlib", "json"], consts, *parts)

    def solution(self, plan: Plan) -> str:
        if plan.level is None:
            return self._legacy_solution(plan)
        sources = [p for p in plan.sources if p != plan.decoy]
        script = dedent(f"""
            import csv, io, json
            from collections import defaultdict

            DATES = {plan.dates!r}
            groups, seen = defaultdict(list), set()
            for path in {sources!r}:
                raw = open(path, "rb").read()
                try:
                    text = raw.decode("utf-8-sig")
                except UnicodeDecodeError:
                    text = raw.decode("latin-1")
                for row in csv.DictReader(io.StringIO(text, newline="")):
                    if row["order_id"] in seen:
                        continue
                    seen.add(row["order_id"])
                    if {plan.only_completed!r} and row["status"].strip().lower() != "completed":
                        continue
                    if DATES and not DATES[0] <= row["date"] <= DATES[1]:
                        continue
                    groups[row[{plan.key_col!r}]].append(float(row[{plan.value_col!r}]))
            agg = {{k: round({"sum(v) / len(v)" if plan.agg == "mean" else "sum(v)"}, 2)
                   for k, v in groups.items()}}
            for out in {plan.outputs!r}:
                with open(out, "w", newline="") as fh:
                    if out.endswith(".json"):
                        json.dump(agg, fh, indent=2)
                        continue
                    w = csv.writer(fh, lineterminator="\\n")
                    w.writerow([{plan.key_col!r}, {plan.out_col!r}])
                    for k in sorted(agg):
                        w.writerow([k, f"{{agg[k]:.2f}}"])
        """)
        return f"mkdir -p /home/user/reports\npython3 - <<'PY'\n{script}PY\n"

    def _legacy_solution(self, plan: Plan) -> str:
        src, out = next(iter(plan.sources)), plan.outputs[0]
        key_col, value_col = plan.key_col, plan.value_col
        lines = [
            "import csv, json",
            "from collections import defaultdict",
            "",
            "groups = defaultdict(list)",
            f"with open({src!r}, newline='') as fh:",
            "    for row in csv.DictReader(fh):",
        ]
        if plan.only_completed:
            lines += ["        if row['status'] != 'completed':", "            continue"]
        lines.append(f"        groups[row[{key_col!r}]].append(float(row[{value_col!r}]))")
        value = "sum(v) / len(v)" if plan.agg == "mean" else "sum(v)"
        lines.append(f"agg = {{k: round({value}, 2) for k, v in groups.items()}}")
        lines.append(f"with open({out!r}, 'w', newline='') as fh:")
        if plan.as_json:
            lines.append("    json.dump(agg, fh, indent=2)")
        else:
            lines += [
                "    w = csv.writer(fh, lineterminator='\\n')",
                f"    w.writerow([{key_col!r}, {plan.out_col!r}])",
                "    for k in sorted(agg):",
                "        w.writerow([k, f'{agg[k]:.2f}'])",
            ]
        script = "\n".join(lines) + "\n"
        return f"mkdir -p /home/user/reports\npython3 - <<'PY'\n{script}PY\n"


INITIAL = """
    def test_source_present():
        assert os.path.isfile(SRC)


    def test_output_absent():
        assert not os.path.exists(OUT)
"""
JSON_READER = """
    def _result():
        with open(OUT) as fh:
            data = json.load(fh)
        assert isinstance(data, dict)
        return {str(k): float(v) for k, v in data.items()}
"""
CSV_READER = """
    def _result():
        with open(OUT, newline="") as fh:
            rows = [r for r in csv.reader(fh) if r]
        assert rows[0] == [KEY, COL]
        keys = [r[0] for r in rows[1:]]
        assert keys == sorted(keys), "rows must be sorted by key"
        return {r[0]: float(r[1]) for r in rows[1:]}
"""
GROUPS = """
    def test_groups():
        assert sorted(_result()) == sorted(EXPECTED)


    def test_values():
        got = _result()
        for key, value in EXPECTED.items():
            assert abs(got[key] - value) < 0.0051, (key, got[key], value)
"""
SOURCE = kept("test_source_untouched", "SRC", digest="SRC_SHA")
SOURCES = kept("test_sources_untouched", "SOURCES")
AGREES = """
    def test_json_agrees():
        with open(JSON_OUT) as fh:
            data = json.load(fh)
        assert {str(k): round(float(v), 2) for k, v in data.items()} == EXPECTED
"""
