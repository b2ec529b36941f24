"""What an agent changed in the system locations, held against what the task's reference solution
changes there: any other change is tampering (verifier.py grades it 0, naming the paths).

The system locations are those the first grader named (grader_describe.py) and the paths the
image's ENV loads code from (`code_locations`). Configuration (`is_config`) the agent changed
and the reference does not is `pristine` instead: set back to the image's in the verifier
(verifier_view.py), unless that cannot be done, it is also a system location, or grading loads
it. The validation stage records the reference's changes (`learn`), which the completion test
carries (bundle.Verifier.allowed) so an honest agent may make the same; a file among what
grading loads must then be the reference's byte for byte (its sha256). Bytecode caches are not
tampering (`own_caches`); /etc/passwd and /etc/group are the agent's, but must stay regular
files (the engine reads them at every start and exec: a FIFO would hang it)."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field

CACHE_DIR = "__pycache__"
# Configuration: where a library or tool reads what it is to do, including what code to load or
# run (verifier_view.py): /etc, and the dot-entries of the homes of the users grading runs as.
CONFIG_DIRS = ("/etc",)
IDENTITY_FILES = ("/etc/passwd", "/etc/group")
# The user database's other files: data a test may check, never code (useradd writes them all).
USER_DATA = frozenset(
    f"/etc/{name}{end}"
    for name in ("passwd", "group", "shadow", "gshadow", "subuid", "subgid")
    for end in ("", "-")
) | {"/etc/.pwd.lock"}
# The image's ENV variables that tell a loader, an interpreter or a library where to load code or
# its configuration from: the paths they name are system locations, as the image's PATH is.
# (PYTHONPATH is not: a script's Pythons put it after their own directories, offline_pytest.py,
# and our grader's run in isolated mode.)
_CODE_WORDS = """
    LD_LIBRARY_PATH LD_PRELOAD LD_AUDIT PYTHONHOME PYTHONSTARTUP PYTHONUSERBASE PERL5LIB
    PERLLIB PERL5OPT RUBYLIB RUBYOPT GEM_HOME GEM_PATH NODE_PATH NODE_OPTIONS CLASSPATH
    JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS JAVA_HOME GCONV_PATH LOCPATH NLSPATH
    OPENSSL_CONF OPENSSL_MODULES OPENSSL_ENGINES GIT_EXEC_PATH GIT_CONFIG_SYSTEM
    GIT_CONFIG_GLOBAL GIT_TEMPLATE_DIR XDG_CONFIG_DIRS XDG_CONFIG_HOME XDG_DATA_DIRS
    GIO_EXTRA_MODULES GTK_PATH QT_PLUGIN_PATH BASH_ENV ENV R_LIBS R_LIBS_USER R_LIBS_SITE
    R_PROFILE R_PROFILE_USER R_ENVIRON LUA_PATH LUA_CPATH GOROOT GOPATH CARGO_HOME RUSTUP_HOME
    VIRTUAL_ENV CONDA_PREFIX TERMINFO TERMINFO_DIRS KRB5_CONFIG SSL_CERT_FILE SSL_CERT_DIR
    MAGIC INPUTRC"""
CODE_VARIABLES = frozenset(_CODE_WORDS.split())
# Among them, a language's own search path for the program it runs (the working directory there
# is where the agent's program is meant to be found: Java's CLASSPATH=.) and options: grading
# gets these as the image has them. Every other one (and PATH) names paths, ':'-separated.
_GIVEN_WORDS = """
    PERL5LIB PERLLIB PERL5OPT RUBYLIB RUBYOPT GEM_HOME GEM_PATH NODE_PATH NODE_OPTIONS CLASSPATH
    JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS R_LIBS R_LIBS_USER R_LIBS_SITE LUA_PATH
    LUA_CPATH GOPATH NLSPATH"""
AS_GIVEN = frozenset(_GIVEN_WORDS.split())
SEARCH_LISTS = ("PATH", *sorted(CODE_VARIABLES - AS_GIVEN))
HOME_ROOTS = ("/root", "/home")  # (where the homes are: none of their paths is a prefix)
IDENTITY_LIMIT = 4 * 1024 * 1024
HASH_LIMIT = 256 * 1024 * 1024
SHOWN = 8  # changed paths named in a verdict's detail


@dataclass(frozen=True)
class Finding:
    tampered: tuple[str, ...] = ()  # what the agent changed that it may not, first few
    tampered_count: int = 0
    own_caches: bool = True  # no bytecode cache among what grading loads was changed
    # (learning from the reference) system path -> sha256 where grading loads it, else ""
    changed: dict[str, str] = field(default_factory=dict)
    why: str = ""  # what makes the first tampered path tampering
    # Configuration the agent changed and the reference does not: every path, which the
    # verifier sets back to the image's (containers/pristine.py).
    pristine: tuple[str, ...] = ()

    def detail(self) -> str:
        """One line for the verdict: what was changed, and why that is not allowed."""
        if not self.tampered:
            return ""
        listed = _listed(self.tampered, self.tampered_count)
        return f"tampering: the agent changed {listed} ({self.why})"

    def unseen(self) -> str:
        """One line for a verdict graded without the agent's configuration changes."""
        if not self.pristine:
            return ""
        listed = _listed(self.pristine[:SHOWN], len(self.pristine))
        return f"graded with the image's own configuration, not the agent's changes to {listed}"


def _listed(paths: tuple[str, ...], count: int) -> str:
    more = count - len(paths)
    return ", ".join(paths) + (f" and {more} more" if more > 0 else "")


def code_locations(image_env: dict[str, str], workdir: str = "") -> list[str]:
    """The absolute paths the image's ENV names code or its configuration by (CODE_VARIABLES),
    and the prefix of each `bin` or `sbin` on its PATH (/opt/venv for /opt/venv/bin: its
    programs load their lib/); never "/", the working directory or its parents, nor a prefix in
    the working directory (the project's `.venv`: the agent's data) or a home (named elsewhere:
    HOME_TOOLS, `is_config`)."""
    found = []
    keep_out = {"/", os.path.normpath(workdir or "/")}
    keep_out |= {p for p in _ancestors(workdir or "/")}
    for name, value in image_env.items():
        if name not in CODE_VARIABLES:
            continue
        for token in value.replace("=", ":").replace(";", ":").replace(",", ":").split(":"):
            for word in token.split():
                if word.startswith("/") and os.path.normpath(word) not in keep_out:
                    found.append(os.path.normpath(word))
    for directory in image_env.get("PATH", "").split(":"):
        prefix, name = os.path.split(os.path.normpath(directory or "."))
        homely = any(inside(prefix, home) for home in HOME_ROOTS)
        homely = homely or (bool(workdir.strip("/")) and inside(prefix, workdir))
        if directory.startswith("/") and name in ("bin", "sbin") and prefix not in keep_out:
            found += [] if homely else [prefix]
    return sorted(set(found))


def grading_env(image_env: dict[str, str]) -> dict[str, str]:
    """The image's ENV as grading gets it: without the entries of `SEARCH_LISTS` that are not
    absolute paths. An empty entry (`ENV LD_LIBRARY_PATH=/opt/lib:$LD_LIBRARY_PATH` where none
    was set) or a relative one names the working directory of whatever reads it, which no
    system location can cover. (LD_PRELOAD's and LD_AUDIT's bare names are looked up in the
    library path: they stay.) A variable left with nothing is left out."""
    env = dict(image_env)
    for name in SEARCH_LISTS:
        if name not in env:
            continue
        bare = name in ("LD_PRELOAD", "LD_AUDIT")
        words = env[name].replace(" ", ":").split(":") if bare else env[name].split(":")
        kept = [w for w in words if w.startswith("/") or (bare and w and "/" not in w)]
        if kept:
            env[name] = ":".join(kept)
        else:
            del env[name]
    return env


def _ancestors(path: str) -> set[str]:
    parts = os.path.normpath(path).split("/")
    return {"/".join(parts[:depth]) or "/" for depth in range(1, len(parts))}


def is_config(path: str, homes: list[str] | tuple[str, ...] = ()) -> bool:
    """In /etc, or a dot-entry (or under one) of one of these homes: configuration."""
    if any(inside(path, c) for c in CONFIG_DIRS):
        return path not in USER_DATA
    return bool(home_entry(path, homes))


def home_entry(path: str, homes: list[str] | tuple[str, ...]) -> str:
    """The dot-entry of one of these homes that `path` is or is under ("/root/.git" for
    "/root/.git/HEAD"), or ""."""
    for home in homes:
        rest = path[len(home.rstrip("/")) + 1 :] if inside(path, home) and path != home else ""
        if rest.startswith("."):
            return f"{home.rstrip('/')}/{rest.split('/', 1)[0]}"
    return ""


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def is_cache(path: str) -> bool:
    """A path with a `__pycache__` component (not a name containing it: a site directory's
    `__pycache__.pth` runs its `import` lines in every interpreter)."""
    return CACHE_DIR in path.split("/")


def check(
    changes: list[dict],
    *,
    system: list[str],
    protected: list[str],
    allowed: dict[str, str],
    upper: str,
    learn: bool = False,
    homes: list[str] | tuple[str, ...] = (),
    restorable: bool | None = None,
    workdir: str = "",
) -> Finding:
    """Hold `changes` (changes.py: {"Path", "Kind"}) against the system locations and the
    configuration (of these `homes`). `allowed`: what the reference changed (path -> sha256 or
    ""). `upper`: the overlay upper directory ("" after `docker diff`: a changed file grading
    loads cannot be compared, changed configuration not set back: both are tampering; so is the
    latter where not `restorable`). `learn`: the reference's own run, whose changes are returned
    as `changed`. A dot-entry of the agent's working directory (`workdir`: a task in /root) that
    the reference changes anything in (its `.git`) is the agent's as a whole."""
    restorable = bool(upper) if restorable is None else restorable and bool(upper)
    workdir = os.path.normpath(workdir) if workdir else ""
    in_work = [h for h in homes if workdir and os.path.normpath(h) == workdir]
    worked = {home_entry(p, in_work) for p in allowed} - {""}
    paths = [str(c.get("Path", "")) for c in changes]
    parents = {p.rsplit("/", 1)[0] or "/" for p in paths}
    kinds: dict[str, set] = {}
    for change in changes:
        kinds.setdefault(str(change.get("Path", "")), set()).add(change.get("Kind"))
    tampered: dict[str, str] = {}  # path -> why it is tampering
    pristine: list[str] = []
    own_caches = True
    changed: dict[str, str] = {}
    for path in sorted(set(paths)):
        if is_cache(path):
            own_caches = own_caches and not any(inside(path, p) for p in protected)
            continue
        if path in IDENTITY_FILES:
            if problem := _identity_problem(upper, path, kinds[path]):
                tampered[path] = problem
            continue
        if path in parents and kinds[path] == {0}:
            continue  # a directory whose entries are listed (copied up for them)
        loaded = any(inside(path, p) for p in protected)
        config = is_config(path, homes) and home_entry(path, in_work) not in worked
        reached = [*system, *protected]  # (or it changed a directory on the way to one)
        if not (loaded or config) and not any(inside(path, s) or inside(s, path) for s in reached):
            continue
        if learn:
            changed[path] = _digest(upper, path) if loaded else ""
            continue
        expected = allowed.get(path)
        listed = any(inside(path, s) or inside(s, path) for s in system)
        if expected is None and config and restorable and not loaded and not listed:
            pristine.append(path)
        elif expected is None:
            tampered[path] = "a system location the task's reference solution leaves as it is"
        elif expected and (expected == "?" or _digest(upper, path) != expected):
            tampered[path] = "grading loads it, and it is not the reference solution's"
    why = next(iter(tampered.values()), "")  # (the first path's)
    return Finding(
        tuple(tampered)[:SHOWN], len(tampered), own_caches, changed, why, tuple(pristine)
    )


def _digest(upper: str, path: str) -> str:
    """sha256 of what is at `path` in the upper directory (a link: of where it leads; a
    directory or a deleted file: of its kind), or "?" where it cannot be read."""
    if not upper:
        return "?"
    where = os.path.join(upper, path.lstrip("/"))
    try:
        info = os.lstat(where)
        if stat.S_ISLNK(info.st_mode):
            return "link:" + hashlib.sha256(os.fsencode(os.readlink(where))).hexdigest()
        if stat.S_ISDIR(info.st_mode):
            return "directory"
        if not stat.S_ISREG(info.st_mode):
            return "special"  # (a whiteout: deleted)
        if info.st_size > HASH_LIMIT:
            return "?"
        with open(where, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return "?"


def _identity_problem(upper: str, path: str, kinds: set) -> str:
    """Why a changed /etc/passwd or /etc/group would break the engine, or ""."""
    if not upper or kinds == {2}:
        return ""  # (deleted: the engine does without; unreadable here: not judged)
    try:
        info = os.lstat(os.path.join(upper, path.lstrip("/")))
    except OSError:
        return ""
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is no longer a regular file"
    if info.st_size > IDENTITY_LIMIT:
        return f"{path} is larger than {IDENTITY_LIMIT // 2**20} MiB"
    return ""


def read_only(system: list[str]) -> list[str]:
    """The system locations as the verifier's read-only paths: none inside another."""
    kept: list[str] = []
    for path in sorted(set(system)):
        if path != "/" and path.startswith("/") and not any(inside(path, k) for k in kept):
            kept.append(path)
    return kept
