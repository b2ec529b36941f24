"""Decontamination against two benchmark sets written here (one Harbor, one Terminal-Bench 1.x):
copies of their tasks (verbatim, reworded, or only their environment kept) are found and name
the task and the field copied; the procedural generator's tasks are not; bad settings, broken
tasks and the fingerprint cache behave as documented."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from endless_assets.decontamination import (
    Decontaminator,
    Hit,
    References,
    ReferenceSource,
    Thresholds,
    field_texts,
    normalise,
    parse_references,
    read_references,
    rejection_reason,
    strongest,
)
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.interop.import_files import DEFAULT_MAX_BINARY_BYTES
from endless_assets.interop.imports import draft_from_harbor, read_task_dir
from endless_assets.models import Task, task_seed
from endless_assets.sandbox.grading.bundle import Verifier, pack, pytest_source

APT = (
    "RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip "
    "&& rm -rf /var/lib/apt/lists/*\n"
)
HARBOR_TEST_SH = (
    "#!/bin/bash\napt-get update\napt-get install -y curl\n"
    "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\nsource $HOME/.local/bin/env\n"
    "uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n"
    "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; "
    "else echo 0 > /logs/verifier/reward.txt; fi\n"
)
TB_COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
"""
TB_RUN_TESTS = """#!/bin/bash

# Install curl
apt-get update
apt-get install -y curl

# Install uv
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env

# Check if we're in a valid working directory
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile."
    exit 1
fi

uv init
uv add pytest==8.4.1
uv run pytest $TEST_DIR/test_outputs.py -rA
"""
TB_BASE = "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nWORKDIR /app\n"

# name -> (instruction, Dockerfile lines after the base, fixtures, test, solution)
HARBOR = {
    "log-status-summary": (
        "The web server in this container has been writing its access log to /app/access.log. "
        "Summarise it: write /app/summary.json holding an object that maps every HTTP status "
        "code seen in the log to the number of requests that received it, and the key "
        "`busiest_path` giving the request path that was asked for most often.",
        "COPY access.log /app/access.log\n",
        {
            "access.log": '10.0.0.7 - - [12/Mar/2025:09:14:02 +0000] "GET /catalog HTTP/1.1" 200\n'
            '10.0.0.9 - - [12/Mar/2025:09:14:05 +0000] "POST /basket/add HTTP/1.1" 302\n'
            '10.0.0.7 - - [12/Mar/2025:09:15:44 +0000] "GET /catalog/lamps HTTP/1.1" 404\n'
            '10.0.0.3 - - [12/Mar/2025:09:16:10 +0000] "GET /catalog HTTP/1.1" 200\n',
        },
        "import json\n\n\ndef test_status_counts():\n"
        "    summary = json.load(open('/app/summary.json'))\n"
        "    assert summary['200'] == 2 and summary['302'] == 1 and summary['404'] == 1\n\n\n"
        "def test_busiest_path():\n"
        "    assert json.load(open('/app/summary.json'))['busiest_path'] == '/catalog'\n",
        "python3 - <<'EOF'\nimport collections, json, re\ncodes, paths = collections.Counter(), "
        "collections.Counter()\nfor line in open('/app/access.log'):\n"
        '    m = re.search(r\'"\\w+ (\\S+) [^"]+" (\\d+)\', line)\n'
        "    paths[m.group(1)] += 1; codes[m.group(2)] += 1\nout = dict(codes)\n"
        "out['busiest_path'] = paths.most_common(1)[0][0]\n"
        "json.dump(out, open('/app/summary.json', 'w'))\nEOF\n",
    ),
    "csv-merge-inventory": (
        "Two exports from the warehouse system sit in /app: products.csv (sku, name) and "
        "stock.csv (sku, quantity). Join them on the sku column and write /app/inventory.csv "
        "with the header sku,name,quantity, one row per product, sorted by sku. Products that "
        "have no stock row get quantity 0.",
        "COPY products.csv stock.csv /app/\n",
        {
            "products.csv": "sku,name\nA-100,brass hinge\nB-220,oak shelf bracket\n"
            "C-310,walnut drawer knob\n",
            "stock.csv": "sku,quantity\nB-220,14\nA-100,3\n",
        },
        "import csv\n\n\ndef test_inventory_rows():\n"
        "    rows = list(csv.DictReader(open('/app/inventory.csv')))\n"
        "    assert [r['sku'] for r in rows] == ['A-100', 'B-220', 'C-310']\n"
        "    assert [r['quantity'] for r in rows] == ['3', '14', '0']\n"
        "    assert rows[2]['name'] == 'walnut drawer knob'\n",
        "python3 - <<'EOF'\nimport csv\nstock = {r['sku']: r['quantity'] for r in "
        "csv.DictReader(open('/app/stock.csv'))}\nwith open('/app/inventory.csv', 'w') as out:\n"
        "    out.write('sku,name,quantity\\n')\n    for r in sorted(csv.DictReader("
        "open('/app/products.csv')), key=lambda r: r['sku']):\n"
        "        out.write(f\"{r['sku']},{r['name']},{stock.get(r['sku'], '0')}\\n\")\nEOF\n",
    ),
    "fix-fibonacci-module": (
        "The module /app/fibseq.py is supposed to return the first n Fibonacci numbers, but "
        "callers report that the sequence it returns is one element short and starts at the "
        "wrong value. Fix the function `first_fibonacci(n)` so that first_fibonacci(6) returns "
        "[0, 1, 1, 2, 3, 5]. Do not rename the module or the function.",
        "COPY fibseq.py /app/fibseq.py\n",
        {
            "fibseq.py": "def first_fibonacci(n):\n    seq = [1, 1]\n"
            "    while len(seq) < n - 1:\n        seq.append(seq[-1] + seq[-2])\n"
            "    return seq[:n - 1]\n",
        },
        "import sys\n\nsys.path.insert(0, '/app')\n\n\ndef test_first_six():\n"
        "    from fibseq import first_fibonacci\n\n"
        "    assert first_fibonacci(6) == [0, 1, 1, 2, 3, 5]\n\n\ndef test_edge_cases():\n"
        "    from fibseq import first_fibonacci\n\n"
        "    assert first_fibonacci(1) == [0] and first_fibonacci(2) == [0, 1]\n",
        "cat > /app/fibseq.py <<'EOF'\ndef first_fibonacci(n):\n    seq = [0, 1]\n"
        "    while len(seq) < n:\n        seq.append(seq[-1] + seq[-2])\n    return seq[:n]\nEOF\n",
    ),
    "sqlite-top-customers": (
        "A SQLite database of orders lives at /app/shop.db (tables customers and orders). "
        "Find the three customers who spent the most in total across all their orders and "
        "write their names to /app/top3.txt, one per line, biggest spender first.",
        "COPY make_db.py /tmp/make_db.py\nRUN python3 /tmp/make_db.py && rm /tmp/make_db.py\n",
        {
            "make_db.py": "import sqlite3\ndb = sqlite3.connect('/app/shop.db')\n"
            "db.execute('create table customers (id integer primary key, name text)')\n"
            "db.execute('create table orders (customer integer, total real)')\n"
            "db.executemany('insert into customers values (?, ?)', [(1, 'Ines Duarte'), "
            "(2, 'Tomas Weber'), (3, 'Hana Sato'), (4, 'Olu Bello')])\n"
            "db.executemany('insert into orders values (?, ?)', [(1, 40.5), (2, 99.0), (3, 12.0),"
            " (1, 70.0), (4, 55.25), (3, 3.5)])\ndb.commit()\n",
        },
        "def test_top_three():\n    names = open('/app/top3.txt').read().split('\\n')\n"
        "    assert names[:3] == ['Ines Duarte', 'Tomas Weber', 'Olu Bello']\n",
        'sqlite3 /app/shop.db "select c.name from customers c join orders o on o.customer = c.id '
        'group by c.id order by sum(o.total) desc limit 3" > /app/top3.txt\n',
    ),
    "extract-archive-checksums": (
        "A release archive was left at /app/release.tar.gz. Unpack it into /app/release and "
        "write /app/SHA256SUMS listing the sha256 digest of every regular file inside, in the "
        "format sha256sum produces, with paths relative to /app/release, sorted by path.",
        "RUN mkdir -p /tmp/r/bin /tmp/r/doc && echo 'orbital launcher v2' > /tmp/r/bin/launch "
        "&& echo 'see the orbital manual' > /tmp/r/doc/README && tar -C /tmp/r -czf "
        "/app/release.tar.gz . && rm -rf /tmp/r\n",
        {},
        "import hashlib, os\n\n\ndef test_sums_match_files():\n"
        "    lines = open('/app/SHA256SUMS').read().splitlines()\n"
        "    paths = [line.split(maxsplit=1)[1].lstrip('*') for line in lines]\n"
        "    assert paths == sorted(paths) and 'bin/launch' in ' '.join(paths)\n"
        "    for line in lines:\n        digest, path = line.split(maxsplit=1)\n"
        "        data = open(os.path.join('/app/release', path.lstrip('*')), 'rb').read()\n"
        "        assert hashlib.sha256(data).hexdigest() == digest\n",
        "mkdir -p /app/release && tar -C /app/release -xzf /app/release.tar.gz\n"
        "cd /app/release && find . -type f | sed 's|^./||' | sort | xargs sha256sum "
        "> /app/SHA256SUMS\n",
    ),
    "nginx-port-config": (
        "The nginx site configuration at /app/nginx/sites/storefront.conf is listening on the "
        "wrong port and points at a document root that does not exist. Make it listen on port "
        "8081 and serve files from /app/www/storefront, leaving every other directive exactly "
        "as it is.",
        "COPY nginx /app/nginx\nRUN mkdir -p /app/www/storefront\n",
        {
            "nginx/sites/storefront.conf": "server {\n    listen 8008;\n"
            "    server_name storefront.local;\n    root /srv/missing/storefront;\n"
            "    gzip on;\n    location /assets/ { expires 7d; }\n}\n",
        },
        "def test_port_and_root():\n"
        "    conf = open('/app/nginx/sites/storefront.conf').read()\n"
        "    assert 'listen 8081;' in conf and 'root /app/www/storefront;' in conf\n"
        "    assert 'location /assets/ { expires 7d; }' in conf and 'gzip on;' in conf\n",
        "sed -i -e 's/listen 8008;/listen 8081;/' -e 's|root /srv/missing/storefront;|"
        "root /app/www/storefront;|' /app/nginx/sites/storefront.conf\n",
    ),
}
TERMINAL_BENCH = {
    "word-frequency": (
        "Count how often each word occurs in /app/corpus.txt (case-insensitive, words are "
        "runs of letters) and write the ten most frequent to /app/freq.txt as `word count` "
        "lines, most frequent first, ties broken alphabetically.",
        "COPY corpus.txt /app/corpus.txt\n",
        {
            "corpus.txt": "The heron waits by the reed bed. A heron, patient as stone, waits "
            "for the silver fish that the river brings down from the hills.\n",
        },
        "def test_top_words():\n    lines = open('/app/freq.txt').read().splitlines()\n"
        "    assert lines[0] == 'the 4'\n    assert lines[1:3] == ['heron 2', 'waits 2']\n"
        "    assert len(lines) == 10\n",
        "#!/bin/bash\ntr -cs 'A-Za-z' '\\n' < /app/corpus.txt | tr 'A-Z' 'a-z' | grep -v '^$' "
        "| sort | uniq -c | sort -k1,1nr -k2,2 | head -10 | awk '{print $2, $1}' "
        "> /app/freq.txt\n",
    ),
    "json-user-filter": (
        "The file /app/users.json holds a list of user records. Write the email addresses of "
        "the users whose `active` flag is true and whose `role` is `editor` to /app/editors.txt, "
        "one per line, sorted alphabetically.",
        "COPY users.json /app/users.json\nRUN pip install --no-cache-dir jq==1.6.0\n",
        {
            "users.json": '[{"email": "mara@quill.example", "active": true, "role": "editor"}, '
            '{"email": "dev@quill.example", "active": false, "role": "editor"}, '
            '{"email": "abe@quill.example", "active": true, "role": "editor"}, '
            '{"email": "zed@quill.example", "active": true, "role": "viewer"}]\n',
        },
        "def test_editor_emails():\n"
        "    emails = open('/app/editors.txt').read().split()\n"
        "    assert emails == ['abe@quill.example', 'mara@quill.example']\n",
        "#!/bin/bash\npython3 -c \"import json; print('\\n'.join(sorted(u['email'] for u in "
        "json.load(open('/app/users.json')) if u['active'] and u['role'] == 'editor')))\" "
        "> /app/editors.txt\n",
    ),
    "cron-backup-entry": (
        "Add a cron entry that runs /app/backup.sh every day at 02:30 as root.",
        "RUN apt-get update && apt-get install -y cron && printf '#!/bin/sh\\ntar czf "
        "/var/backups/app-$(date +%F).tgz /app/data\\n' > /app/backup.sh && chmod +x "
        "/app/backup.sh\n",
        {},
        "import subprocess\n\n\ndef test_crontab_line():\n"
        "    out = subprocess.run(['crontab', '-l', '-u', 'root'], capture_output=True, "
        "text=True).stdout\n    assert '30 2 * * * /app/backup.sh' in out\n",
        "#!/bin/bash\n(crontab -l 2>/dev/null; echo '30 2 * * * /app/backup.sh') | crontab -\n",
    ),
    "disk-usage-report": (
        "Several project directories under /app/projects have grown large. Report the three "
        "largest of them by total size on disk to /app/largest.txt, one directory name per "
        "line, largest first, without following symbolic links.",
        "RUN mkdir -p /app/projects/atlas /app/projects/borealis /app/projects/cygnus "
        "/app/projects/draco && head -c 300000 /dev/zero > /app/projects/borealis/blob && "
        "head -c 200000 /dev/zero > /app/projects/draco/blob && head -c 100000 /dev/zero > "
        "/app/projects/atlas/blob\n",
        {},
        "def test_largest_three():\n"
        "    assert open('/app/largest.txt').read().split() == "
        "['borealis', 'draco', 'atlas']\n",
        "#!/bin/bash\ndu -s --block-size=1 /app/projects/*/ | sort -k1,1nr | head -3 | "
        "awk '{print $2}' | xargs -n1 basename > /app/largest.txt\n",
    ),
}


def write(root: Path, rel: str, content: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def write_harbor(root: Path, name: str) -> None:
    instruction, lines, fixtures, test, solve = HARBOR[name]
    task = root / name
    write(task, "instruction.md", instruction + "\n")
    write(task, "task.toml", 'version = "1.0"\n\n[metadata]\ndifficulty = "medium"\n')
    write(task, "environment/Dockerfile", "FROM ubuntu:24.04\n" + APT + "WORKDIR /app\n" + lines)
    for rel, text in fixtures.items():
        write(task, f"environment/{rel}", text)
    write(task, "tests/test.sh", HARBOR_TEST_SH)
    write(task, "tests/test_outputs.py", test)
    write(task, "solution/solve.sh", "#!/bin/bash\n" + solve)


def write_terminal_bench(root: Path, name: str) -> None:
    instruction, lines, fixtures, test, solve = TERMINAL_BENCH[name]
    task = root / name
    indented = instruction.replace("\n", "\n  ")
    write(
        task, "task.yaml", f"instruction: |-\n  {indented}\nauthor_name: Bench\ndifficulty: easy\n"
    )
    write(task, "Dockerfile", TB_BASE + lines)
    write(task, "docker-compose.yaml", TB_COMPOSE)
    write(task, "run-tests.sh", TB_RUN_TESTS)
    write(task, "solution.sh", solve)
    write(task, "tests/test_outputs.py", test)
    for rel, text in fixtures.items():
        write(task, rel, text)


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("benchmarks")
    for name in HARBOR:
        write_harbor(root / "harbor-bench", name)
    for name in TERMINAL_BENCH:
        write_terminal_bench(root / "tb-bench", name)
    return root


@pytest.fixture(scope="module")
def references(sets: Path) -> References:
    sources = parse_references(f"hb={sets / 'harbor-bench'},{sets / 'tb-bench'}")
    return read_references(sources)


@pytest.fixture(scope="module")
def decontaminator(references: References) -> Decontaminator:
    return Decontaminator(references.tasks)


def ours(index: int, **fields) -> Task:
    """A task of ours with the given fields (the rest: an empty environment)."""
    values = {
        "batch": "copies-1",
        "index": index,
        "seed": task_seed("copies-1", index),
        "category": "copied",
        "complexity": "easy",
        "scenario": "",
        "generator": "copying",
        "dockerfile": "FROM endless-base:latest\nWORKDIR /home/user\n",
    }
    return Task(**(values | fields))


SYNONYMS = {"the": "this", "a": "one", "to": "into", "of": "from", "and": "plus", "in": "inside"}


def reworded(instruction: str) -> str:
    """The instruction paraphrased: sentences in reverse order, small words swapped."""
    sentences = re.split(r"(?<=[.!?])\s+", instruction.strip())
    words = " ".join(reversed(sentences)).split(" ")
    return " ".join(SYNONYMS.get(w.lower(), w) for w in words)


def copies(sets: Path) -> list[tuple[str, str, Task, set[str]]]:
    """(how, the task copied, the copy, the fields that may give it away): the three ways a
    generator copies a benchmark task."""
    gen = ProceduralGenerator("endless-base:latest")
    made = []
    directories = sorted((sets / "harbor-bench").iterdir()) + sorted((sets / "tb-bench").iterdir())
    for i, directory in enumerate(directories):
        source = read_task_dir(directory, "auto", DEFAULT_MAX_BINARY_BYTES)
        verbatim, _ = draft_from_harbor(source, "copies-1", 3 * i, {})
        made.append(("verbatim", directory.name, verbatim, {"instruction", "completion_test"}))
        paraphrase = ours(
            3 * i + 1,
            instruction=reworded(source.instruction),
            completion_test=pytest_source(source.completion_test),
            reference_solution=source.reference_solution,
        )
        made.append(("reworded", directory.name, paraphrase, {"completion_test"}))
        other = gen.describe("copies-1", 3 * i + 2, 1000 + i)[0]
        environment = other.model_copy(
            update={"dockerfile": source.dockerfile, "context_files": source.context_files}
        )
        made.append(("environment", directory.name, environment, {"dockerfile", "context_files"}))
    return made


def test_copies_of_benchmark_tasks_are_found_naming_the_task_and_the_field(
    sets: Path, decontaminator: Decontaminator
) -> None:
    made = copies(sets)
    found, missed = [], []
    for how, name, task, fields in made:
        hits = decontaminator.check(task)
        named = [h for h in hits if h.reference_task == name and h.field in fields]
        (found if named else missed).append((how, name, hits[:3]))
        if hits:
            assert strongest(hits).reference_task == name, (how, name, hits[:3])
    assert len(made) == 30
    assert len(found) >= 0.95 * len(made), missed


def test_the_procedural_generators_tasks_are_not_flagged(decontaminator: Decontaminator) -> None:
    gen = ProceduralGenerator("endless-base:latest")
    drafts = [gen.describe("unrelated-1", i, i)[0] for i in range(5 * len(ALL_FAMILIES))]
    assert {d.family for d in drafts} == {f.name for f in ALL_FAMILIES}
    flagged = {d.family: hits[:3] for d in drafts if (hits := decontaminator.check(d))}
    assert flagged == {}


def test_a_test_runner_every_benchmark_task_shares_does_not_make_a_task_contaminated(
    decontaminator: Decontaminator,
) -> None:
    own = "def test_report():\n    assert open('/home/user/report.txt').read() == 'ok\\n'\n"
    runner = pack(Verifier(test=own, script="test.sh", files={"test.sh": HARBOR_TEST_SH}))
    task = ours(0, instruction="Write ok to report.txt in your home directory.")
    assert decontaminator.check(task.model_copy(update={"completion_test": runner})) == []
    tb = ours(1, instruction="Write ok to report.txt.", dockerfile=TB_BASE)
    assert decontaminator.check(tb) == []


def test_a_short_instruction_reworded_by_a_word_is_found_by_its_fuzzy_ratio(
    decontaminator: Decontaminator,
) -> None:
    task = ours(0, instruction="Add a cron job that runs /app/backup.sh each day at 02:30 as root.")
    hits = decontaminator.check(task)
    assert [(h.reference_task, h.field, h.measure) for h in hits] == [
        ("cron-backup-entry", "instruction", "fuzzy")
    ]
    assert 0.8 <= hits[0].value < 1


def test_a_benchmark_sentence_inside_a_new_instruction_is_found_by_its_n_grams(
    decontaminator: Decontaminator,
) -> None:
    copied = HARBOR["csv-merge-inventory"][0].split(". ")[1]
    task = ours(0, instruction=f"Our billing team needs a report. {copied}. Then email it.")
    hits = decontaminator.check(task)
    assert {(h.reference_task, h.field) for h in hits} == {("csv-merge-inventory", "instruction")}
    assert {h.measure for h in hits} == {"ngram13", "ngram8"}


def test_home_directories_hex_tokens_and_numbers_are_normalised_away() -> None:
    ours_text = "Copy /home/user/data_2.csv to ~/out (id 3f2a9c01deadbeef, port 8080)"
    theirs = "COPY /root/data_7.csv to $HOME/out (ID 123e4567-e89b-12d3-a456-426614174000, port 22)"
    assert normalise(ours_text) == normalise(theirs)
    assert normalise("/app/data.csv") != normalise("/home/user/data.csv")


def test_a_tests_directory_is_compared_file_by_file_the_script_included(sets: Path) -> None:
    task = read_task_dir(sets / "tb-bench" / "word-frequency", "auto", DEFAULT_MAX_BINARY_BYTES)
    tests = field_texts(task)["completion_test"]
    assert any("uv run pytest" in text for text in tests)
    assert any("def test_top_words" in text for text in tests)
    assert field_texts(task)["context_files"] == [TERMINAL_BENCH["word-frequency"][2]["corpus.txt"]]


def test_the_rejection_reason_names_the_strongest_hit_with_two_decimals() -> None:
    hits = [
        Hit("tb2", "fix-git", "instruction", "ngram8", 0.31),
        Hit("tb2", "fix-git", "completion_test", "ngram13", 0.8712),
    ]
    assert strongest(hits) == hits[1]
    reason = "contaminated: tb2/fix-git (completion_test, ngram13 0.87)"
    assert rejection_reason(hits) == reason
    tie = [Hit("tb", "a", "instruction", "fuzzy", 0.5), Hit("tb", "a", "dockerfile", "ngram8", 0.5)]
    assert rejection_reason(tie) == "contaminated: tb/a (dockerfile, ngram8 0.50)"
    with pytest.raises(ValueError, match="not contaminated"):
        rejection_reason([])


@pytest.mark.parametrize(
    ("value", "wrong"),
    [
        ("=/tmp", "has no name before its '='"),
        ("tb2=", "has no path after its '='"),
        ("/", "has no name (its path has no base name"),
        ("tb2=/tmp,tb2=/var", "the name 'tb2' is given twice"),
        ("tb 2=/tmp", "may hold only letters"),
        ("tb2=/no/such/directory", "/no/such/directory does not exist"),
        ("tb2=/etc/hostname", "/etc/hostname is not a directory"),
    ],
)
def test_a_bad_setting_value_is_one_line_naming_what_is_wrong(value: str, wrong: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_references(value)
    assert wrong in str(raised.value) and "\n" not in str(raised.value)


def test_bare_paths_are_named_by_their_base_name(sets: Path) -> None:
    parsed = parse_references(f" {sets / 'tb-bench'} , hb={sets / 'harbor-bench'}/ ,")
    assert parsed == (
        ReferenceSource("tb-bench", sets / "tb-bench"),
        ReferenceSource("hb", sets / "harbor-bench"),
    )


def test_an_unreadable_reference_task_is_reported_once_and_the_rest_are_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root, cache = tmp_path / "mixed", tmp_path / "cache"
    for name in ("log-status-summary", "csv-merge-inventory", "nginx-port-config"):
        write_harbor(root, name)
    two = "services:\n  web:\n    build: .\n    privileged: true\n  cache:\n    image: redis:7\n"
    write(root, "nginx-port-config/environment/docker-compose.yaml", two)
    write(root, "no-instruction/task.toml", 'version = "1.0"\n')
    write(root, "no-instruction/environment/Dockerfile", "FROM ubuntu:24.04\n")
    (root / "notes").mkdir()  # not a task directory: skipped
    with caplog.at_level(logging.WARNING):
        read = read_references([ReferenceSource("mixed", root)], cache)
    assert [str(u) for u in read.unreadable] == ["mixed/no-instruction (no instruction.md)"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "mixed/no-instruction" in warnings[0].getMessage()
    names = ["csv-merge-inventory", "log-status-summary", "nginx-port-config"]
    assert sorted(t.name for t in read.tasks) == names
    stats = read.stats
    assert (stats.parsed, stats.skipped, stats.unreadable, stats.refused) == (3, 1, 1, 1)
    # A multi-container task cannot be imported, but it is compared all the same.
    assert [u.task for u in read.refused] == ["nginx-port-config"]
    assert "service web: `privileged` is refused" in read.refused[0].reason
    again = read_references([ReferenceSource("mixed", root)], cache)
    assert (again.refused, again.stats.cached) == (read.refused, 3)
    instruction, _, _, test, solve = HARBOR["nginx-port-config"]
    copy = ours(0, instruction=instruction, completion_test=test, reference_solution=solve)
    assert {h.field for h in Decontaminator(read.tasks).check(copy)} == {
        "instruction",
        "completion_test",
        "reference_solution",
    }


def test_the_fingerprint_cache_is_used_for_unchanged_tasks_and_not_for_changed_ones(
    sets: Path, tmp_path: Path, decontaminator: Decontaminator
) -> None:
    sources = [ReferenceSource("tb", sets / "tb-bench")]
    cache = tmp_path / "cache" / "decontamination"
    first = read_references(sources, cache)
    assert (first.stats.parsed, first.stats.cached) == (4, 0)
    second = read_references(sources, cache)
    assert (second.stats.parsed, second.stats.cached) == (0, 4)
    for fresh, cached in zip(first.tasks, second.tasks, strict=True):
        assert fresh.words.texts == cached.words.texts
        assert {f: [w.tolist() for w in ws] for f, ws in fresh.words.files.items()} == {
            f: [w.tolist() for w in ws] for f, ws in cached.words.files.items()
        }
    changed = tmp_path / "tb-changed"
    for name in TERMINAL_BENCH:
        write_terminal_bench(changed, name)
    moved = [ReferenceSource("tb", changed)]
    assert read_references(moved, cache).stats.cached == 4  # same contents, elsewhere
    with (changed / "word-frequency" / "tests" / "test_outputs.py").open("a") as fh:
        fh.write("\n\ndef test_more():\n    assert True\n")
    third = read_references(moved, cache)
    assert (third.stats.parsed, third.stats.cached) == (1, 3)


def test_the_package_imports_without_dagster() -> None:
    code = "import sys, endless_assets.decontamination; assert 'dagster' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_thresholds_refuse_values_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="fuzzy_fields names tests, not a field"):
        Thresholds(fuzzy_fields=("tests",))
    with pytest.raises(ValueError, match="ngram_sizes"):
        Thresholds(ngram_sizes=())
