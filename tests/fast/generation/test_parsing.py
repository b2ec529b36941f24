"""Parsing model replies: what real models send is accepted, anything else is rejected with
a reason."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from endless_assets.generation.parsing import (
    ParseError,
    check_dockerfile,
    check_test,
    code_blocks,
    parse_environment,
    parse_task,
    parse_test,
    strip_reasoning,
)

BASE = "endless-base:0123abcd"
INSTRUCTION = "Count the ERROR lines per service in /home/user/app.log into /home/user/errors.csv."
TRUTH = "Initial state: /home/user/app.log with 3 ERROR lines.\nExpected: errors.csv has 2 rows."
SOLUTION = "grep ERROR /home/user/app.log | cut -d' ' -f2 | sort | uniq -c > /home/user/errors.csv"
TASK_REPLY = (
    f"<task>\n    {INSTRUCTION}\n</task>\n<truth>\n    {TRUTH}\n</truth>\n"
    f"<solution>\n```bash\n{SOLUTION}\n```\n</solution>\n"
)
TEST = "import os\n\n\ndef test_output():\n    assert os.path.isfile('/home/user/errors.csv')\n"


# --- the describe stage ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(TASK_REPLY, id="plain"),
        pytest.param(f"<think>\nLet me use <task> tags.\n</think>\n{TASK_REPLY}", id="think-block"),
        pytest.param(f"I need a task.\n</think>\n\n{TASK_REPLY}", id="think-opened-in-prompt"),
        pytest.param(f"Sure! Here you go:\n\n{TASK_REPLY}\nHope this helps.", id="prose-around"),
        pytest.param(f"```xml\n{TASK_REPLY}```\n", id="wrapped-in-a-fence"),
        pytest.param(
            TASK_REPLY.replace("<task>", '<TASK id="1">').replace("</task>", "</TASK>"),
            id="upper-case-tag-with-attributes",
        ),
        pytest.param(
            f"<task>draft that got replaced</task>\n{TASK_REPLY}", id="section-sent-twice"
        ),
        pytest.param(
            TASK_REPLY.replace("```\n</solution>\n", ""), id="truncated-inside-last-section"
        ),
        pytest.param(TASK_REPLY.replace("</task>", ""), id="unclosed-task-before-truth"),
        pytest.param(
            TASK_REPLY.replace(f"```bash\n{SOLUTION}\n```", SOLUTION), id="solution-unfenced"
        ),
    ],
)
def test_task_replies_real_models_send_are_accepted(reply):
    task = parse_task(reply)
    assert task.instruction == INSTRUCTION
    assert task.truth == TRUTH
    assert task.solution == SOLUTION + "\n"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "the reply is empty"),
        ("<think>I should write a task about logs, maybe", "only reasoning"),
        (f"<truth>{TRUTH}</truth><solution>{SOLUTION}</solution>", "no <task> section"),
        (f"<task>{INSTRUCTION}</task><solution>{SOLUTION}</solution>", "no <truth> section"),
        (f"<task>Do it.</task><truth>{TRUTH}</truth><solution>ls</solution>", "too short"),
        (
            f"<task>{'x' * 9000}</task><truth>{TRUTH}</truth><solution>ls</solution>",
            "at most 8000",
        ),
        ("Here is a task: count the errors in the log file please.", "no <task> section"),
    ],
)
def test_unusable_task_replies_are_rejected_with_the_reason(reply, reason):
    with pytest.raises(ParseError, match=reason):
        parse_task(reply)


@pytest.mark.parametrize(
    "reply",
    [
        f"<task>{INSTRUCTION}</task>\n<truth>{TRUTH}</truth>",  # the paper's format
        f"<task>{INSTRUCTION}</task><truth>{TRUTH}</truth><solution>```bash\n```</solution>",
    ],
    ids=["no-solution-section", "empty-solution"],
)
def test_a_task_without_a_reference_solution_is_accepted_without_one(reply):
    task = parse_task(reply)
    assert task.instruction == INSTRUCTION and task.solution == ""


def test_reasoning_is_stripped_in_all_its_forms():
    assert strip_reasoning("<think>a</think>answer") == "answer"
    assert strip_reasoning("<thinking>\na\n</thinking>\n\nanswer\n") == "answer"
    assert strip_reasoning("plan plan</think>answer") == "answer"
    assert strip_reasoning("answer<think>cut off while thinking") == "answer"


# --- tests (the build and validation stages) ------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(f"```python\n{TEST}```", id="python-fence"),
        pytest.param(f"```py\n{TEST}```", id="py-fence"),
        pytest.param(f"Here is the file:\n```\n{TEST}```\nDone.", id="fence-without-language"),
        pytest.param(f"~~~python\n{TEST}~~~", id="tilde-fence"),
        pytest.param(
            "  ```python\n" + "".join(f"  {line}\n" for line in TEST.splitlines()) + "  ```",
            id="indented-fence",
        ),
        pytest.param(TEST, id="no-fence-at-all"),
        pytest.param(
            f"Run it with:\n```bash\npytest -q\n```\nThe file:\n```python\n{TEST}```",
            id="several-blocks",
        ),
        pytest.param(
            f"```python\nimport os\n```\nand the whole file:\n```python\n{TEST}```",
            id="a-fragment-then-the-file",
        ),
        pytest.param(f"<think>hmm</think>```python\n{TEST}", id="unclosed-fence-but-complete"),
    ],
)
def test_test_files_are_found_where_models_put_them(reply):
    assert parse_test(reply, "completion test") == TEST


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I cannot write this test.", "no Python code block with the completion test"),
        ("```python\ndef test_x(:\n    pass\n```", r"not valid Python: line 1"),
        ("```python\nimport os\n\ndef helper():\n    pass\n```", "defines no test functions"),
        (
            "```python\nimport requests\nimport yaml\n\ndef test_x():\n    pass\n```",
            "imports requests, yaml: only the Python standard library and pytest",
        ),
        (
            "```python\nimport os\n\ndef test_x():\n    assert os.path.isfile(",
            r"not valid Python.*cut off",
        ),
    ],
)
def test_unusable_tests_are_rejected_with_the_reason(reply, reason):
    with pytest.raises(ParseError, match=reason):
        parse_test(reply, "completion test")


def test_test_classes_and_pytest_imports_are_fine():
    code = "import pytest\nfrom pathlib import Path\n\nclass TestOut:\n    def test_a(self):\n"
    code += "        assert Path('/x').exists() is not None\n"
    assert parse_test(f"```python\n{code}```", "initial-state test") == code


def test_code_blocks_reports_unclosed_blocks():
    blocks = code_blocks("text\n```bash\necho hi\n```\n```python\nprint(1)")
    assert [(b.lang, b.code, b.closed) for b in blocks] == [
        ("bash", "echo hi", True),
        ("python", "print(1)", False),
    ]


# --- Dockerfiles (the build stage) ----------------------------------------------------------------

DOCKERFILE = f"FROM {BASE}\nRUN mkdir -p /home/user/data && chown -R user:user /home/user/data\n"


def test_an_environment_reply_with_files():
    reply = (
        "Here is the Dockerfile:\n\n```dockerfile\n"
        f"{DOCKERFILE}COPY --chown=user:user seed/ /home/user/data/\n```\n\n"
        '<file path="seed/a.csv">\nid,n\n1,2\n</file>\n'
        "<file path='seed/b.json'>\n```json\n{\"k\": 1}\n```\n</file>\n"
    )
    env = parse_environment(reply, BASE)
    assert env.dockerfile.startswith(f"FROM {BASE}\n")
    assert env.files == {"seed/a.csv": "id,n\n1,2\n", "seed/b.json": '{"k": 1}\n'}
    assert env.initial_test is None


@pytest.mark.parametrize(
    ("dockerfile", "expected_first_line"),
    [
        (DOCKERFILE, f"FROM {BASE}"),
        (DOCKERFILE.replace(BASE, "endless-base:latest"), f"FROM {BASE}"),
        (DOCKERFILE.replace(BASE, "endless-base"), f"FROM {BASE}"),
        ("# the task image\n" + DOCKERFILE.replace("FROM", "from"), "# the task image"),
        (DOCKERFILE.replace(BASE, f"{BASE} AS task"), f"FROM {BASE} AS task"),
    ],
)
def test_the_from_line_is_normalised_to_the_base_image(dockerfile, expected_first_line):
    checked = check_dockerfile(dockerfile, BASE, {})
    assert checked.splitlines()[0] == expected_first_line
    assert f"{BASE}" in checked


def test_a_here_string_is_not_mistaken_for_a_heredoc():
    dockerfile = DOCKERFILE + "RUN cat <<< 'hello' > /home/user/x \\\n    && echo done\n"
    assert check_dockerfile(dockerfile, BASE, {}) == dockerfile


@pytest.mark.parametrize(
    ("dockerfile", "files", "reason"),
    [
        ("FROM ubuntu:22.04\nRUN true\n", {}, "names 'ubuntu:22.04'; use `FROM endless-base"),
        ("ARG X=1\n" + DOCKERFILE, {}, "must start with `FROM"),
        (DOCKERFILE + "FROM python:3.11\n", {}, "multi-stage builds are not supported"),
        (f"FROM --platform=linux/amd64 {BASE}\n", {}, "no flags"),
        (DOCKERFILE + "RUN cat > /home/user/x <<EOF\nhello\nEOF\n", {}, "heredocs"),
        (DOCKERFILE + 'ENTRYPOINT ["sleep"]\n', {}, "ENTRYPOINT is not allowed"),
        (DOCKERFILE + "COPY data.csv /home/user/\n", {"other.csv": ""}, "'data.csv' is not among"),
        (DOCKERFILE + "COPY --from=build /x /y\n", {}, "COPY --from"),
        ("# nothing\n\n", {}, "empty"),
    ],
)
def test_dockerfiles_that_cannot_build_here_are_rejected(dockerfile, files, reason):
    with pytest.raises(ParseError, match=reason):
        check_dockerfile(dockerfile, BASE, files)


@pytest.mark.parametrize(
    ("path", "ok"),
    [("seed/a.txt", True), ("/etc/passwd", False), ("../x", False), ("Dockerfile", False)],
)
def test_context_file_paths_stay_inside_the_context(path, ok):
    reply = f'```dockerfile\n{DOCKERFILE}```\n<file path="{path}">x\n</file>'
    if ok:
        assert parse_environment(reply, BASE).files == {path: "x\n"}
    else:
        with pytest.raises(ParseError, match="must be relative to the build context"):
            parse_environment(reply, BASE)


def test_a_repair_reply_may_send_only_the_part_it_fixed():
    only_test = parse_environment(f"Fixed the test:\n```python\n{TEST}```", BASE, allow_test=True)
    assert only_test.dockerfile is None and only_test.initial_test == TEST
    both = parse_environment(
        f"```dockerfile\n{DOCKERFILE}```\n```python\n{TEST}```", BASE, allow_test=True
    )
    assert both.dockerfile == DOCKERFILE and both.initial_test == TEST
    with pytest.raises(ParseError, match=r"no Dockerfile .* and no initial-state test"):
        parse_environment("I think it is fine as it is.", BASE, allow_test=True)
    with pytest.raises(ParseError, match="no Dockerfile in the reply"):
        parse_environment(f"```python\n{TEST}```", BASE)


def test_an_unfenced_dockerfile_is_accepted_when_it_is_the_whole_reply():
    assert parse_environment(DOCKERFILE, BASE).dockerfile == DOCKERFILE


def test_a_repaired_dockerfile_may_copy_files_sent_in_an_earlier_round():
    dockerfile = DOCKERFILE + "COPY seed/a.csv /home/user/data/a.csv\n"
    reply = f"```dockerfile\n{dockerfile}```"
    with pytest.raises(ParseError, match=r"'seed/a\.csv' is not among"):
        parse_environment(reply, BASE, allow_test=True)
    env = parse_environment(reply, BASE, allow_test=True, known_files={"seed/a.csv": "1\n"})
    assert env.dockerfile == dockerfile and env.files == {}


def test_tests_checked_by_many_threads_at_once_all_parse():
    # CPython 3.11 keeps one AST depth counter for every thread: a collection running a finalizer
    # mid-conversion lets another thread's parse in, and plain ast.parse may then raise
    # SystemError ("AST constructor recursion depth mismatch"); the stage's workers are threads.
    class Finalized:
        def __del__(self):
            pass

    def churn():
        for _ in range(100_000):
            cycle = Finalized()
            cycle.itself = cycle

    nested = "(" * 20 + "1" + ")" * 20
    line = f"    assert {nested} == [{', '.join(map(str, range(30)))}][0]\n"
    code = "def test_deep():\n" + line * 40

    def check(_):
        try:
            check_test(code, "test")
        except SystemError as exc:
            return str(exc)
        return None

    threshold = gc.get_threshold()
    churner = threading.Thread(target=churn)
    gc.set_threshold(5)
    try:
        churner.start()
        with ThreadPoolExecutor(8) as pool:
            errors = [e for e in pool.map(check, range(800)) if e]
    finally:
        churner.join()
        gc.set_threshold(*threshold)
    assert errors == []
