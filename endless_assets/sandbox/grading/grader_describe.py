"""The grader's self-description, sent with its hello (grader.py), seen before any agent command:
what a verdict in a snapshot of the container holds the agent's changes against (verifier.py,
system_paths.py). A part of the grader's source (grader_source.py).

- `protected`: what grading runs and loads: the interpreter, its loaded files and module search
  path, the loader and its configuration, the harness's programs, the names leading to them;
  where a snapshot may be graded ($ENDLESS_LOADS) also every library they could load later
  (`library_closure`, from their ELF headers) and OpenSSL's configuration (`openssl_config`);
- `system`: the system locations (docs/sandbox.md lists them), each with its resolved path and
  the links leading to it; the verifier mounts them read-only;
- `homes`: root's home, whose dot-entries are configuration (system_paths.is_config)."""

import contextlib
import os
import shutil
import sys

HARNESS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
LOADER_FILES = ("/etc/ld.so.preload", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = (*LOADER_FILES, "/etc/nsswitch.conf", "/etc/host.conf", "/etc/alternatives")
HOME_TOOLS = (".local/bin", ".local/lib", ".cargo/bin", "bin")
LIBRARY_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib")
PATH_DIRS_VARIABLE = "ENDLESS_PATH_DIRS"
CODE_DIRS_VARIABLE = "ENDLESS_CODE_DIRS"  # the paths the image's ENV names code by (verdict.py)
LOADS_VARIABLE = "ENDLESS_LOADS"  # set: describe all that grading could load (verdict.py)
READ_ONLY_VARIABLE = "ENDLESS_READ_ONLY"


def elf_segments(fh):
    """(its integer reader, [(type, offset, address, size)] of its program headers) of an open
    64-bit ELF file; None if it is not one."""
    head = fh.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
        return None
    order = "little" if head[5] == 1 else "big"

    def number(data):
        return int.from_bytes(data, order)

    phoff, size, count = number(head[32:40]), number(head[54:56]), number(head[56:58])
    fh.seek(phoff)
    table = fh.read(size * min(count, 64))
    fields = ((0, 4), (8, 16), (16, 24), (32, 40))
    return number, [
        tuple(number(table[at + i : at + j]) for i, j in fields)
        for at in range(0, len(table) - size + 1, size)
    ]


def elf_interpreter(path):
    """The dynamic loader an ELF executable names (PT_INTERP), or ""."""
    try:
        with open(path, "rb") as fh:
            for kind, offset, _, size in (elf_segments(fh) or (None, []))[1]:
                if kind == 3:
                    fh.seek(offset)
                    return fh.read(min(size, 4096)).rstrip(b"\0").decode("utf-8", "replace")
    except (OSError, ValueError):
        pass
    return ""


def describe():
    """What grading here runs and loads, and the system locations (see the module docstring)."""
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
    modules = []  # (extension modules, found on the way)
    paths.update(link_targets([p for p in search if os.path.isdir(p)], modules=modules))
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
    # Where a verdict may be given in a snapshot of this container (a root agent's, an imported
    # task's): every library grading could load later (a test's `import sqlite3`), not only those
    # loaded now, and the configuration OpenSSL reads when a process first uses it (`import
    # hashlib`). A file the reference solution changes among these must be the reference's.
    if os.environ.get(LOADS_VARIABLE):
        mapped = [p for p in paths if ".so" in os.path.basename(p)]
        roots = [os.path.realpath(p) for p in [sys.executable, *programs.values()]]
        paths.update(library_closure([*roots, *mapped, *modules]))
        paths.update(openssl_config(paths))
    paths.update(other_names(paths))
    interpreter = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]
    return {
        "programs": programs,
        "protected": sorted(paths),
        "interpreter": interpreter,
        "system": system_locations(paths),
        "homes": sorted(homes_of_root()),
        "absent": [p for p in LOADER_FILES if not os.path.lexists(p)],
        "writable": writable(os.environ.get(READ_ONLY_VARIABLE, "")),
    }


def writable(paths):
    """Which of these paths (":"-separated: those a verifier asked the engine to make read-only)
    are on a writable mount: an engine that ignored the request."""
    found = []
    for path in filter(None, paths.split(":")):
        with contextlib.suppress(OSError):
            if not os.statvfs(path).f_flag & os.ST_RDONLY:
                found.append(path)
    return found


def system_locations(protected):
    """The system locations (module docstring), as absolute paths, resolved and not."""
    found = set(SYSTEM_TREES) | set(SYSTEM_FILES)
    with contextlib.suppress(OSError), os.scandir("/etc") as entries:
        found.update(e.path for e in entries if e.name.startswith("python"))
    for variable in (PATH_DIRS_VARIABLE, CODE_DIRS_VARIABLE):
        for directory in os.environ.get(variable, "").split(":"):
            if directory.startswith("/") and os.path.normpath(directory) != "/":
                found.add(os.path.normpath(directory))
    for home in homes_of_root():
        found.update(os.path.join(home, sub) for sub in HOME_TOOLS)
    # The interpreter's own trees, wherever they are (a virtualenv under /opt, say).
    found.update(p for p in protected if os.path.isdir(p) and p != "/")
    found.update(os.path.realpath(p) for p in list(found))
    found.update(other_names(found))
    return sorted(p for p in found if p != "/")


def homes_of_root(known=[]):  # noqa: B006 (asked once: an NSS lookup)
    if not known:
        homes = {"/root"}
        with contextlib.suppress(KeyError, ImportError, OSError):
            import pwd

            homes.add(pwd.getpwuid(0).pw_dir or "/root")
        known.append({h for h in homes if h.startswith("/") and h != "/"})
    return known[0]


def other_names(paths):
    """The other names leading to these files, which a root agent could point elsewhere: the links
    directly under / (a merged /usr's /bin, /lib: `#!/bin/bash`), those among the paths'
    ancestors, and those beside a file leading to it (`libexpat.so.1`: the loader's name)."""
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


def link_targets(directories, limit=100_000, modules=None):
    """Where the links under `directories` lead (Debian's sitecustomize.py: into /etc), adding the
    extension modules found on the way to `modules`."""
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
            elif modules is not None and entry.name.endswith(".so"):
                modules.append(entry.path)
    return found


def elf_needed(path):
    """(DT_NEEDED sonames, DT_RUNPATH/DT_RPATH directories) of a 64-bit ELF file."""
    try:
        with open(path, "rb") as fh:
            found = elf_segments(fh)
            if found is None:
                return [], []
            number, segments = found
            loads = [(vaddr, offset, size) for kind, offset, vaddr, size in segments if kind == 1]
            dynamic = ([(o, n) for kind, o, _, n in segments if kind == 2] or [None])[-1]
            if dynamic is None:
                return [], []
            fh.seek(dynamic[0])
            entries = fh.read(min(dynamic[1], 1 << 16))
            tags = [(number(entries[i : i + 8]), number(entries[i + 8 : i + 16]))
                    for i in range(0, len(entries) - 15, 16)]  # fmt: skip
            strtab = next((value for tag, value in tags if tag == 5), None)
            spans = [(v, o, n) for v, o, n in loads if strtab and v <= strtab < v + n]
            base = spans[0][1] + strtab - spans[0][0] if spans else None
            if base is None:
                return [], []

            def text(at):
                fh.seek(base + at)
                return fh.read(4096).split(b"\0", 1)[0].decode("utf-8", "replace")

            needed = [text(value) for tag, value in tags if tag == 1]
            search = [text(value) for tag, value in tags if tag in (15, 29)]
            origin = os.path.dirname(os.path.realpath(path))
            dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin)
                    for entry in search for d in entry.split(":") if d]  # fmt: skip
            return needed, dirs
    except (OSError, ValueError):
        return [], []


def library_closure(files, limit=4000):
    """Every shared library that these ELF files load, directly or not, found where the loader
    looks: their run paths, the image's library directories, the directories of those given."""
    directories = os.environ.get(CODE_DIRS_VARIABLE, "").split(":")
    for root in LIBRARY_DIRS:
        with contextlib.suppress(OSError), os.scandir(root) as entries:
            directories += [e.path for e in entries if e.is_dir() and "-linux-" in e.name]
    directories += [*LIBRARY_DIRS, *(os.path.dirname(f) for f in files)]
    directories = list(dict.fromkeys(d for d in directories if d.startswith("/")))
    found, pending, seen, where = set(), list(files), set(), {}
    while pending and len(seen) < limit:
        path = os.path.realpath(pending.pop())
        if path in seen:
            continue
        seen.add(path)
        needed, run_paths = elf_needed(path)
        for soname in needed:
            if run_paths or soname not in where:
                look = (os.path.join(d, soname) for d in [*run_paths, *directories])
                where[soname] = next((c for c in look if os.path.exists(c)), "")
            if where[soname]:
                found.update((where[soname], os.path.realpath(where[soname])))
                pending.append(where[soname])
    return found


def openssl_config(loaded):
    """The file OpenSSL reads its configuration from when a process first uses it (`import
    hashlib`: its providers and engines are code), as the libcrypto among `loaded` says."""
    found = set()
    crypto = sorted(p for p in loaded if os.path.basename(p).startswith("libcrypto.so"))
    with contextlib.suppress(OSError, AttributeError, IndexError):
        import ctypes

        library = ctypes.CDLL(crypto[0])
        library.OpenSSL_version.restype = ctypes.c_char_p
        text = library.OpenSSL_version(4).decode()  # OPENSSL_DIR: 'OPENSSLDIR: "/usr/lib/ssl"'
        directory = text.split('"')[1]
        path = os.environ.get("OPENSSL_CONF") or os.path.join(directory, "openssl.cnf")
        found.update((path, os.path.realpath(path)))
    return found
