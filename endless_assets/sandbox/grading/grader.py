"""The grader: a root process inside a task container that runs pytest verdicts on request.

Its source is the command line of one `docker exec` (`python3 -I -B -c SOURCE`), whose stdin and
stdout are the only channel to the harness; nothing of it is on disk. It starts before the
agent's first command (or with the first verdict), imports pytest once and runs each verdict in
a forked child. Standard library and pytest only. What each measure defends against: the threat
model in docs/sandbox.md.

Protocol: one JSON object per line each way. Hello: {"ready": true, "fence", "programs",
"protected", ...} (grader_describe.describe). Request: {"id", "filename", "test", "timeout",
"agent_uid", "stop_agent", "env", "verifier"}; reply: {"id", "running": true} when the test
starts, then {"id", "exit_code", "timed_out", "counts" (outcome totals or null), "output"}.
{"id", "op": "script", ...}: the script route (grader_script.py, verifier containers only),
replied to with the same first line, then {"id", "exit_code", "timed_out", "reward",
"reward_problem", "needs_network", "output"}. {"id", "op": "stop", "agent_uid"}: kill every
process of the agent (the shell's way out when no exec can start), {"id", "stopped": true}.

The grader is not dumpable and, fenced from what tests run (grader_fence.py), cannot be
signalled by them; it kills the agent's processes by scanning /proc (no fork: a fork bomb cannot
stop it) before and after each verdict, and grades root only in a verifier container. The test
is written root-only under a random name on /verifier (a tmpfs) and deleted once collected.
The pytest child runs as the agent's uid with no groups, keeping DAC_OVERRIDE in its own process
only (whatever a test runs has the agent's privilege, no more), not dumpable, in the image's
environment without pytest's variables, isolated, with no conftest, plugin autoload or cache,
and reports its totals over a close-on-exec pipe behind a per-verdict nonce. A verdict counts
only if that report arrived and the child exited by itself."""

import contextlib
import ctypes
import json
import linecache
import os
import select
import shutil
import struct
import sys
import tempfile
import traceback

VERIFIER = "/verifier"
PR_SET_KEEPCAPS, PR_SET_DUMPABLE = 8, 4
CAP_DAC_OVERRIDE = 1
LIBC = ctypes.CDLL(None, use_errno=True)


def prctl(option, value):
    if LIBC.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")


def keep_only(caps):
    """Effective = permitted = `caps`, nothing inheritable: lost on any execve."""
    mask = sum(1 << cap for cap in caps)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = struct.pack("6I", mask, mask, 0, 0, 0, 0)  # (effective, permitted, inheritable) x 2
    if LIBC.capset(*map(ctypes.create_string_buffer, (header, data))) != 0:
        raise OSError(ctypes.get_errno(), "capset")


class Reporter:
    """A pytest plugin in the child: outcome totals, sent once over the result pipe. The test file
    is deleted once collected (its lines stay in memory): nothing can lead back to its source."""

    def __init__(self, fd, nonce, source):
        self.fd, self.nonce, self.source = fd, nonce, source
        self.items, self.collect_errors = {}, 0

    def pytest_collection_finish(self, session):
        with open(self.source, encoding="utf-8") as fh:
            lines = fh.read().splitlines(keepends=True)
        linecache.cache[self.source] = (sum(map(len, lines)), None, lines, self.source)
        os.unlink(self.source)

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors += 1

    def pytest_runtest_logreport(self, report):
        rank = {"passed": 0, "skipped": 1, "failure": 2, "error": 3}
        if report.failed:
            outcome = "failure" if report.when == "call" else "error"
        elif report.skipped or hasattr(report, "wasxfail"):
            outcome = "skipped"
        else:
            outcome = "passed"
        seen = self.items.get(report.nodeid, "passed")
        self.items[report.nodeid] = max(seen, outcome, key=rank.__getitem__)

    def pytest_sessionfinish(self, session):
        outcomes = list(self.items.values())
        counts = {
            "tests": len(outcomes) + self.collect_errors,
            "failures": outcomes.count("failure"),
            "errors": outcomes.count("error") + self.collect_errors,
            "skipped": outcomes.count("skipped"),
        }
        with contextlib.suppress(OSError):
            os.write(self.fd, self.nonce + json.dumps(counts).encode() + b"\n")


def become_agent(uid):
    """Drop to the agent's uid and gid, keeping DAC_OVERRIDE in this process only."""
    prctl(PR_SET_KEEPCAPS, 1)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    keep_only([CAP_DAC_OVERRIDE])
    prctl(PR_SET_DUMPABLE, 0)


def test_environment(image_env, home):
    """The image's environment without pytest's variables (our rules), with ours."""
    env = {k: v for k, v in (image_env or {}).items() if not k.startswith("PYTEST_")}
    env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", HOME=home, TMPDIR=home)
    return env


def child(run_dir, home, filename, agent_uid, result_fd, nonce, image_env, guard):
    import pytest

    os.chown(home, agent_uid, agent_uid)
    become_agent(agent_uid)
    _op("fence_and_guard")(*guard)  # nothing the test runs can signal the grader
    os.chdir("/")
    os.environ.clear()
    os.environ.update(test_environment(image_env, home))
    source = os.path.join(run_dir, filename)
    args = ["-q", "-rA", "-p", "no:cacheprovider", "--noconftest", f"--rootdir={run_dir}"]
    args += ["-c", os.path.join(run_dir, "pytest.ini"), source]
    code = pytest.main(args, plugins=[Reporter(result_fd, nonce, source)])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def run_pytest(run_dir, home, filename, timeout, agent_uid, image_env=None):
    """Fork the child, wait for it (at most `timeout`), return (exit code, timed out, counts)."""
    before = _op("process_ids")()
    nonce = os.urandom(16).hex().encode()
    read_fd, write_fd = os.pipe()  # close-on-exec: programs the test runs never hold it

    def start(guard):
        try:
            os.close(read_fd)
            name = os.path.basename(filename)
            child(run_dir, home, name, agent_uid, write_fd, nonce, image_env, guard)
        except BaseException:
            traceback.print_exc()

    output = os.path.join(run_dir, "output.txt")
    code, timed_out = _op("run_child")(output, timeout, start, 3)
    os.close(write_fd)
    if agent_uid == 0:  # a verifier container: whatever the test started, but the grader
        _op("stop_new")(before)
    else:
        _op("stop_user")(agent_uid)  # whatever the test started
    counts = read_counts(read_fd, nonce)
    os.close(read_fd)
    return code, timed_out, counts


def read_counts(fd, nonce):
    data = b""
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk or len(data) > 1_000_000:
            break
        data += chunk
    lines = [line for line in data.splitlines() if line.startswith(nonce)]
    if len(lines) != 1:
        return None
    try:
        counts = json.loads(lines[0][len(nonce) :])
    except ValueError:
        return None
    return {key: int(counts.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}


def stop_agent(request):
    agent_uid = int(request["agent_uid"])
    if agent_uid == 0:
        raise ValueError("the grader does not stop root")
    _op("stop_user")(agent_uid)
    return True


def handle(request, serial):
    agent_uid = int(request["agent_uid"])
    if agent_uid == 0 and not request.get("verifier"):
        raise ValueError("the grader does not grade root agents in their own container")
    if request.get("stop_agent", True) and agent_uid != 0:
        _op("stop_user")(agent_uid)
    # The test file and its output: root-only. The test's HOME and TMPDIR: the agent's uid's,
    # apart, so that programs the test runs can use them without learning where the test is.
    run_dir = os.path.join(VERIFIER, f"run-{serial}-{os.urandom(8).hex()}")
    home = os.path.join(VERIFIER, f"home-{serial}-{os.urandom(8).hex()}")
    try:
        os.mkdir(run_dir, 0o700)
        os.mkdir(home, 0o700)
        filename = os.path.basename(request["filename"])
        with open(os.path.join(run_dir, filename), "w", encoding="utf-8") as fh:
            fh.write(request["test"])
        with open(os.path.join(run_dir, "pytest.ini"), "w", encoding="utf-8") as fh:
            fh.write("[pytest]\n")
        timeout = float(request["timeout"])
        image_env = request.get("env")
        code, timed_out, counts = run_pytest(run_dir, home, filename, timeout, agent_uid, image_env)
        # (the random name out of the output, which feeds repair prompts and their cache keys)
        output = _op("tail")(os.path.join(run_dir, "output.txt"))
        output = output.replace(os.path.basename(run_dir), "run")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    return {
        "id": request["id"],
        "exit_code": code,
        "timed_out": timed_out,
        "counts": counts,
        "output": output,
    }


def passed(reply):
    """The reward rule (verdict.parse_verdict's too)."""
    counts = reply["counts"]
    return (
        reply["exit_code"] == 0
        and not reply["timed_out"]
        and counts is not None
        and counts["tests"] > 0
        and counts["failures"] == counts["errors"] == counts["skipped"] == 0
    )


def once(argv):
    """One verdict without a harness, for exported tasks (their tests/test.sh): the reward (0 or 1)
    to --reward-file. The test file is removed once read: nothing the test runs can read it."""
    import argparse

    global VERIFIER
    parser = argparse.ArgumentParser(prog="endless_grader.py")
    parser.add_argument("--once", required=True, metavar="TEST_FILE")
    parser.add_argument("--agent-uid", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=170.0)
    parser.add_argument("--reward-file", default="")
    args = parser.parse_args(argv)
    with open(args.once, encoding="utf-8") as fh:
        test = fh.read()
    with contextlib.suppress(OSError):
        os.unlink(args.once)
    VERIFIER = tempfile.mkdtemp(prefix="endless-verifier-")
    os.chmod(VERIFIER, 0o711)
    request = {"id": "once", "filename": os.path.basename(args.once), "test": test}
    request.update(timeout=args.timeout, agent_uid=args.agent_uid, stop_agent=True)
    try:
        reply = handle(request, 0)
    finally:
        shutil.rmtree(VERIFIER, ignore_errors=True)
    print(reply["output"])
    reward = 1 if passed(reply) else 0
    counts = reply["counts"] or {}
    print(f"endless grader: exit {reply['exit_code']}, {counts}, reward {reward}")
    if args.reward_file:
        with open(args.reward_file, "w") as fh:
            fh.write(f"{reward}\n")


def _op(name):
    """A name of an earlier part of the grader's source (grader_source.py)."""
    return globals()[name]


def script(request):
    """The script route (grader_script.run_script), in a fresh root-only workspace (not on
    /verifier, which is noexec: the offline stand-ins are programs)."""
    if not request.get("verifier"):
        raise ValueError("the grader runs a task's own script only in a verifier container")
    workspace = "/.endless-verifier-" + os.urandom(8).hex()
    os.mkdir(workspace, 0o700)
    try:
        return {"id": request["id"], **_op("run_script")(request, workspace)}
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def preload_pytest():
    """Import pytest and its own plugins once, before any agent command: every verdict's forked
    child reuses them."""
    import importlib

    import pytest  # noqa: F401
    from _pytest.config import default_plugins

    for name in default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module(f"_pytest.{name}")


def main():
    prctl(PR_SET_DUMPABLE, 0)
    os.umask(0o077)
    if "--no-preload" not in sys.argv:  # (a verifier for a task's own script: pytest unused)
        preload_pytest()

    if "--once" in sys.argv:
        once(sys.argv[1:])
        return
    os.makedirs(VERIFIER, exist_ok=True)
    os.chmod(VERIFIER, 0o711)

    fence = _op("landlock_abi")() >= _op("SCOPED_ABI")
    print(json.dumps({"ready": True, **_op("describe")(), "fence": fence}), flush=True)
    for serial, line in enumerate(sys.stdin):
        if not line.strip():
            continue
        request = json.loads(line)
        _op("REQUEST")["id"] = request.get("id")
        try:
            if request.get("op") == "stop":
                reply = {"id": request["id"], "stopped": stop_agent(request)}
            elif request.get("op") == "script":
                reply = script(request)
            else:
                reply = handle(request, serial)
        except Exception as exc:
            reply = {"id": request.get("id"), "exit_code": 3, "timed_out": False}
            reply.update(counts=None, output=f"grader: {exc!r}")
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
