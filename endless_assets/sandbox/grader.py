"""The grader: a root process inside a task container that runs pytest verdicts on request.

This file is copied into the container (root-only) and started once per container, the first
time a verdict is needed, by one `docker exec` whose stdin/stdout stay open. It imports pytest
once; every verdict then runs in a forked child, so a container graded three times (stage III)
pays Python's start-up and pytest's import once, not three times. It uses only the standard
library and pytest, and runs under `python3 -I -B` with a clean environment.

Protocol: one JSON object per line on stdin; one JSON object per line on stdout.
Request: {"id", "run_dir", "filename", "test", "timeout", "stop_uid" (int or null)}.
Reply:   {"id", "exit_code", "timed_out", "counts" (pytest's JUnit totals or null), "output"}.

For each request: all processes of `stop_uid` are killed first (the agent), then the test is
written into a fresh root-only directory and pytest runs in a child process with a clean
environment, no conftest files, no plugin autoload, no cache and our own ini file, from that
directory. A child that outlives `timeout` is killed (exit code 137).
"""

import contextlib
import json
import os
import signal
import sys
import time

CLEAN_ENV = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
}


def user_pids(uid):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def stop_user(uid):
    """Kill every process of `uid`. First by scanning /proc as root, which needs no fork (a fork
    bomb may have used up the process limit), until none is left; then, for good measure, from a
    child that drops to that uid and signals -1 (all of its processes at once)."""
    for _ in range(100):
        pids = user_pids(uid)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def run_pytest(run_dir, filename, timeout):
    import pytest  # imported once, in the parent, on the first request

    out_path = os.path.join(run_dir, "pytest-output.txt")
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            # An empty working directory beside the run directory, not inside it: a test that reads
            # an agent's symlink to /proc/self/cwd/... must not find its own source there.
            os.chdir(run_dir + "-cwd")
            os.environ.clear()
            os.environ.update(CLEAN_ENV)
            os.environ["TMPDIR"] = os.path.join(run_dir, "tmp")
            code = pytest.main(
                [
                    "-q",
                    "-rA",
                    "-p",
                    "no:cacheprovider",
                    "--noconftest",
                    f"--rootdir={run_dir}",
                    "-c",
                    os.path.join(run_dir, "pytest.ini"),
                    f"--junitxml={os.path.join(run_dir, 'junit.xml')}",
                    "-o",
                    "junit_family=xunit2",
                    os.path.join(run_dir, filename),
                ]
            )
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(int(code))
        except BaseException:
            os._exit(3)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return (128 - code if code < 0 else code), False, out_path
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return 137, True, out_path
        time.sleep(0.005)


def read_tail(path, limit=20_000):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def junit_counts(path):
    """pytest's own counts from its JUnit report, whatever its size; None if unreadable."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0) or 0)
    return counts


def handle(request):
    if request.get("stop_uid") is not None:
        stop_user(int(request["stop_uid"]))
    run_dir = request["run_dir"]
    os.makedirs(os.path.join(run_dir, "tmp"), mode=0o700)
    os.makedirs(run_dir + "-cwd", mode=0o700)
    with open(os.path.join(run_dir, request["filename"]), "w", encoding="utf-8") as fh:
        fh.write(request["test"])
    with open(os.path.join(run_dir, "pytest.ini"), "w", encoding="utf-8") as fh:
        fh.write("[pytest]\n")
    code, timed_out, out_path = run_pytest(run_dir, request["filename"], float(request["timeout"]))
    return {
        "id": request["id"],
        "exit_code": code,
        "timed_out": timed_out,
        "counts": junit_counts(os.path.join(run_dir, "junit.xml")),
        # The run directory's name is random: keep it out of the output, which feeds repair
        # prompts (and their cache keys).
        "output": read_tail(out_path).replace(os.path.basename(run_dir), "run"),
    }


def not_dumpable():
    """No process (root included, since CAP_SYS_PTRACE is dropped) may read this process's
    memory or file descriptors through /proc; forked pytest children inherit it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def main():
    not_dumpable()
    os.umask(0o077)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            reply = handle(request)
        except Exception as exc:
            reply = {
                "id": request.get("id"),
                "exit_code": 3,
                "timed_out": False,
                "counts": None,
                "output": repr(exc),
            }
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
