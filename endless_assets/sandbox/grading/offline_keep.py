"""Program text shared by the pytest stand-ins of a task's script (offline_pytest.py).

- KEEPER: pytest runs in a child (`keep`) fenced like the script (it starts with grader_fence.py
  itself), with PR_SET_PDEATHSIG; the stand-in, a child subreaper, kills whatever the test run
  left, then puts the reward files back as they were before pytest ran (the directory too, if
  moved or replaced): nothing a test runs sets the reward, now or later; the script does.
- PLUGINS: pytest's autoload reads the `pytest11` entry points of the interpreter's own
  directories only (`trust_plugins` patches pluggy's loader): an entry point the agent left in
  /app never loads, the image's own plugins do.

Both run with the image's Python, any version from 3.6."""

from __future__ import annotations

from endless_assets.sandbox.grading.grader_source import part

KEEPER = (
    part("grader_fence.py")
    + r'''
# -- endless: the reward files and the test run's processes (offline_keep.py) ------------------
import stat
import time

REWARDS = ("reward.txt", "reward.json")
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def _state(fd, name):
    """What is at `name` in the directory `fd`: None, or its kind, bytes and owner."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return ("other", st.st_mode, st.st_ino)
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return ("other", st.st_mode, st.st_ino)
    with os.fdopen(f, "rb") as fh:
        data = fh.read(1 << 20)
    return ("file", data, st.st_mode & 0o7777, st.st_uid, st.st_gid)


def _put(fd, name, was):
    """Make `name` what it was; True if it was not."""
    now = _state(fd, name)
    if now == was:
        return False
    if now is not None:
        path = "/proc/self/fd/%d/%s" % (fd, name)
        if now[0] == "other" and stat.S_ISDIR(now[1]):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(name, dir_fd=fd)
    if was is not None and was[0] == "file":
        temp = ".endless-reward-%d" % os.getpid()
        f = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, was[2], dir_fd=fd)
        with os.fdopen(f, "wb") as fh:
            fh.write(was[1])
            os.fchown(fh.fileno(), was[3], was[4])
        os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    return True


def _home(logs, fd, first):
    """The reward directory back at `logs` if something moved or replaced it; its fd."""
    try:
        now = os.lstat(logs)
    except OSError:
        now = None
    if now is not None and (now.st_dev, now.st_ino) == (first.st_dev, first.st_ino):
        return fd
    if now is not None:
        if stat.S_ISDIR(now.st_mode):
            shutil.rmtree(logs, ignore_errors=True)
        else:
            os.unlink(logs)
    os.makedirs(os.path.dirname(logs), exist_ok=True)
    where = os.readlink("/proc/self/fd/%d" % fd)
    if os.path.isdir(where) and not where.endswith(" (deleted)"):
        os.rename(where, logs)
        return fd
    os.mkdir(logs, first.st_mode & 0o7777)
    os.chown(logs, first.st_uid, first.st_gid)
    return os.open(logs, os.O_RDONLY | os.O_DIRECTORY)


def _descendants(me):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            children.setdefault(int(fields[1]), []).append((int(entry), fields[0]))
    found, pending = [], [me]
    while pending:
        for pid, state in children.get(pending.pop(), []):
            found.append((pid, state))
            pending.append(pid)
    return found


def _end_rest():
    """Kill every descendant of this process (a subreaper: the test run's orphans too)."""
    me = os.getpid()
    for _ in range(2000):
        rest = _descendants(me)
        for pid, state in rest:
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not rest:
            return
        time.sleep(0.002)


def keep(logs):
    """Return in a fenced child that runs pytest; in this process, wait for it, end what it
    left, put the reward files back, and exit as it did."""
    try:
        fd = os.open(logs, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    first = os.fstat(fd)
    saved = [(name, _state(fd, name)) for name in REWARDS]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    guard = guard_pipes()
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        fence_and_guard(*guard)
        return
    guard_kept(guard)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda number, frame: os.kill(pid, number))
    status = os.waitpid(pid, 0)[1]  # (a signal handled meanwhile: retried, PEP 475)
    guard_released(guard)  # the guard kills what the test run left, then exits
    _end_rest()
    fd = _home(logs, fd, first)
    changed = [name for name, was in saved if _put(fd, name, was)]
    if changed:
        sys.stderr.write(
            "endless: what the test ran changed %s; put back as it was before pytest ran\n"
            % ", ".join(changed)
        )
        sys.stderr.flush()
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
'''
)

PLUGINS = r'''
# -- endless: pytest plugins from the interpreter's own directories only (offline_keep.py) -----
def trust_plugins(manager, trusted):
    """pluggy's `load_setuptools_entrypoints` reads the distributions in `trusted` only."""
    load = manager.load_setuptools_entrypoints
    if getattr(load, "endless_trusted", False):
        return

    def guarded(self, group, name=None):
        try:
            import importlib.metadata as metadata
        except ImportError:  # (before Python 3.8: pluggy reads another module)
            return load(self, group, name)
        every = metadata.distributions

        def distributions(**kwargs):
            return every(**kwargs) if kwargs else every(path=list(trusted))

        metadata.distributions = distributions
        try:
            return load(self, group, name)
        finally:
            metadata.distributions = every

    guarded.endless_trusted = True
    manager.load_setuptools_entrypoints = guarded
'''
