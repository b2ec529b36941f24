"""CSV manipulation: group the rows of a CSV by one column and sum or average another."""

from __future__ import annotations

import csv
import io
import random
from collections import defaultdict

from endless_assets.generation.procedural.base import PEOPLE, PROJECTS, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import render_test, sha256

REGIONS = ["north", "south", "east", "west", "central", "apac", "emea", "latam"]
PRODUCTS = ["widget", "gadget", "sprocket", "gizmo", "doohickey", "flange", "bracket", "valve"]
CHANNELS = ["web", "retail", "partner", "phone"]
STATUSES = ["completed", "completed", "completed", "refunded", "pending"]
SURNAMES = ["Smith", "Jones", "Garcia", "Chen", "Okafor", "Novak", "Silva", "Kowalski"]


class CsvAggregate(Family):
    name = "csv_aggregate"
    category = "CSV/JSON data manipulation"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        key_col = rng.choice(["region", "product", "channel"])
        pool = {"region": REGIONS, "product": PRODUCTS, "channel": CHANNELS}[key_col]
        keys = rng.sample(pool, rng.randint(3, len(pool)))
        value_col = rng.choice(["units", "revenue"])
        agg = rng.choice(["sum", "mean"])
        only_completed = rng.random() < 0.5
        as_json = rng.random() < 0.4
        quoted = rng.random() < 0.4  # a customer column whose values contain commas

        header = ["order_id", "date", "region", "product", "channel", "units", "revenue", "status"]
        if quoted:
            header.insert(2, "customer")
        rows: list[dict[str, str]] = []
        for i in range(rng.randint(25, 90)):
            units = rng.randint(1, 40)
            row = {
                "order_id": str(1000 + i),
                "date": f"2026-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}",
                "customer": f"{rng.choice(SURNAMES)}, {rng.choice(PEOPLE).title()}",
                "region": rng.choice(keys if key_col == "region" else REGIONS),
                "product": rng.choice(keys if key_col == "product" else PRODUCTS),
                "channel": rng.choice(keys if key_col == "channel" else CHANNELS),
                "units": str(units),
                "revenue": f"{units * rng.randint(199, 4999) / 100:.2f}",
                "status": rng.choice(STATUSES),
            }
            rows.append({k: row[k] for k in header})
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        csv_text = buf.getvalue()

        groups: dict[str, list[float]] = defaultdict(list)
        for row in rows:
            if only_completed and row["status"] != "completed":
                continue
            groups[row[key_col]].append(float(row[value_col]))
        if agg == "sum":
            expected = {k: round(sum(v), 2) for k, v in groups.items()}
        else:
            expected = {k: round(sum(v) / len(v), 2) for k, v in groups.items()}
        out_col = f"{'total' if agg == 'sum' else 'avg'}_{value_col}"

        src = f"/home/user/data/{project}/orders.csv"
        out = f"/home/user/reports/{key_col}_{out_col}.{'json' if as_json else 'csv'}"
        what = "sum" if agg == "sum" else "average (mean)"
        scope = "only the orders whose status is `completed`" if only_completed else "every order"
        if as_json:
            fmt = (
                f"Write {out} as a single JSON object mapping each {key_col} to that number, "
                f'e.g. {{"{keys[0]}": 123.45, ...}}.'
            )
        else:
            fmt = (
                f"Write {out} as a CSV with the header `{key_col},{out_col}` and one row per "
                f"{key_col}, sorted alphabetically by {key_col}."
            )
        instruction = (
            f"{src} is an export of our {project} orders (a normal CSV with a header row). For "
            f"each {key_col}, I need the {what} of the `{value_col}` column over {scope}, rounded "
            f"to 2 decimal places. Only include {key_col}s that have at least one such order. "
            f"{fmt} Don't modify the export."
        )
        if quoted:
            instruction += " Careful: some fields are quoted and contain commas."

        consts = {
            "SRC": src,
            "OUT": out,
            "KEY": key_col,
            "COL": out_col,
            "EXPECTED": expected,
            "SRC_SHA": sha256(csv_text),
        }
        initial_test = render_test(
            ["os"],
            consts,
            """
            def test_source_present():
                assert os.path.isfile(SRC)


            def test_output_absent():
                assert not os.path.exists(OUT)
        """,
        )
        if as_json:
            reader = dedent("""
                def _result():
                    with open(OUT) as fh:
                        data = json.load(fh)
                    assert isinstance(data, dict)
                    return {str(k): float(v) for k, v in data.items()}
            """)
        else:
            reader = dedent("""
                def _result():
                    with open(OUT, newline="") as fh:
                        rows = [r for r in csv.reader(fh) if r]
                    assert rows[0] == [KEY, COL]
                    keys = [r[0] for r in rows[1:]]
                    assert keys == sorted(keys), "rows must be sorted by key"
                    return {r[0]: float(r[1]) for r in rows[1:]}
            """)
        checks = dedent("""
            def test_groups():
                assert sorted(_result()) == sorted(EXPECTED)


            def test_values():
                got = _result()
                for key, value in EXPECTED.items():
                    assert abs(got[key] - value) < 0.0051, (key, got[key], value)


            def test_source_untouched():
                with open(SRC, "rb") as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == SRC_SHA
        """)
        completion_test = render_test(["csv", "hashlib", "json"], consts, reader, checks)

        lines = [
            "import csv, json",
            "from collections import defaultdict",
            "",
            "groups = defaultdict(list)",
            f"with open({src!r}, newline='') as fh:",
            "    for row in csv.DictReader(fh):",
        ]
        if only_completed:
            lines += ["        if row['status'] != 'completed':", "            continue"]
        lines.append(f"        groups[row[{key_col!r}]].append(float(row[{value_col!r}]))")
        value = "sum(v) / len(v)" if agg == "mean" else "sum(v)"
        lines.append(f"agg = {{k: round({value}, 2) for k, v in groups.items()}}")
        lines.append(f"with open({out!r}, 'w', newline='') as fh:")
        if as_json:
            lines.append("    json.dump(agg, fh, indent=2)")
        else:
            lines += [
                "    w = csv.writer(fh, lineterminator='\\n')",
                f"    w.writerow([{key_col!r}, {out_col!r}])",
                "    for k in sorted(agg):",
                "        w.writerow([k, f'{agg[k]:.2f}'])",
            ]
        script = "\n".join(lines) + "\n"
        solution = f"mkdir -p /home/user/reports\npython3 - <<'PY'\n{script}PY\n"
        hard = sum([only_completed, quoted, agg == "mean"])
        return FamilyTask(
            instruction=instruction,
            truth={"source": src, "output": out, "expected": expected},
            files={src.removeprefix("/home/user/"): csv_text},
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity=["easy", "medium", "medium", "hard"][hard],
            scenario="sales analyst summarising order exports",
        )
