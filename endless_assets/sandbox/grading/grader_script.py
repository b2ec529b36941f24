"""The grader's script route (request op "script"): Harbor's way of grading, in a verifier container
(verifier.py). A part of the grader's source (grader_source.py).

The tests directory and the reward directory are written afresh (whatever the agent left there
is removed), with offline stand-ins for the usual installation steps and for the programs that
start pytest (offline.py). The script runs as the verifier's user, in the image's working
directory and environment, in its own session and fenced (grader_fence.py), for at most its
timeout; then every process it left is killed and the reward read as Harbor reads it:
`reward.txt`, else `reward.json`. The reward directory is the script's user's alone; a pytest
the script starts keeps the reward files as they were (offline_keep.py)."""

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import stat
import time

REWARD_LIMIT = 65536
REWARD_FILES = ("reward.txt", "reward.json")  # (Harbor reads them in this order)
HARNESS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # (grader_describe.py's)


def user_pids(uid):
    """The processes that have `uid` as a real, effective or saved uid."""
    pids = set()
    for pid in process_ids():
        try:
            with open(f"/proc/{pid}/status") as fh:
                uids = next((line.split()[1:] for line in fh if line.startswith("Uid:")), [])
        except OSError:
            continue
        if uid in map(int, uids):
            pids.add(pid)
    return pids


def kill_until_none(find, pause=0.0):
    """Kill every process `find()` names, until it names none (at most 200 rounds). Scanning
    /proc as root needs no fork, so a fork bomb cannot prevent it."""
    for _ in range(200):
        pids = find()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause)


def stop_user(uid):
    """Kill every process of `uid` (`user_pids`), until none is left."""
    kill_until_none(lambda: user_pids(uid))


def process_ids():
    return {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}


def stop_new(before):
    """Kill every process that was not running when `before` was taken (but this one), until
    none is left: whatever a script or a test started, daemons included."""
    kill_until_none(lambda: process_ids() - before - {os.getpid()}, pause=0.01)


def fresh_directory(path, mode):
    """`path` as a new, empty directory owned by root (whatever was there is removed; a mount
    point, e.g. an image's VOLUME, stays and is emptied)."""
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.ismount(path):
        for entry in os.scandir(path):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)


def write_tree(root, files, binary, executable):
    for rel, content in [*files.items(), *binary.items()]:
        target = os.path.join(root, rel)
        if os.path.commonpath([root, os.path.normpath(target)]) != root:
            raise ValueError(f"test file {rel!r} is outside the tests directory")
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        data = base64.b64decode(content) if rel in binary else content.encode("utf-8")
        with open(target, "wb") as fh:
            fh.write(data)
        os.chmod(target, 0o755 if rel in executable else 0o644)


def read_reward(directory):
    """(reward, problem): the reward the script wrote, or None and why there is none. Harbor's
    order: reward.txt, else reward.json. Only a regular file is read (a FIFO would hang)."""
    for name in REWARD_FILES:
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return None, f"{name} cannot be read: {exc.strerror}"
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None, f"{name} is not a regular file"
        with os.fdopen(fd, "rb") as fh:
            text = fh.read(REWARD_LIMIT).decode("utf-8", "replace").strip()
        if not text:
            return None, f"{name} is empty"
        try:
            value = json.loads(text) if name == "reward.json" else float(text)
        except ValueError:
            return None, f"{name} does not hold a number: {text[:80]!r}"
        if isinstance(value, dict):
            numbers = [v for v in value.values() if isinstance(v, (int, float))]
            value = value.get("reward", numbers[0] if len(numbers) == 1 else None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            return None, f"{name} does not hold one reward: {text[:80]!r}"
        return float(value), ""
    return None, "the script wrote no reward (reward.txt or reward.json)"


def tail(path, limit=20_000):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_script(request, workspace):
    """The script route (module docstring); the reply's fields but its id."""
    umask = os.umask(0o022)  # what it writes is for the verifier's user to read (or write)
    try:
        return _run_script(request, workspace)
    finally:
        os.umask(umask)


def _run_script(request, workspace):
    tests, logs = request["tests_dir"], request["logs_dir"]
    uid, gid = int(request["uid"]), int(request["gid"])
    fresh_directory(tests, 0o755)
    write_tree(tests, request["files"], request.get("binary", {}), {request["script"]})
    fresh_directory(logs, 0o755)  # the script's user's, and nobody else's to write
    os.chown(logs, uid, gid)
    offline = os.path.join(workspace, "offline")
    os.makedirs(offline, mode=0o755)
    write_tree(offline, request["shims"], {}, set(request["shims"]))
    report = os.path.join(workspace, "needs-network")
    with open(report, "w"):
        pass
    os.chmod(report, 0o666)
    os.chmod(workspace, 0o755)
    env = dict(request["env"])
    env["PATH"] = offline + ":" + env.get("PATH", HARNESS_PATH)
    env["ENDLESS_OFFLINE_REPORT"] = report
    env["ENDLESS_LOGS_DIR"] = logs  # (the pytest stand-in keeps its reward files, offline_pytest)
    env.update(python_environment(workspace, offline, tests, env, request.get("own_caches")))
    script = os.path.join(tests, request["script"])
    with open(script, "rb") as fh:
        shebang = fh.read(2) == b"#!"
    argv = [script] if shebang else ["bash", script]
    output = os.path.join(workspace, "output.txt")
    before = process_ids()

    def start(guard):
        try:
            globals()["fence_and_guard"](*guard)  # nothing the script runs can signal the grader
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            try:
                os.chdir(request["workdir"])
            except OSError:
                os.chdir("/")
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:
            os.write(2, f"endless grader: cannot run {request['script']}: {exc}\n".encode())

    code, timed_out = run_child(output, float(request["timeout"]), start, 127)
    stop_new(before)
    reward, problem = read_reward(logs)
    with open(report, encoding="utf-8", errors="replace") as fh:
        needs_network = fh.readline().strip()
    return {
        "exit_code": code,
        "timed_out": timed_out,
        "reward": reward,
        "reward_problem": problem,
        "needs_network": needs_network[:500],
        "output": tail(output),
    }


def python_environment(workspace, offline, tests, env, own_caches):
    """What every Python the script starts gets (offline_pytest.py), with bytecode caches of its
    own unless the agent left all among what grading loads as they were."""
    found = {"ENDLESS_TESTS_DIR": tests}
    guard = os.path.join(offline, "pyguard")
    if os.path.isfile(os.path.join(guard, "sitecustomize.py")):
        theirs = env.get("PYTHONPATH", "")
        found["PYTHONPATH"] = guard + (":" + theirs if theirs else "")
        found["ENDLESS_PYTHONPATH"] = theirs
        found["PYTHONNOUSERSITE"] = "1"
    if not own_caches:
        caches = os.path.join(workspace, "pycache")
        os.makedirs(caches, mode=0o755)
        os.chmod(caches, 0o1777)
        found["PYTHONPYCACHEPREFIX"] = caches
    return found


def run_child(output, timeout, start, failed):
    """Fork a child (its own session, output to `output`) that runs `start(guard)`, which fences
    it, and exits `failed` if that returns; wait at most `timeout`, kill its session, let its
    guard end what it left. (exit code, 128 + the signal that killed it; timed out)."""
    out_fd = os.open(output, os.O_WRONLY | os.O_CREAT, 0o600)
    guard = globals()["guard_pipes"]()
    globals()["announce"]()  # (grader_fence.py's names: earlier in the grader's source)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
            start(guard)
        finally:
            os._exit(failed)
    os.close(out_fd)
    globals()["guard_kept"](guard)
    timed_out = not wait_for(pid, timeout)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if timed_out:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    globals()["guard_released"](guard)  # its guard ends whatever the child left, at once
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    code = os.waitstatus_to_exitcode(status)
    return (128 - code if code < 0 else code), timed_out


def wait_for(pid, timeout):
    """Whether `pid` exited within `timeout` (it is not reaped)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            time.sleep(0.005)
        return False
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)
