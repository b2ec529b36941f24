"""Run a pytest file inside a container and read the verdict from pytest's own JUnit report.

The test file is copied in only now, into a root-only directory. Before it runs, every process of
the agent user is killed, so nothing the agent left running can race the grader. pytest runs as
root with a clean environment (`env -i`), Python's isolated mode (`-I`: no PYTHON* variables, no
user site-packages, no current directory on sys.path), no conftest files, no plugin autoload, no
cache, and an ini file of ours as config, so nothing in the agent's home (conftest.py,
pytest.ini, sitecustomize, programs on its PATH, exported variables) changes how the tests run.
The reward is 1 only if pytest exits 0 *and* its JUnit report lists at least one test and no
failures or errors.
"""

from __future__ import annotations

import base64
import re
import secrets
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from endless_assets.sandbox.container import TaskContainer

VERIFIER_ROOT = "/verifier"
OUTPUT_TAIL = 8000
INLINE_LIMIT = 120_000  # base64 characters; one argv string may hold 128 KiB
_SPLIT = "=====ENDLESS-JUNIT-{}====="


@dataclass(frozen=True)
class Verdict:
    passed: bool
    status: str  # passed | failed | error | timeout | no_tests
    exit_code: int
    tests: int
    failures: int
    errors: int
    output: str  # tail of pytest's report, for repair feedback and debugging
    seconds: float

    def summary(self) -> str:
        return (
            f"{self.status}: exit {self.exit_code}, {self.tests} tests, "
            f"{self.failures} failures, {self.errors} errors"
        )


def run_pytest(
    container: TaskContainer,
    test_source: str,
    *,
    filename: str = "test_outputs.py",
    timeout: float = 180,
    stop_agent: bool = True,
    agent_uid: int = 1000,
) -> Verdict:
    """Copy `test_source` in, run it in isolation as root, and return pytest's verdict."""
    started = time.monotonic()
    run_id = secrets.token_hex(6)
    run_dir = f"{VERIFIER_ROOT}/run-{run_id}"
    split = _SPLIT.format(run_id)
    # First stop the agent (all its processes at once, as its own uid), then write the tests into
    # a root-only directory: nothing of the agent's is alive when the tests appear.
    stop = (
        f"setpriv --reuid={agent_uid} --regid={agent_uid} --clear-groups kill -KILL -1 "
        "2>/dev/null; "
        if stop_agent
        else ""
    )
    prepare = (
        f"{stop}umask 077; mkdir -p {VERIFIER_ROOT} && chown root:root {VERIFIER_ROOT} && "
        f"chmod 700 {VERIFIER_ROOT} && mkdir -p {run_dir}/tmp"
    )
    encoded = base64.b64encode(test_source.encode()).decode()
    inline = len(encoded) <= INLINE_LIMIT
    if inline:
        # One exec does everything: the test travels base64-encoded as an argument.
        write = (
            f'printf %s "$1" | base64 -d > {run_dir}/{filename} && '
            f"printf '[pytest]\\n' > {run_dir}/pytest.ini && "
        )
    else:
        container.exec_root(["sh", "-c", prepare])
        container.put_files(
            VERIFIER_ROOT,
            {f"run-{run_id}/{filename}": test_source, f"run-{run_id}/pytest.ini": "[pytest]\n"},
            mode=0o600,
            dir_mode=0o700,
        )
        write = ""
    script = (
        f"{prepare + '; ' if inline else ''}{write}cd {run_dir} && "
        "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "
        f"TMPDIR={run_dir}/tmp PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 "
        f"timeout -s KILL {int(timeout)} python3 -I -B -m pytest -q -rA -p no:cacheprovider "
        f"--noconftest --rootdir={run_dir} -c {run_dir}/pytest.ini "
        f"--junitxml={run_dir}/junit.xml -o junit_family=xunit2 {run_dir}/{filename}; "
        f"rc=$?; echo; echo {split}; cat {run_dir}/junit.xml 2>/dev/null; echo; echo {split} $rc"
    )
    args = ["sh", "-c", script, "verdict"] + ([encoded] if inline else [])
    result = container.exec_root(args, workdir="/")
    return _parse(result.output, split, time.monotonic() - started)


def _parse(output: str, split: str, seconds: float) -> Verdict:
    report, _, rest = output.partition(f"\n{split}\n")
    junit, _, rc_text = rest.rpartition(f"\n{split} ")
    match = re.match(r"-?\d+", rc_text.strip())
    exit_code = int(match.group(0)) if match else -1
    tests = failures = errors = 0
    junit = junit.strip()
    if junit:
        try:
            root = ET.fromstring(junit)
            suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
            for suite in suites:
                tests += int(suite.get("tests", 0))
                failures += int(suite.get("failures", 0))
                errors += int(suite.get("errors", 0))
        except ET.ParseError:
            errors += 1
    if exit_code == 137 or exit_code == 124:
        status = "timeout"
    elif exit_code == 5 or (exit_code == 0 and tests == 0):
        status = "no_tests"
    elif exit_code == 0 and failures == 0 and errors == 0:
        status = "passed"
    elif exit_code == 1 and failures + errors > 0:
        status = "failed"
    else:
        status = "error"
    return Verdict(
        passed=status == "passed",
        status=status,
        exit_code=exit_code,
        tests=tests,
        failures=failures,
        errors=errors,
        output=report[-OUTPUT_TAIL:],
        seconds=seconds,
    )
