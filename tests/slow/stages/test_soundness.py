"""The soundness stage on real Docker: a sound task passes every probe; weak, hackable and flaky
completion tests are caught, each by the probe meant for it; engine failures are harness errors.

Every task here is written by hand on the base image: sort a list of names into a private file.
Only its completion test changes from one test to the next.
"""

from __future__ import annotations

import json

import pytest

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.models import Task
from endless_assets.stages.environment import build_environment
from endless_assets.stages.soundness.probes import named_paths
from endless_assets.stages.soundness.script_steps import is_setup, split_steps
from endless_assets.stages.soundness.stage import ProbeOutcome, SoundnessOutcome, check_soundness

NAMES = "mallory\nalice\ntrent\nbob\n"
INSTRUCTION = (
    "Sort the names in /home/user/data/names.txt alphabetically into /home/user/out/sorted.txt, "
    "one per line, readable and writable by its owner only (mode 600). Leave the list as it is."
)
REFERENCE = """\
mkdir -p /home/user/out
sort /home/user/data/names.txt > /home/user/out/sorted.txt
chmod 600 /home/user/out/sorted.txt
"""
HEAD = 'import os\n\nOUT = "/home/user/out/sorted.txt"\nSRC = "/home/user/data/names.txt"\n\n\n'
SOUND = (
    HEAD
    + """def test_sorted():
    with open(OUT) as fh:
        assert fh.read() == "alice\\nbob\\nmallory\\ntrent\\n"


def test_private():
    assert os.stat(OUT).st_mode & 0o777 == 0o600


def test_list_untouched():
    with open(SRC) as fh:
        assert fh.read() == "mallory\\nalice\\ntrent\\nbob\\n"
"""
)
# Checks the content but not the mode: not hackable, but the chmod step is never tested.
CONTENT_ONLY = (
    SOUND.split("def test_private")[0]
    + "def test_list_untouched"
    + SOUND.split("def test_list_untouched")[1]
)
EXISTS_AND_NOT_EMPTY = HEAD + "def test_written():\n    assert os.path.getsize(OUT) > 0\n"
DIRECTORY_EXISTS = HEAD + 'def test_folder():\n    assert os.path.isdir("/home/user/out")\n'
# Fails every other time it runs in a container (a counter outside the agent's files, which
# the grader's test process may write): a deterministic stand-in for a test that fails at
# random half the time. Lanes run their two controls in alternating order, so the reference
# is a container's first verdict in some lanes and its second in others.
ALTERNATING = (
    SOUND
    + """

def test_luck():
    path = "/etc/endless-test-verdicts"
    count = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as fh:
        fh.write(str(count))
    assert count % 2 == 1
"""
)


def _task(
    sandbox,
    completion_test: str,
    *,
    reference: str = REFERENCE,
    extra: str = "",
    files: dict[str, str] | None = None,
):
    files = files or {"home/data/names.txt": NAMES}
    dockerfile = f"FROM {sandbox.base.tag}\nCOPY --chown=user:user home/ /home/user/\n{extra}"
    build = sandbox.build(dockerfile, files, network=False)
    assert build.ok, build.log
    task = Task(
        batch="test-soundness",
        index=0,
        seed=0,
        category="text processing",
        complexity="easy",
        scenario="test",
        instruction=INSTRUCTION,
        truth={"source": "/home/user/data/names.txt", "output": "/home/user/out/sorted.txt"},
        reference_solution=reference,
        dockerfile=dockerfile,
        context_files=files,
        initial_test="def test_nothing_yet():\n    pass\n",
        completion_test=completion_test,
        generator="test",
    )
    return task, build.tag


def _shortcuts(outcome) -> dict[str, bool | None]:
    return {p.name: p.passed for p in outcome.probes if p.kind == "shortcut"}


def test_a_sound_task_passes_every_probe_with_full_test_strength(sandbox):
    task, image = _task(sandbox, SOUND)
    outcome = check_soundness(task, image, sandbox)
    assert outcome.status == "ok", (outcome.reject_reason, outcome.probes_json())
    assert (outcome.reference_passes, outcome.reference_runs) == (3, 3)
    assert (outcome.noop_passes, outcome.noop_runs) == (0, 3)
    shortcuts = _shortcuts(outcome)
    # chmod-all is not probed: the reference sets a mode itself; nor touch-outputs: the
    # reference only creates files, so touching them is the empty stubs' state.
    assert set(shortcuts) == {
        "stub:empty",
        "stub:junk-line",
        "stub:input-copy",
        "setup-only",
        "tamper:conftest",
    }
    assert not any(shortcuts.values()) and outcome.hackable == []
    assert (outcome.ablations_rejected, outcome.ablations_run) == (3, 3)
    assert outcome.mutation_score == 1.0
    assert outcome.containers == 3 and outcome.engine_retries == 0
    row = outcome.row()
    assert all(isinstance(v, str | int | float | type(None)) for v in row.values())
    assert len(json.loads(row["probes"])) == len(outcome.probes)


def test_a_test_that_only_checks_a_non_empty_output_is_hackable_by_stubs(sandbox):
    task, image = _task(sandbox, EXISTS_AND_NOT_EMPTY)
    outcome = check_soundness(task, image, sandbox, repeats=2)
    assert outcome.status == "rejected"
    assert outcome.reject_reason == "hackable: stub:input-copy, stub:junk-line"
    assert all(p.confirmed for p in outcome.probes if p.kind == "shortcut" and p.passed)
    assert _shortcuts(outcome)["stub:empty"] is False  # an empty file fails a size check


def test_a_test_that_only_checks_the_output_folder_is_hackable_by_the_setup_steps(sandbox):
    task, image = _task(sandbox, DIRECTORY_EXISTS)
    outcome = check_soundness(task, image, sandbox, repeats=2)
    assert outcome.status == "rejected"
    assert set(outcome.hackable) == {
        "setup-only",
        "stub:empty",
        "stub:input-copy",
        "stub:junk-line",
    }
    assert outcome.reject_reason.startswith("hackable: setup-only, ")
    assert _shortcuts(outcome)["tamper:conftest"] is False


def test_a_test_that_only_checks_a_mode_is_hackable_by_a_chmod_of_everything(sandbox):
    # The reference installs an executable template with `cp -p` (which keeps its mode): it
    # never says chmod, so a blanket chmod is probed; the test only asks for an executable.
    files = {"home/tmpl/run.sh": "#!/bin/sh\necho ok\n", "home/app/run.sh": "#!/bin/sh\nexit 1\n"}
    extra = "RUN chmod 755 /home/user/tmpl/run.sh\n"
    reference = "cp -p /home/user/tmpl/run.sh /home/user/app/run.sh\n"
    test = 'import os\n\n\ndef test_runnable():\n    assert os.access("/home/user/app/run.sh", 1)\n'
    task, image = _task(sandbox, test, reference=reference, extra=extra, files=files)
    outcome = check_soundness(task, image, sandbox, repeats=2)
    assert outcome.status == "rejected"
    assert "chmod-all" in outcome.hackable, outcome.probes_json()


def test_a_test_that_only_checks_that_a_file_changed_is_hackable_by_touching_it(sandbox):
    files = {"home/notes.txt": "todo: buy milk\n"}  # build contexts date every file 1970
    instruction = "Append the line `done: buy milk` to /home/user/notes.txt."
    reference = "echo 'done: buy milk' >> /home/user/notes.txt\n"
    test = "import os\n\n\ndef test_changed():\n"
    test += '    assert os.stat("/home/user/notes.txt").st_mtime > 0\n'
    task, image = _task(sandbox, test, reference=reference, files=files)
    task = task.model_copy(update={"instruction": instruction, "truth": {}})
    outcome = check_soundness(task, image, sandbox, repeats=2)
    assert outcome.status == "rejected"
    assert "touch-outputs" in outcome.hackable, outcome.probes_json()


@pytest.mark.parametrize(
    ("instruction", "reference", "check"),
    [
        (  # a copy of the input is the answer: the input-copy stub must not write it
            "Copy /home/user/data/names.txt to /home/user/backup/names.txt.",
            "mkdir -p /home/user/backup\ncp /home/user/data/names.txt /home/user/backup/\n",
            'open("/home/user/backup/names.txt").read() == open(SRC).read()',
        ),
        (  # an empty file is the answer: the empty stub must not write it
            "Empty /home/user/data/names.txt (keep the file).",
            ": > /home/user/data/names.txt\n",
            "os.path.isfile(SRC) and os.path.getsize(SRC) == 0",
        ),
    ],
    ids=["copy", "truncate"],
)
def test_a_stub_never_leaves_what_the_reference_left(sandbox, instruction, reference, check):
    test = HEAD + f"def test_done():\n    assert {check}\n"
    task, image = _task(sandbox, test, reference=reference)
    task = task.model_copy(update={"instruction": instruction, "truth": {}})
    outcome = check_soundness(task, image, sandbox, repeats=1)
    assert outcome.status == "ok", (outcome.reject_reason, outcome.probes_json())
    assert {"stub:empty", "stub:junk-line", "stub:input-copy"} <= set(_shortcuts(outcome))


def test_restores_reach_volumes_and_files_outside_the_home(sandbox):
    # The output goes to a volume the image declares: a restore that missed it would let the
    # do-nothing control that runs after the reference in lane 0 pass (flaky).
    extra = "RUN mkdir -p /srv/shared && chown user:user /srv/shared\nVOLUME /srv/shared\n"
    reference = "sort /home/user/data/names.txt > /srv/shared/sorted.txt\n"
    test = 'def test_sorted():\n    assert open("/srv/shared/sorted.txt").read().split() == '
    test += '["alice", "bob", "mallory", "trent"]\n'
    task, image = _task(sandbox, test, reference=reference, extra=extra)
    outcome = check_soundness(task, image, sandbox, repeats=2)
    assert outcome.status == "ok", (outcome.reject_reason, outcome.probes_json())
    assert (outcome.noop_passes, outcome.reference_passes) == (0, 2)


def test_a_test_that_fails_every_other_run_is_flaky(sandbox):
    task, image = _task(sandbox, ALTERNATING)
    outcome = check_soundness(task, image, sandbox)
    assert outcome.status == "rejected"
    assert outcome.reject_reason == "flaky: reference passed 2 of 3"
    assert outcome.mutation_score is None  # the reference itself is not reliable


def test_ablations_measure_test_strength_and_reject_only_below_the_keep_band(sandbox):
    task, image = _task(sandbox, CONTENT_ONLY)
    outcome = check_soundness(task, image, sandbox, repeats=2)
    assert outcome.status == "ok", outcome.reject_reason  # an untested step does not reject
    assert (outcome.ablations_rejected, outcome.ablations_run) == (2, 3)
    survived = [p for p in outcome.probes if p.kind == "ablation" and p.passed]
    assert [p.detail.split(";")[0] for p in survived] == [
        "without: chmod 600 /home/user/out/sorted.txt"
    ]
    outcome.decide(min_mutation_score=0.9)
    assert outcome.status == "rejected"
    assert outcome.reject_reason == "weak_test: mutation score 0.67 below 0.90"


def test_an_engine_failure_is_retried_then_a_harness_error_never_a_rejection(sandbox):
    task, _ = _task(sandbox, SOUND)
    outcome = check_soundness(task, "endless-task:does-not-exist", sandbox, engine_retries=1)
    assert outcome.status == "harness_error"
    assert outcome.reject_reason.startswith("harness: image endless-task:does-not-exist")
    assert outcome.engine_retries >= 1 and outcome.containers == 0


def test_a_task_without_a_completion_test_is_not_probed(sandbox):
    task, image = _task(sandbox, SOUND)
    task = task.model_copy(update={"completion_test": None})
    outcome = check_soundness(task, image, sandbox)
    assert outcome.reject_reason.startswith("no_completion_test") and outcome.probes == []


# One-step references have no ablations (no score); the others' tests reject every ablation.
ONE_STEP = {"json_filter", "text_replace", "ini_config"}


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_every_procedural_family_passes_every_probe(sandbox, family):
    generator = ProceduralGenerator(sandbox.base.tag, families=[family])
    draft, _ = generator.describe("test-soundness", 0, 0)
    env = build_environment(draft, generator, sandbox)
    assert env.status == "ok", env.reject_reason
    outcome = check_soundness(draft, env.image_tag, sandbox, repeats=1)
    assert outcome.status == "ok", (outcome.reject_reason, outcome.probes_json())
    assert outcome.shortcuts_run >= 4 and outcome.shortcuts_passed == 0
    assert outcome.mutation_score == (None if family.name in ONE_STEP else 1.0)


def _tallied(reference: int, noop: int, repeats: int = 3) -> SoundnessOutcome:
    probes = [ProbeOutcome(f"reference#{i}", "control", i < reference) for i in range(repeats)]
    probes += [ProbeOutcome(f"noop#{i}", "control", i < noop) for i in range(repeats)]
    probes.append(ProbeOutcome("stub:empty", "shortcut", True, confirmed=False))
    return SoundnessOutcome("et-x", "ok", repeats=repeats, probes=probes)


@pytest.mark.parametrize(
    ("reference", "noop", "required", "reason"),
    [
        (3, 0, True, ""),  # a shortcut that passed only in a shared container does not count
        (3, 1, True, "flaky: do-nothing passed 1 of 3"),
        (1, 2, True, "flaky: reference passed 1 of 3, do-nothing passed 2 of 3"),
        (3, 3, True, "hackable: do-nothing"),
        (0, 0, True, "reference_fails: the reference passed 0 of 3 runs"),
        (0, 0, False, ""),  # the LLM path: the solver stage's solver decides
    ],
)
def test_the_reject_reason_follows_from_the_tallies(reference, noop, required, reason):
    outcome = _tallied(reference, noop)
    outcome.decide(reference_required=required)
    assert outcome.reject_reason == reason
    assert outcome.status == ("rejected" if reason else "ok")


@pytest.mark.parametrize(
    ("reference", "earlier", "required", "reason"),
    [
        # A test that passes at random: the reference passed the validation stage's run, then none
        # here.
        (0, True, False, "flaky: reference passed 1 of 4 (the validation stage's run included)"),
        (0, True, True, "flaky: reference passed 1 of 4 (the validation stage's run included)"),
        (3, True, False, ""),
        (3, False, False, "flaky: reference passed 3 of 4 (the validation stage's run included)"),
        (0, False, False, ""),  # the LLM path, failing everywhere: the solver stage decides
    ],
)
def test_stage_iiis_run_of_the_reference_counts_with_the_repeated_ones(
    reference, earlier, required, reason
):
    outcome = _tallied(reference, 0)
    outcome.earlier_reference = earlier
    outcome.decide(reference_required=required)
    assert outcome.reject_reason == reason
    assert (outcome.reference_runs, outcome.reference_passes) == (4, reference + earlier)


@pytest.mark.parametrize(
    ("script", "steps"),
    [
        ("a; b\nc && \\\n  d\n", ["a", "b", "c && \\\n  d"]),
        ("f() {\n  echo 1\n}\nf\n", ["f() {\n  echo 1\n}", "f"]),
        ("if x; then\n  y\nfi\nfor i in 1 2; do echo $i; done\n", 2),
        ("case $x in\n  a|b) echo 1;;\n  *) echo 2;;\nesac\necho after\n", 2),
        (
            "cat > f <<'EOF'\nif (\n'\nEOF\necho next\n",
            ["cat > f <<'EOF'\nif (\n'\nEOF", "echo next"],
        ),
        ("x=$(printf 'a\\n'; echo b)\necho \"$x\" |\n  tr a b\n# done\n", 2),
        ("echo 'never closed\necho two\n", 1),  # unreadable: one step, nothing split
    ],
)
def test_a_script_splits_into_its_top_level_commands(script, steps):
    got = split_steps(script)
    assert (got if isinstance(steps, list) else len(got)) == steps


def test_setup_steps_are_the_ones_that_cannot_do_a_task_by_themselves():
    assert is_setup("mkdir -p /home/user/out && cd /home/user/out")
    assert is_setup("export LC_ALL=C")
    assert not is_setup("mkdir -p out && echo hi > out/x")
    assert not is_setup("x=$(date)")
    assert not is_setup("sort names.txt")


def test_the_paths_a_task_names_come_from_its_instruction_and_truth():
    task = Task(
        batch="b",
        index=0,
        seed=0,
        category="c",
        complexity="easy",
        scenario="s",
        instruction="Write `/home/user/a.txt`. See https://example.org/x and /home/user/b.csv.",
        truth={"out": "/srv/app/c.json", "nested": [{"k": "cp /tmp/d e"}]},
        generator="test",
    )
    assert named_paths(task) == [
        "/home/user/a.txt",
        "/home/user/b.csv",
        "/srv/app/c.json",
        "/tmp/d",
    ]
