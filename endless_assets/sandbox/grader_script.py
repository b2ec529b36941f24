"""The grader's script route and its self-description: the part of the grader's source that runs
before grader.py's (verdict.GRADER_SOURCE is this file followed by grader.py; standard library
only, nothing on disk).

Script route (request op "script"): the way Harbor's verifier grades, in a verifier container
(verifier.py: a fresh container of a snapshot of the agent's, where no process of the agent runs).
The task's tests directory is written afresh (whatever the agent left at that path is removed
first), so are the reward directory and a directory of offline stand-ins for the usual
installation steps (offline.py); the script runs as the verifier's user in the image's working
directory with the image's environment, in its own session, for at most its timeout; then every
process it left is killed and the reward is read: `reward.json` (a number, or an object with
`reward` or a single number), else `reward.txt`.

Self-description (`describe`, sent with the grader's hello): the interpreter, the files it has
loaded, its module search path, the dynamic loader and its configuration, and the programs the
harness runs by name. Seen before any agent command ran, it is what a root agent must not
change for a verdict in a snapshot of its container to mean anything (verifier.py).
"""

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import sys
import time

HARNESS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
REWARD_LIMIT = 65536
LOADER_FILES = ("/etc/ld.so.preload", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")


def elf_interpreter(path):
    """The dynamic loader an ELF executable names (PT_INTERP), or ""."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only
                return ""
            order = "little" if head[5] == 1 else "big"
            phoff = int.from_bytes(head[32:40], order)
            phentsize = int.from_bytes(head[54:56], order)
            phnum = int.from_bytes(head[56:58], order)
            for index in range(min(phnum, 64)):
                fh.seek(phoff + index * phentsize)
                entry = fh.read(phentsize)
                if int.from_bytes(entry[0:4], order) == 3:  # PT_INTERP
                    offset = int.from_bytes(entry[8:16], order)
                    size = int.from_bytes(entry[32:40], order)
                    fh.seek(offset)
                    return fh.read(min(size, 4096)).rstrip(b"\0").decode("utf-8", "replace")
    except OSError:
        return ""
    return ""


def describe():
    """What grading here runs and loads (see the module docstring)."""
    paths = set(LOADER_FILES)
    programs = {"python": os.path.realpath(sys.executable)}
    for name in ("env", "sleep", "bash", "sh"):
        found = shutil.which(name, path=HARNESS_PATH)
        if found:
            programs[name] = found
    import site

    search = [*filter(None, sys.path), *site.getsitepackages(), os.path.dirname(os.__file__)]
    for path in [sys.executable, *programs.values(), *search]:
        paths.update((path, os.path.realpath(path)))
    paths.update(link_targets([p for p in search if os.path.isdir(p)]))
    interpreter = elf_interpreter(os.path.realpath(sys.executable))
    if interpreter:
        paths.update((interpreter, os.path.realpath(interpreter)))
    with contextlib.suppress(OSError), open("/proc/self/maps") as fh:
        for line in fh:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].startswith("/"):
                paths.add(fields[5].strip().removesuffix(" (deleted)"))
    # Where the interpreter looks before any sys.path entry exists, to find its prefix: a
    # pyvenv.cfg beside it or one level up, a build directory's marker, a lib/ beside it.
    here = os.path.dirname(programs["python"])
    for name in ("pyvenv.cfg", "pybuilddir.txt", "lib", "lib64", "Modules"):
        paths.add(os.path.join(here, name))
    paths.add(os.path.join(os.path.dirname(here), "pyvenv.cfg"))
    paths.update(other_names(paths))
    interpreter = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]
    return {"programs": programs, "protected": sorted(paths), "interpreter": interpreter}


def other_names(paths):
    """The other names that lead to these files, which a root agent could point elsewhere:
    every symbolic link directly under / (a merged /usr's /bin, /lib, /lib64: the names a
    script's `#!/bin/bash` and ld.so.cache's `/lib/x86_64-linux-gnu/...` use), every link among
    the paths' ancestors, and the links beside a file that lead to it (`libexpat.so.1` ->
    `libexpat.so.1.8.10`: the name the loader opens; the kernel's maps name the file)."""
    found = set()
    with contextlib.suppress(OSError), os.scandir("/") as entries:
        found.update(entry.path for entry in entries if entry.is_symlink())
    for path in paths:
        parts = path.split("/")
        for depth in range(2, len(parts)):
            ancestor = "/".join(parts[:depth])
            if os.path.islink(ancestor):
                found.add(ancestor)
    files = {os.path.realpath(p) for p in paths if os.path.isfile(p)}
    for directory in {os.path.dirname(p) for p in files}:
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_symlink() and os.path.realpath(entry.path) in files:
                    found.add(entry.path)
    return found


def user_pids(uid):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        if uid in (int(x) for x in line.split()[1:]):
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def stop_user(uid):
    """Kill every process that has `uid` as a real, effective or saved uid, until none is left.
    Scanning /proc as root needs no fork, so a fork bomb cannot prevent it."""
    for _ in range(200):
        pids = user_pids(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def link_targets(directories, limit=100_000):
    """Where the symbolic links under `directories` lead (Debian's stdlib sitecustomize.py is a
    link into /etc): writing through a link changes its target, not the link."""
    found, seen = set(), 0
    pending = list(directories)
    while pending and seen < limit:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if entry.is_symlink():
                found.add(os.path.realpath(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return found


def process_ids():
    return {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}


def stop_new(before):
    """Kill every process that was not running when `before` was taken (but this one), until
    none is left: whatever a script or a test started, daemons included."""
    me = os.getpid()
    for _ in range(200):
        left = process_ids() - before - {me}
        if not left:
            return
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


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
    """(reward, problem): the reward the script wrote, or None and why there is none."""
    for name in ("reward.json", "reward.txt"):
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return None, f"{name} cannot be read: {exc.strerror}"
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
    fresh_directory(logs, 0o777)
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
    script = os.path.join(tests, request["script"])
    with open(script, "rb") as fh:
        shebang = fh.read(2) == b"#!"
    argv = [script] if shebang else ["bash", script]
    output = os.path.join(workspace, "output.txt")
    before = process_ids()
    out_fd = os.open(output, os.O_WRONLY | os.O_CREAT, 0o600)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(out_fd, 1)
            os.dup2(out_fd, 2)
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
        finally:
            os._exit(127)
    os.close(out_fd)
    timed_out = not wait_for(pid, float(request["timeout"]))
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    stop_new(before)
    reward, problem = read_reward(logs)
    with open(report, encoding="utf-8", errors="replace") as fh:
        needs_network = fh.readline().strip()
    code = os.waitstatus_to_exitcode(status)
    return {
        "exit_code": 128 - code if code < 0 else code,
        "timed_out": timed_out,
        "reward": reward,
        "reward_problem": problem,
        "needs_network": needs_network[:500],
        "output": tail(output),
    }


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
