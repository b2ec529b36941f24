"""What decontamination costs: the index over N synthetic reference tasks (built once per run),
then the check of our tasks against it, in tasks per second, and the process's peak memory.

Reference tasks are synthetic benchmark tasks: random words (Zipf-distributed over a 20,000-word
vocabulary) in every field at sizes like Terminal-Bench's (an instruction of ~120 words, a test
of ~300, a solution of ~60, a Dockerfile of ~30, up to six fixtures of up to 400), with the
boilerplate a benchmark's tasks share (one test runner, one apt-get line). The tasks checked
are the procedural generator's (nothing to find) and copies of reference tasks (verbatim, or
only their Dockerfile and fixtures kept). Each N runs in its own process, so that its peak
memory is its own. With --disk, the N reference tasks are also written as Harbor directories
and read twice through the fingerprint cache (cold, then warm).

    .venv/bin/python bench/decontamination.py [--refs 1000 10000] [--tasks 2000] [--disk]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from endless_assets.decontamination import (
    Decontaminator,
    ReferenceSource,
    read_references,
    reference_task,
)
from endless_assets.generation.procedural import ProceduralGenerator

RUNNER = (
    "#!/bin/bash\napt-get update\napt-get install -y curl\n"
    "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\nsource $HOME/.local/bin/env\n"
    "uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n"
)
APT = "RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip\n"


@dataclass
class Synthetic:
    """A benchmark task of random words (what decontamination reads of a task)."""

    instruction: str
    completion_test: str
    reference_solution: str
    dockerfile: str
    context_files: dict[str, str] = field(default_factory=dict)


class Words:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        lengths = self.rng.integers(3, 11, 20_000)
        self.vocabulary = ["".join(self.rng.choice(letters, n)) for n in lengths]

    def text(self, mean: int) -> str:
        count = max(8, int(self.rng.normal(mean, mean / 4)))
        ranks = np.minimum(self.rng.zipf(1.15, count), len(self.vocabulary)) - 1
        words = [self.vocabulary[r] for r in ranks]
        return "\n".join(" ".join(words[i : i + 10]) for i in range(0, len(words), 10))

    def task(self) -> Synthetic:
        fixtures = {f"data/f{i}.txt": self.text(200) for i in range(self.rng.integers(0, 7))}
        return Synthetic(
            instruction=self.text(120),
            completion_test="import os\n\n" + self.text(300),
            reference_solution=self.text(60),
            dockerfile="FROM ubuntu:24.04\n" + APT + "WORKDIR /app\n" + self.text(20),
            context_files=fixtures,
        )


def references(count: int) -> list[Synthetic]:
    words = Words(count)
    return [words.task() for _ in range(count)]


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rate(decontaminator: Decontaminator, tasks: list) -> tuple[float, int]:
    start = time.perf_counter()
    flagged = sum(1 for task in tasks if decontaminator.check(task))
    return len(tasks) / (time.perf_counter() - start), flagged


def write_harbor(root: Path, tasks: list[Synthetic]) -> None:
    for i, task in enumerate(tasks):
        directory = root / f"task-{i:05d}"
        for rel, text in {
            "instruction.md": task.instruction,
            "environment/Dockerfile": task.dockerfile,
            "tests/test.sh": RUNNER,
            "tests/test_outputs.py": task.completion_test,
            "solution/solve.sh": task.reference_solution,
            **{f"environment/{k}": v for k, v in task.context_files.items()},
        }.items():
            (directory / rel).parent.mkdir(parents=True, exist_ok=True)
            (directory / rel).write_text(text)


def disk(tasks: list[Synthetic]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_harbor(root / "bench", tasks)
        sources = [ReferenceSource("bench", root / "bench")]
        for label in ("cold", "warm"):
            start = time.perf_counter()
            read = read_references(sources, root / "cache")
            seconds = time.perf_counter() - start
            print(
                f"  read from disk ({label} cache): {seconds:.1f} s "
                f"(parsed {read.stats.parsed}, cached {read.stats.cached})"
            )


def child(count: int, tasks: int, with_disk: bool) -> None:
    base = rss_mib()
    made = references(count)
    start = time.perf_counter()
    refs = [reference_task("bench", f"task-{i:05d}", t) for i, t in enumerate(made)]
    words_seconds = time.perf_counter() - start
    before_index = rss_mib()
    start = time.perf_counter()
    decontaminator = Decontaminator(refs)
    build_seconds = time.perf_counter() - start
    after_index = rss_mib()
    gen = ProceduralGenerator("endless-base:latest")
    ours = [gen.describe("bench", i, i)[0] for i in range(tasks)]
    picked = made[:: max(1, count // 200)][:200]
    verbatim = list(picked)
    environment = [
        ours[i].model_copy(update={"dockerfile": t.dockerfile, "context_files": t.context_files})
        for i, t in enumerate(picked)
    ]
    print(f"N = {count:,} reference tasks  {decontaminator.index.summary()}")
    print(f"  reference words: {words_seconds:.1f} s; index build: {build_seconds:.1f} s")
    for label, batch in (
        ("procedural tasks", ours),
        ("verbatim copies", verbatim),
        ("environment-only copies", environment),
    ):
        per_second, flagged = rate(decontaminator, batch)
        print(f"  check, {label}: {per_second:,.0f} tasks/s ({flagged}/{len(batch)} flagged)")
    print(
        f"  peak RSS: {rss_mib():,.0f} MiB (after imports {base:,.0f}, reference words "
        f"{before_index - base:,.0f}, index {after_index - before_index:,.0f})"
    )
    if with_disk:
        disk(made)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--tasks", type=int, default=2000, help="procedural tasks checked")
    parser.add_argument("--disk", action="store_true", help="also read them from disk, twice")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.refs[0], args.tasks, args.disk)
        return
    for count in args.refs:
        command = [sys.executable, __file__, "--child", "--refs", str(count)]
        command += ["--tasks", str(args.tasks)] + (["--disk"] if args.disk else [])
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
