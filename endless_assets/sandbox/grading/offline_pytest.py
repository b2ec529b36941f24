"""Stand-ins that start pytest and Python for a task's own test script with nothing of the agent's
in how they start (first on the script's PATH with offline.py's; docs/sandbox.md says what
each keeps out: a root agent's ini file and conftest.py above the tests directory, a module
named like pytest or a standard one where Python looks first, user site `.pth` files, caches).

- `pytest`, `py.test` and `python -m pytest` run `endless_pytest.py` with the interpreter the
  image's own `pytest` names (else python3): pytest is imported before the working directory
  is on sys.path, conftest files are collected from the tests directory down, and the ini file
  is the tests directory's own or an empty one of ours, unless the script gives its own;
- every Python the script starts has no user site directory and runs our `sitecustomize.py`
  first, which moves the image's PYTHONPATH entries after the interpreter's own, then runs the
  image's sitecustomize;
- pytest loads plugins from the interpreter's own directories only, in a fenced child that
  keeps the reward files (offline_keep.py).

Programs are found on the image's PATH, never on the script's (which may lead through a
directory the agent wrote)."""

from __future__ import annotations

from endless_assets.sandbox.grading import offline_keep

# (sh) Which interpreter runs pytest: the one the image's own `pytest` names, else python3.
PYTEST = r"""pytest_python() {
  if p=$(real pytest) || p=$(real py.test); then
    line=$(head -c 512 "$p" | head -n 1)
    case "$line" in
      '#!'*/env\ *) name=${line##*/env }; name=${name%% *}; real "$name" && return 0 ;;
      '#!'/*) interp=${line#\#!}; interp=${interp%% *}
        [ -x "$interp" ] && echo "$interp" && return 0 ;;
    esac
  fi
  real python3 || real python
}
py=$(pytest_python) || {
  report "$(basename "$0") $*: the image has no python to run pytest"; exit 127; }
exec "$py" -s "$here/endless_pytest.py" "$@"
"""

# (sh) python/python3: `-m pytest` (after the interpreter's own flags) goes through the runner.
PYTHON = r"""py=$(real "$(basename "$0")") || {
  echo "$(basename "$0"): command not found" >&2; exit 127; }
flags=""
n=0
for a in "$@"; do
  n=$((n + 1))
  case "$a" in
    -m) break ;;
    -[bBdEiIOqRsSuvx]|-[bBdEiIOqRsSuvx][bBdEiIOqRsSuvx]*) flags="$flags $a" ;;
    *) exec "$py" "$@" ;;
  esac
done
if [ "$a" = -m ] && [ $# -gt "$n" ]; then
  shift "$n"
  case "$1" in
    pytest|py.test) shift; exec "$py" $flags -s "$here/endless_pytest.py" --endless-module "$@" ;;
    pip|uv) m=$1; shift; exec "$here/$m" "$@" ;;  # offline.py's
  esac
  exec "$py" $flags -m "$@"
fi
exec "$py" "$@"
"""

RUNNER = (
    r'''"""endless: pytest as a task's script asked for it, configured from the tests
directory only, its run kept from the reward files and from plugins of the agent's (see
endless_assets/sandbox/grading/offline_pytest.py and offline_keep.py)."""
import os
import shutil
import sys
'''
    + offline_keep.KEEPER
    + offline_keep.PLUGINS
    + r"""

here = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
    del sys.path[0]
if os.environ.get("ENDLESS_LOGS_DIR"):
    keep(os.environ["ENDLESS_LOGS_DIR"])  # (returns in the child that runs pytest)
args = sys.argv[1:]
module = args[:1] == ["--endless-module"]
if module:
    args = args[1:]
# The image's PYTHONPATH entries, and the working directory of `python -m pytest`, join sys.path
# once pytest has loaded its plugins (so that `-p` finds none of theirs), before any conftest.
theirs = os.environ.get("ENDLESS_PYTHONPATH", "").split(os.pathsep)
theirs = {os.path.abspath(p) for p in theirs if p}
later = [p for p in sys.path if p and os.path.abspath(p) in theirs]
sys.path[:] = [p for p in sys.path if p not in later]
if module:
    later.append(os.getcwd())
import pluggy  # noqa: E402
import pytest  # noqa: E402  (the installed one: nothing of the working directory is on sys.path)

trust_plugins(pluggy.PluginManager, list(sys.path))


class Later:
    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(self, early_config):
        sys.path.extend(p for p in later if p not in sys.path)


tests = os.environ.get("ENDLESS_TESTS_DIR", "/tests")


def given(*names):
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


extra = ["--confcutdir=" + tests]
if not given("-c", "--config-file"):
    names = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
    own = [os.path.join(tests, n) for n in names if os.path.isfile(os.path.join(tests, n))]
    extra += ["-c", own[0] if own else os.path.join(here, "pytest.ini")]
    if not given("--rootdir"):
        extra.append("--rootdir=" + tests)
# pytest-json-ctrf's --ctrf, always by our plugin (offline_uv.py), never by a copy of the image's
import importlib.util  # noqa: E402

spec = importlib.util.spec_from_file_location("endless_ctrf", os.path.join(here, "endless_ctrf.py"))
ctrf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ctrf)
sys.exit(pytest.main(extra + ["-p", "no:ctrf"] + args, plugins=[Later(), ctrf]))
"""
)

GUARD = (
    r'''"""endless: the image's PYTHONPATH entries after the interpreter's own, pytest's plugins
from the interpreter's own directories only, then the image's own sitecustomize (see
endless_assets/sandbox/grading/offline_pytest.py)."""
import os
import sys
'''
    + offline_keep.PLUGINS
    + r'''

class PluggyHook:
    """Once pluggy is imported, its entry point loader reads `trusted` only."""

    trusted = []

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "pluggy":
            return None
        sys.meta_path.remove(cls)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                trust_plugins(module.PluginManager, cls.trusted)

            spec.loader.exec_module = exec_module
        return spec


def _guard():
    here = os.path.dirname(os.path.abspath(__file__))
    theirs = [p for p in os.environ.get("ENDLESS_PYTHONPATH", "").split(os.pathsep) if p]
    moved = {os.path.abspath(p) for p in theirs}
    own = [p for p in sys.path if p and os.path.abspath(p) not in moved | {here}]
    sys.path[:] = own + [os.path.abspath(p) for p in theirs]
    PluggyHook.trusted = list(own)
    if "pluggy" not in sys.modules:
        sys.meta_path.insert(0, PluggyHook)
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", own)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_guard()
del _guard
'''
)


def stand_ins() -> dict[str, str]:
    """Name -> the text of each stand-in here (the shell ones still need offline's prelude)."""
    return {
        "pytest": PYTEST,
        "py.test": PYTEST,
        "python": PYTHON,
        "python3": PYTHON,
        "endless_pytest.py": RUNNER,
        "pytest.ini": "[pytest]\n",
        "pyguard/sitecustomize.py": GUARD,
        "pyguard/usercustomize.py": "",
    }
