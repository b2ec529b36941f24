"""Small task families for tests: one good, and one deliberately broken per stage."""

from __future__ import annotations

import random

from endless_assets.generation.procedural.base import Family, FamilyTask

INITIAL = "import os\n\ndef test_input():\n    assert os.path.isfile('/home/user/in.txt')\n"
COMPLETION = (
    "def test_output():\n"
    "    with open('/home/user/out.txt') as fh:\n"
    "        assert fh.read().strip() == 'HELLO {word}'\n"
)


def good_task(rng: random.Random) -> FamilyTask:
    word = rng.choice(["alpha", "beta", "gamma", "delta"]) + str(rng.randint(0, 999))
    return FamilyTask(
        instruction=f"Upper-case /home/user/in.txt into /home/user/out.txt ({word}).",
        truth={"word": word},
        files={"in.txt": f"hello {word}\n"},
        initial_test=INITIAL,
        completion_test=COMPLETION.format(word=word.upper()),
        solution="tr a-z A-Z < /home/user/in.txt > /home/user/out.txt\n",
        complexity="easy",
        scenario="tester",
    )


class Good(Family):
    name = "test_good"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        return good_task(rng)


class BuildFails(Family):
    name = "test_build_fails"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.setup_script = "import sys\nsys.exit('setup exploded on purpose')\n"
        return task


class InitialFails(Family):
    name = "test_initial_fails"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.initial_test = "def test_input():\n    assert open('/home/user/missing.txt')\n"
        return task


class PassesOnInitial(Family):
    name = "test_passes_on_initial"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.completion_test = "import os\n\ndef test_x():\n    assert os.path.isdir('/home')\n"
        return task


class ReferenceFails(Family):
    name = "test_reference_fails"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.solution = "echo wrong > /home/user/out.txt\n"
        return task


class BrokenCompletionTest(Family):
    name = "test_broken_completion"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.completion_test = "def test_output(:\n    pass\n"
        return task


class PassesWithNoop(Family):
    """A completion test with a side effect: its first run writes the expected output (and
    fails), so every later run passes. Only the do-nothing episode's check catches it."""

    name = "test_passes_with_noop"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        expected = task.truth["word"].upper()
        task.completion_test = (
            "import os\n\n"
            "def test_output():\n"
            "    path = '/home/user/out.txt'\n"
            "    if not os.path.exists(path):\n"
            f"        open(path, 'w').write('HELLO {expected}')\n"
            "        raise AssertionError('no output yet')\n"
            f"    assert open(path).read().strip() == 'HELLO {expected}'\n"
        )
        return task


class ForkBombs(Family):
    """Its setup step (a RUN step of the build) forks until it cannot: the build's process limit
    must stop it, failing this task's build only."""

    name = "test_fork_bombs"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.setup_script = (
            "import os, time\n"
            "while True:\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(120)\n"
            "        os._exit(0)\n"
        )
        return task


class MemoryBombs(Family):
    """Its setup step allocates without bound: the build's memory limit must stop it."""

    name = "test_memory_bombs"
    category = "testing"

    def make(self, rng: random.Random) -> FamilyTask:
        task = good_task(rng)
        task.setup_script = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 2**20))\n"
        return task
