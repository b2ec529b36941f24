"""Shell scripting: write a small reusable script; the test runs it as the agent on fresh inputs.

Up the levels: dedupe lines, count levels or extensions, sum a column with an error exit, then
(shell_levels.py) an extension summary that skips hidden files and rejects a bad argument, a
column sum over several quoted CSV files with CRLF and empty values, and a top-N count with an
option and usage errors; each level runs more cases.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from endless_assets.generation.procedural.base import Family, FamilyTask, dedent
from endless_assets.generation.procedural.families import shell_levels
from endless_assets.generation.procedural.families.shell_levels import Case, case
from endless_assets.generation.procedural.names import PROJECTS, SERVICES
from endless_assets.generation.procedural.render import kept, render_test, sha256

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def _ext_case(rng: random.Random) -> Case:
    files: dict[str, str] = {}
    for _ in range(rng.randint(5, 14)):
        stem = f"{rng.choice(shell_levels.STEMS)}{rng.randint(1, 99)}"
        name = rng.choice(
            [f"{stem}.{rng.choice(shell_levels.EXTS)}"] * 2 + [f"{stem}.tar.gz", stem]
        )
        files[name] = f"{name}\n"
    return shell_levels.counted(files)


def _sum_case(rng: random.Random, missing: bool = False) -> Case:
    cols = rng.sample(["id", "qty", "bytes", "score", "price", "hits", "errors"], 4)
    rows = [[str(rng.randint(0, 500)) for _ in cols] for _ in range(rng.randint(3, 12))]
    text = ",".join(cols) + "\n" + "".join(",".join(r) + "\n" for r in rows)
    if missing:
        return case({"in.csv": text}, ["{dir}/in.csv", "nosuchcol"], [], rc=2)
    i = rng.randrange(len(cols))
    return case({"in.csv": text}, ["{dir}/in.csv", cols[i]], [str(sum(int(r[i]) for r in rows))])


def _level_case(rng: random.Random) -> Case:
    levels = rng.sample(["INFO", "WARN", "ERROR", "DEBUG", "TRACE"], rng.randint(3, 5))
    counts = Counter({lv: rng.randint(1, 12) for lv in levels})
    counts[levels[1]] = counts[levels[0]]  # always a tie, so the tie-break rule matters
    order = [lv for lv, n in counts.items() for _ in range(n)]
    rng.shuffle(order)
    lines = []
    for i, level in enumerate(order):
        stamp = f"2026-04-{i % 28 + 1:02d}T10:{i % 60:02d}:00Z"
        lines.append(f"{stamp} [{level}] {rng.choice(SERVICES)} ok")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = [f"{lv} {n}" for lv, n in ranked]
    return case({"app.log": "\n".join(lines) + "\n"}, ["{dir}/app.log"], out)


def _dedupe_case(rng: random.Random) -> Case:
    count = rng.randint(6, 20)
    lines = [rng.choice(WORDS) + rng.choice(["", " one", " two"]) for _ in range(count)]
    return case({}, [], list(dict.fromkeys(lines)), stdin="\n".join(lines) + "\n")


VARIANTS = {
    "ext-summary": (
        "takes a directory as its only argument and prints how many regular files directly in "
        "that directory (not in subdirectories) have each extension, one line `<ext> <count>` per "
        "extension, sorted by extension name. The extension is the part of the file name after "
        "its last dot (so `a.tar.gz` counts as `gz`); files without a dot count under `(none)`",
        shell_levels.EXTENSIONS.format(find="-type f"),
    ),
    "colsum": (
        "takes a CSV file (comma-separated, header row, no quoting) and a column name, and prints "
        "the sum of the integer values in that column as a single number. If the column doesn't "
        "exist it must print an error to stderr, print nothing on stdout, and exit with status 2",
        dedent("""
            awk -F, -v col="$2" '
              NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i
                        if (!c) { print "no such column: " col > "/dev/stderr"; exit 2 }
                        next }
              { s += $c }
              END { if (c) print s + 0 }' "$1"
        """),
    ),
    "level-count": (
        "takes a log file whose lines look like `<timestamp> [<LEVEL>] <message>` and prints one "
        "line `<LEVEL> <count>` per level that occurs, most frequent first, ties broken by level "
        "name",
        dedent("""
            awk '{ print $2 }' "$1" | tr -d '[]' | sort | uniq -c \\
              | sort -k1,1nr -k2,2 | awk '{ print $2, $1 }'
        """),
    ),
    "dedupe": (
        "reads lines on standard input and prints each distinct line once, in the order of its "
        "first appearance",
        "awk '!seen[$0]++'\n",
    ),
}
MAKERS = {
    "ext-summary": _ext_case,
    "colsum": _sum_case,
    "level-count": _level_case,
    "dedupe": _dedupe_case,
}

TEST_BODY = """
def _run(case):
    # The grader runs this test as the agent's uid (so the script runs with the agent's
    # privilege, no more), with TMPDIR on its own scratch space: a full disk does not matter.
    work = tempfile.mkdtemp()
    os.chmod(work, 0o755)
    try:
        for rel, text in case["files"].items():
            path = os.path.join(work, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.chmod(os.path.dirname(path), 0o755)  # the grader may run with umask 077
            with open(path, "w") as fh:
                fh.write(text)
            os.chmod(path, 0o644)
        args = [a.replace("{dir}", work) for a in case["args"]]
        return subprocess.run(
            [SCRIPT, *args],
            input=case["stdin"], capture_output=True, text=True, timeout=30, cwd=work,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/user",
                 "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
        )
    finally:
        shutil.rmtree(work)


def test_script_is_executable():
    assert os.path.isfile(SCRIPT)
    assert os.stat(SCRIPT).st_mode & 0o100, "the script must be executable"


def test_cases():
    for i, case in enumerate(CASES):
        result = _run(case)
        assert result.returncode == case["rc"], (i, result.returncode, result.stderr[-500:])
        got = [line.split() for line in result.stdout.splitlines() if line.strip()]
        assert got == [line.split() for line in case["out"]], (i, result.stdout[-2000:])
        if case["rc"]:
            assert result.stderr.strip(), "an error message was expected on stderr"
"""


@dataclass
class Plan:
    project: str
    kind: str
    what: str  # what the script does, in words
    body: str  # the reference script's body
    cases: list[Case]
    sample: Case  # the user's own sample, seeded under /home/user/samples
    level: int | None = None

    @property
    def script(self) -> str:
        return f"/home/user/bin/{self.kind}.sh"

    @property
    def sample_dir(self) -> str:
        return f"samples/{self.project}"

    def files(self) -> dict[str, str]:
        sample = self.sample
        files = {f"{self.sample_dir}/{rel}": text for rel, text in sample["files"].items()}
        if self.kind == "dedupe":
            files[f"{self.sample_dir}/input.txt"] = sample["stdin"]
        return files


class ShellScript(Family[Plan]):
    name = "shell_script"
    category = "shell scripting automation"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        kind = rng.choice(sorted(VARIANTS))
        return self._plan(rng, project, kind, rng.randint(2, 3))

    def _plan(self, rng: random.Random, project: str, kind: str, n: int) -> Plan:
        what, body = VARIANTS[kind]
        make = MAKERS[kind]
        cases = [make(rng) for _ in range(n)]
        if kind == "colsum":
            cases.append(_sum_case(rng, missing=True))
        return Plan(project, kind, what, body, cases, make(rng))

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        if level <= 3:
            kind = ["dedupe", rng.choice(["level-count", "ext-summary"]), "colsum"][level - 1]
            plan = self._plan(rng, project, kind, 2 if level == 1 else 3)
        else:
            kind = ["ext-summary", "csvsum", "topn"][level - 4]
            what, body = shell_levels.LEVELED_VARIANTS[kind]
            cases = shell_levels.leveled_cases(rng, kind)
            plan = Plan(project, kind, what, body, cases, shell_levels.SAMPLES[kind](rng))
        plan.level = level
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        return self.task(
            plan,
            truth={"script": plan.script, "kind": plan.kind, "cases": plan.cases},
            files=plan.files(),
            complexity={
                "dedupe": "easy",
                "level-count": "medium",
                "ext-summary": "medium",
                "colsum": "hard",
            }.get(plan.kind, "hard"),
            scenario="developer automating a chore with a shell script",
        )

    def instruction(self, plan: Plan) -> str:
        script, sample_dir = plan.script, plan.sample_dir
        args = plan.sample["args"]
        try_it = " ".join(a.replace("{dir}", f"/home/user/{sample_dir}") for a in args)
        example = (
            f"`{script} < /home/user/{sample_dir}/input.txt`"
            if plan.kind == "dedupe"
            else f"`{script} {try_it}`"
        )
        return (
            f"I keep redoing the same thing by hand for {plan.project}, so I'd like a script for "
            f"it. Write an executable shell script at {script} that {plan.what}. It should work "
            f"for any input, not just my sample: you can try it with {example}. Don't modify "
            "the samples."
        )

    def tests(self, plan: Plan) -> tuple[str, str]:
        samples = {f"/home/user/{rel}": sha256(text) for rel, text in plan.files().items()}
        consts = {"SCRIPT": plan.script, "CASES": plan.cases, "SAMPLES": samples}
        initial_test = render_test(["os"], consts, INITIAL)
        imports = ["hashlib", "os", "shutil", "subprocess", "tempfile"]
        checks = [TEST_BODY, kept("test_sample_untouched", "SAMPLES")]
        return initial_test, render_test(imports, consts, *checks)

    def solution(self, plan: Plan) -> str:
        return (
            "mkdir -p /home/user/bin\n"
            f"cat > {plan.script} <<'SCRIPT'\n#!/bin/bash\n{plan.body}SCRIPT\n"
            f"chmod 755 {plan.script}\n"
        )


INITIAL = """
    def test_samples_present():
        for path in SAMPLES:
            assert os.path.isfile(path)


    def test_script_absent():
        assert not os.path.exists(SCRIPT)
"""
