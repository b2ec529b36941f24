"""The shell-script family's scripts for levels 4 to 6: an extension summary that skips hidden
files and rejects a bad argument, a column sum over several quoted CSV files, and a top-N count
with options and usage errors; each with its test cases and its reference body."""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from typing import Any

from endless_assets.generation.procedural.base import dedent

# Each case: {"files": {name: text}, "args": [...] ("{dir}" is the case's directory),
# "stdin": str, "out": [expected stdout lines, compared token by token], "rc": exit status}
Case = dict[str, Any]
CITIES = ["Berlin", "New York", "Lagos", "Lima", "Oslo", "Sao Paulo", "Kyoto", "Perth"]
STEMS = ["report", "photo", "notes", "data", "backup", "index", "main", "setup", "draft"]
EXTS = ["txt", "csv", "py", "sh", "log", "json", "md", "gz"]


def case(
    files: dict[str, str], args: list[str], out: list[str], rc: int = 0, stdin: str = ""
) -> Case:
    """A test case, its keys in the order the tests record them."""
    return {"files": files, "args": args, "stdin": stdin, "out": out, "rc": rc}


def counted(files: dict[str, str]) -> Case:
    """The extension counter's case over `files` and a nested file: it counts the top-level
    files that are not hidden."""
    files["sub dir/inner.txt"] = "nested files do not count\n"
    top = [n for n in files if "/" not in n and not n.startswith(".")]
    counts = Counter(n.rsplit(".", 1)[1] if "." in n else "(none)" for n in top)
    return case(files, ["{dir}"], [f"{ext} {n}" for ext, n in sorted(counts.items())])


def ext_case(rng: random.Random) -> Case:
    files: dict[str, str] = {}
    for _ in range(rng.randint(6, 14)):
        stem = f"{rng.choice(STEMS)}{rng.choice(['', ' ', '-'])}{rng.randint(1, 99)}"
        name = rng.choice([f"{stem}.{rng.choice(EXTS)}"] * 3 + [f"{stem}.tar.gz", stem])
        files[name] = f"{name}\n"
    for name in rng.sample([".env", ".cache.json", ".hidden.txt", ".bashrc"], 2):
        files[name] = "hidden files do not count\n"
    return counted(files)


def _csv(rows: list[list[str]], crlf: bool) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows(rows)
    return buf.getvalue()


def sum_case(rng: random.Random, missing: bool = False) -> Case:
    col = rng.choice(["qty", "bytes", "hits"])
    files, total = {}, 0
    for k in range(rng.randint(2, 3)):
        header = ["id", "name", col] if not (missing and k == 1) else ["id", "name", "other"]
        rows = [header]
        for i in range(rng.randint(3, 8)):
            value = rng.choice([str(rng.randint(0, 900)), ""])
            total += int(value or 0)
            rows.append([str(i), f"{rng.choice(CITIES)}, {rng.choice(STEMS)}", value])
        files[f"part{k}.csv"] = _csv(rows, crlf=k == 1)
    args = [col, *(f"{{dir}}/{name}" for name in files)]
    return case(files, args, [], rc=2) if missing else case(files, args, [str(total)])


def top_case(rng: random.Random, error: str = "") -> Case:
    n = rng.choice([None, 2, 4])
    col = "city"
    files, counts = {}, Counter()
    for k in range(rng.randint(1, 3)):
        rows = [["id", "city", "note"]]
        for i in range(rng.randint(4, 10)):
            city = rng.choice([*CITIES[:5], ""])
            counts.update([city] if city else [])
            rows.append([str(i), city, f"{rng.choice(STEMS)}, {rng.randint(1, 9)}"])
        files[f"visits{k}.csv"] = _csv(rows, crlf=False)
    paths = [f"{{dir}}/{name}" for name in files]
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: n or 3]
    case = {"files": files, "stdin": "", "out": [f"{c} {v}" for v, c in ranked], "rc": 0}
    case["args"] = [*(["-n", str(n)] if n else []), col, *paths]
    if error == "usage":
        case.update(args=rng.choice([[], ["-n", "zero", col, *paths], [col]]), out=[], rc=64)
    elif error == "column":
        case.update(args=["town", *paths], out=[], rc=2)
    return case


# Counts the extensions of the names a `find {find}` in "$1" prints, one `<ext> <count>` a line.
EXTENSIONS = dedent("""
    find "$1" -mindepth 1 -maxdepth 1 {find} -printf '%f\\n' \\
      | awk '{{ if (index($0, ".")) {{ n = split($0, p, "."); print p[n] }}
              else print "(none)" }}' \\
      | sort | uniq -c | awk '{{ print $2, $1 }}'
""")
LEVELED_VARIANTS = {
    "ext-summary": (
        "takes a directory as its only argument and prints how many regular files directly in "
        "that directory (not in subdirectories, and not hidden files, whose names start with a "
        "dot) have each extension, one line `<ext> <count>` per extension, sorted by extension "
        "name. The extension is the part of the file name after its last dot (so `a.tar.gz` "
        "counts as `gz`); files without a dot count under `(none)`, and names may contain "
        "spaces. If the argument is not a directory it must print an error to stderr, print "
        "nothing on stdout, and exit with status 2",
        'if [ ! -d "$1" ]; then echo "not a directory: $1" >&2; exit 2; fi\n'
        + EXTENSIONS.format(find="-type f ! -name '.*'"),
    ),
    "csvsum": (
        "takes a column name and one or more CSV files (comma-separated with a header row; "
        "fields may be quoted and contain commas, and files may have CRLF line endings) and "
        "prints the sum of the integer values in that column over all the files as a single "
        "number; an empty value counts as 0. If a file has no such column it must print an "
        "error to stderr, print nothing on stdout, and exit with status 2",
        dedent("""
            python3 - "$@" <<'PY'
            import csv, sys
            col, total = sys.argv[1], 0
            for path in sys.argv[2:]:
                with open(path, newline="") as fh:
                    rows = csv.DictReader(fh)
                    if col not in (rows.fieldnames or []):
                        print(f"no column {col} in {path}", file=sys.stderr)
                        sys.exit(2)
                    total += sum(int(r[col] or 0) for r in rows)
            print(total)
            PY
        """),
    ),
    "topn": (
        "is called as `topn.sh [-n N] COLUMN FILE...` and prints the N most frequent non-empty "
        "values of COLUMN over all the CSV files (comma-separated with a header row; fields may "
        "be quoted and contain commas), one line `<count> <value>` each, most frequent first, "
        "ties broken by value; N is 3 unless given. Called without a column and at least one "
        "file, or with an N that is not a positive integer, it must print a usage message to "
        "stderr, nothing on stdout, and exit with status 64; if a file has no such column, an "
        "error to stderr, nothing on stdout, and exit status 2",
        dedent("""
            python3 - "$@" <<'PY'
            import csv, sys
            from collections import Counter
            args, n = sys.argv[1:], 3


            def usage():
                print("usage: topn.sh [-n N] COLUMN FILE...", file=sys.stderr)
                sys.exit(64)


            if args[:1] == ["-n"]:
                if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
                    usage()
                n, args = int(args[1]), args[2:]
            if len(args) < 2:
                usage()
            counts = Counter()
            for path in args[1:]:
                with open(path, newline="") as fh:
                    rows = csv.DictReader(fh)
                    if args[0] not in (rows.fieldnames or []):
                        print(f"no column {args[0]} in {path}", file=sys.stderr)
                        sys.exit(2)
                    counts.update(r[args[0]] for r in rows if r[args[0]])
            for value, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
                print(count, value)
            PY
        """),
    ),
}


def leveled_cases(rng: random.Random, kind: str) -> list[Case]:
    """The test cases of a level-4-to-6 script: ordinary ones, then the errors it must report."""
    if kind == "ext-summary":
        return [*(ext_case(rng) for _ in range(3)), case({}, ["{dir}/missing"], [], rc=2)]
    if kind == "csvsum":
        return [*(sum_case(rng) for _ in range(3)), sum_case(rng, missing=True)]
    errors = [top_case(rng, "usage"), top_case(rng, "usage"), top_case(rng, "column")]
    return [*(top_case(rng) for _ in range(4)), *errors]


SAMPLES = {"ext-summary": ext_case, "csvsum": sum_case, "topn": top_case}
