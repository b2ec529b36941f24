"""The offline uv, uvx and pip (offline.py's stand-ins run this program with the interpreter the
first grader ran), and pytest-json-ctrf's `--ctrf` report (a plugin of offline_pytest.py's
runner, in its layout: one test per node id).

Arguments are read as uv and pip read them: an option that takes a value is skipped with it,
any other is a flag, so the command that follows is the one uv would run (Terminal-Bench 2's
`uvx -p 3.13 -w pytest==8.4.1 ... pytest --ctrf ... -rA` runs the image's pytest). A package a
step asks for must be in the image, or be one of SERVED; its version is not checked."""

from __future__ import annotations

TOOL = r'''"""endless: uv, uvx and pip served by the image's python (see offline_uv.py)."""
import os
import re
import shlex
import shutil
import sys
from importlib import metadata

# Options that take a value (uv's and pip's; any other option is a flag). Those uv and pip read
# as packages to install are handled where they are read.
VALUE = {
    # uv: global, resolver, index, installer, build, cache, python
    "--cache-dir", "--color", "--directory", "--project", "--config-file", "--preview-features",
    "--python-preference",
    "--allow-insecure-host", "--python", "-p", "--python-platform", "--python-version",
    "--index", "--default-index", "--index-url", "-i", "--extra-index-url", "--find-links",
    "-f", "--index-strategy", "--keyring-provider", "--resolution", "--prerelease",
    "--fork-strategy", "--exclude-newer", "--exclude-newer-package", "--upgrade-package", "-P",
    "--reinstall-package", "--refresh-package", "--link-mode", "--config-setting", "-C",
    "--config-settings", "--config-settings-package", "--no-build-isolation-package",
    "--no-build-package", "--no-binary-package", "--only-binary-package", "--no-binary",
    "--only-binary", "--constraints", "--constraint", "-c", "--overrides", "--build-constraints",
    "--build-constraint", "-b", "--torch-backend", "--env-file", "--from", "--with-editable",
    "--extra", "--no-extra", "--group", "--no-group", "--only-group", "--package", "--target",
    "-t", "--prefix", "--root", "--src", "--output-file", "-o", "--name", "--prompt",
    "--gui-script",
    # pip
    "--platform", "--implementation", "--abi", "--upgrade-strategy", "--global-option",
    "--progress-bar", "--root-user-action", "--report", "--log", "--proxy", "--retries",
    "--timeout", "--exists-action", "--trusted-host", "--cert", "--client-cert", "--use-feature",
    "--log-file", "--local-log",
    "--use-deprecated", "--editable", "-e",
}
RUN_FLAGS = {"--no-binary", "--only-binary"}  # flags of uv run and uvx (values of uv pip's)
WITH = {"--with", "-w"}
REQUIREMENTS = {"--with-requirements", "--requirement", "--requirements", "-r"}
SERVED = {"pytest-json-ctrf", "uv"}  # by the plugin of ours and the stand-in itself


def report(words, why):
    line = " ".join(words) + ": " + why
    with open(os.environ.get("ENDLESS_OFFLINE_REPORT", os.devnull), "a") as fh:
        fh.write(line + "\n")
    print("endless offline: " + line, file=sys.stderr)


def options(args, stop_at_command=True, flags=frozenset()):
    """(options as (name, value or None), the positional arguments, in order). With
    `stop_at_command`, the first positional argument and everything after it are the command
    (what `uvx`/`uv run` hand over to); `--` ends the options either way. `flags`: options
    that take no value here."""
    takes = (VALUE | WITH | REQUIREMENTS) - flags
    found, rest, index = [], [], 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            rest += args[index:]
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if eq or name not in takes:
                found.append((name, value if eq else None))
            else:
                found.append((name, args[index] if index < len(args) else ""))
                index += 1
        elif arg.startswith("-") and len(arg) > 1:
            for at, char in enumerate(arg[1:], start=1):  # a cluster of short options
                name = "-" + char
                if name in takes:
                    value = arg[at + 1:].removeprefix("=")
                    if not value:
                        value = args[index] if index < len(args) else ""
                        index += 1
                    found.append((name, value))
                    break
                found.append((name, None))
        elif stop_at_command:
            rest += args[index - 1:]
            break
        else:
            rest.append(arg)
    return found, rest


def requirements(specs, files):
    """(requirement names, local paths) named by requirement strings and requirement files."""
    names, paths = [], []
    for path in files:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            lines = []
        more = []
        for line in lines:  # an option line splits into words, a requirement stays whole
            line = line.split(" #")[0].strip()
            if line.startswith("-"):
                more += line.split()
            elif line and not line.startswith("#"):
                more.append(line)
        found, rest = options(more, stop_at_command=False)
        inner = [value for name, value in found if name in REQUIREMENTS]
        n, p = requirements(rest, [os.path.join(os.path.dirname(path), f) for f in inner])
        names += n
        paths += p
    for spec in specs:
        spec = spec.strip()
        if spec.startswith((".", "/", "~")) or spec.endswith((".whl", ".tar.gz", ".zip")):
            paths.append(spec)
            continue
        name = re.split(r"[<>=!~;\[ @]", spec, maxsplit=1)[0]
        if name:
            names.append(name)
    return names, paths


def normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def missing(names):
    gone = []
    for name in names:
        if normal(name) in SERVED:
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            gone.append(name)
    return gone


def served(words, specs, files=()):
    """0 if every package `specs` and `files` name is in the image (or SERVED), else 1 (and the
    step is reported)."""
    names, paths = requirements(specs, files)
    if paths:
        report(words, "installs a local project or file (" + ", ".join(paths) + ")")
        return 1
    gone = missing(names)
    if gone:
        report(words, "not installed in the image: " + " ".join(gone))
        return 1
    return 0


def install(words, args):
    """pip install, uv pip install, uv add, uv tool install."""
    found, specs = options(args, stop_at_command=False)
    files = [v for n, v in found if n in REQUIREMENTS]
    editable = [v for n, v in found if n in ("-e", "--editable")]
    return served(words, specs + editable, files)


def directory(found):
    for name, value in found:
        if name == "--directory" and value:
            os.chdir(value)


def run(words, args, module=False):
    """uv run / uvx / uv tool run: the command, with pytest and python served by the image's."""
    found, rest = options(args, flags=RUN_FLAGS)
    if not rest and any(n in ("-V", "--version", "-h", "--help") for n, _ in found):
        print("uv (endless offline stand-in)")
        return 0
    specs = [v for n, v in found if n in WITH or n == "--from"]
    specs = [part for spec in specs for part in spec.split(",")]  # uv's --with a,b
    if served(words, specs, [v for n, v in found if n in REQUIREMENTS]):
        return 1
    directory(found)
    module = module or any(n in ("-m", "--module") for n, _ in found)
    if not rest:
        print("endless offline: provide a command to run", file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    command = re.split(r"[<>=@]", rest[0], maxsplit=1)[0]
    if module:  # uv run -m pytest: python -m pytest
        rest = ["python3", "-m", *rest]
        command = "python3"
    elif command.endswith(".py") or any(n in ("-s", "--script") for n, _ in found):
        rest = ["python3", *rest]
        command = "python3"
    if command in ("pytest", "py.test"):
        runner = os.path.join(here, "endless_pytest.py")
        os.execv(sys.executable, [sys.executable, "-s", runner, *rest[1:]])
    if command in ("python", "python3"):  # (its `-m pytest` goes through the runner)
        os.execv(os.path.join(here, "python3"), ["python3", *rest[1:]])
    try:
        os.execvp(command, [command, *rest[1:]])
    except OSError:
        report(words, command + " is not in the image")
        return 127


VENV_BIN = {"python": "python3", "python3": "python3", "pytest": "pytest", "py.test": "pytest"}
ACTIVATE = """VIRTUAL_ENV=%s; export VIRTUAL_ENV
_OLD_VIRTUAL_PATH=$PATH; PATH=$VIRTUAL_ENV/bin:$PATH; export PATH
deactivate () {
  PATH=$_OLD_VIRTUAL_PATH; export PATH; unset VIRTUAL_ENV _OLD_VIRTUAL_PATH; unset -f deactivate
}
"""


def venv(args):
    """uv venv: an environment whose python and pytest are the stand-ins, its activate script
    putting them first on PATH as uv's does. Whatever is at its path is replaced first, as uv
    does without a terminal (so nothing found there runs: an activate script, a pytest)."""
    _, positional = options(args, stop_at_command=False, flags={"-c"})
    target = os.path.abspath(positional[0] if positional else ".venv")
    if os.path.commonpath([target, os.getcwd()]) == target:  # (/, or the working directory)
        print("error: not replacing " + target + " (the working directory is in it)",
              file=sys.stderr)
        return 2
    if os.path.isdir(target) and not os.path.islink(target):
        print("warning: replacing what is at " + target, file=sys.stderr)
        shutil.rmtree(target)
    elif os.path.lexists(target):
        os.unlink(target)
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(os.path.join(target, "bin"))
    files = {"pyvenv.cfg": "# endless: an offline stand-in's environment\n",
             "bin/activate": ACTIVATE % shlex.quote(target)}
    for name, program in VENV_BIN.items():
        files["bin/" + name] = "#!/bin/sh\nexec %s \"$@\"\n" % shlex.quote(
            os.path.join(here, program))
    for name, text in files.items():
        with open(os.path.join(target, name), "w") as fh:
            fh.write(text)
        if name.startswith("bin/") and name != "bin/activate":
            os.chmod(os.path.join(target, name), 0o755)
    print("Creating virtual environment at: " + target)
    return 0


def pip(words, args):
    """pip's (and uv pip's) subcommands: install is served, the rest are pip's own."""
    _, rest = options(args)
    if rest[:1] in (["install"], ["sync"]):
        return install(words, args[args.index(rest[0]) + 1:])
    try:
        os.execv(sys.executable, [sys.executable, "-m", "pip", *args])
    except OSError:
        return 0


def main(tool, args):
    words = [tool, *args]
    if tool == "uvx":
        return run(words, args)
    if tool in ("pip", "pip3"):
        return pip(words, args)
    found, rest = options(args)
    if not rest or any(n in ("-V", "--version") for n, _ in found):
        print("uv (endless offline stand-in)")
        return 0
    directory(found)
    verb, after = rest[0], rest[1:]
    if verb == "pip":
        return pip(words, after)
    if verb == "add":
        return install(words, after)
    if verb == "run":
        return run(words, after)
    if verb == "tool" and after[:1] == ["run"]:
        return run(words, after[1:])
    if verb == "tool" and after[:1] == ["install"]:
        return install(words, after[1:])
    if verb == "venv":
        return venv(after)
    if verb in ("init", "sync", "lock", "python", "self", "cache", "version", "help"):
        return 0
    report(words, "is not a step endless can serve offline")
    return 2


sys.exit(main(sys.argv[1], sys.argv[2:]))
'''

CTRF = r'''"""endless: pytest-json-ctrf's `--ctrf PATH` (its CTRF JSON report), for every pytest a
task's script starts (see offline_uv.py)."""
import json
import os
import time

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("ctrf", "generate test report in CTR format")
    group.addoption("--ctrf", action="store", help="write a CTRF JSON report to this path")


def pytest_configure(config):
    path = config.getoption("ctrf", None)
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Report(path), "endless_ctrf_report")


class Report:
    def __init__(self, path):
        self.path = path
        self.tests = {}
        self.start = time.time()

    def pytest_runtest_logreport(self, report):
        test = self.tests.setdefault(report.nodeid, {
            "name": report.nodeid, "status": "pending", "duration": 0.0,
            "start": getattr(report, "start", 0), "stop": 0,
            "file_path": report.location[0],
        })
        test["duration"] += report.duration
        test["stop"] = getattr(report, "stop", 0)
        if test["status"] in ("failed", "skipped"):
            return
        if report.skipped:
            test["status"] = "skipped"
        elif report.failed:
            test["status"] = "failed"
            test["raw_status"] = report.when + "_" + report.outcome
            test["message"] = "The test failed in the " + report.when + " phase"
            trace = getattr(report, "longreprtext", "")
            if trace:
                test["trace"] = trace
        elif report.passed:
            test["status"] = "passed"

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        tests = list(self.tests.values())
        summary = {"tests": len(tests)}
        for status in ("passed", "failed", "skipped", "pending", "other"):
            summary[status] = sum(t["status"] == status for t in tests)
        summary.update(start=self.start, stop=time.time())
        tool = {"name": "pytest", "version": pytest.__version__}
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(self.path, "w") as fh:
            json.dump({"results": {"tool": tool, "summary": summary, "tests": tests}}, fh,
                      indent=4, default=str)
'''
