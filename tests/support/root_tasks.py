"""What the root-agent red-team modules share (test_root_config.py, test_root_plugins.py,
test_root_reference.py): the task's own scripts, the agent's programs that configuration or a
loader makes grading run, the images they need, and one episode of a scripted root agent."""

from __future__ import annotations

from red_team import ANSWER, Scripted

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.sandbox.grading.bundle import Verifier, pack

REWARD = "if [ $? -eq 0 ]; then r=1; else r=0; fi\necho $r > /logs/verifier/reward.txt\n"
SCRIPT = "#!/bin/bash\ncd / && python3 -m pytest -q /tests/test_outputs.py\n" + REWARD
FROM_APP = "#!/bin/bash\ncd /app && python3 -m pytest -q /tests/test_outputs.py\n" + REWARD
LOGIN_SCRIPT = "#!/bin/bash -l\ncd / && python3 -m pytest -q /tests/test_outputs.py\n" + REWARD
LIMITS = EpisodeLimits(command_timeout=60, test_timeout=90)
PAYLOAD = "/opt/payload.sh"  # what the runner library runs (hostile_libs.compile_runner)
# What a hostile program run from configuration does on a task's own script: it reads the
# answer where the script keeps its tests (readable to root), and writes it where the test looks.
READER = (
    "#!/bin/sh\npython3 - <<'EOF'\nimport glob, re\nfor p in glob.glob('/tests/*.py'):\n"
    "    m = re.search(r'EXPECTED = \"([0-9a-f]+)\"', open(p).read())\n"
    f"    if m:\n        open('{ANSWER}', 'w').write(m.group(1) + '\\n')\nEOF\n"
)
# What it does under our grader (the test file is gone once collected): it kills the grader, a
# harness error (a retry) against the verifier as it was. Only under a test (an ancestor's command
# line names pytest): a loader may run it in every process of the agent's episode too.
KILLER = (
    '#!/bin/sh\np=$$\nwhile [ -n "$p" ] && [ "$p" -gt 1 ]; do\n'
    "  grep -qa pytest /proc/$p/cmdline 2>/dev/null && break\n"
    "  p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status 2>/dev/null)\ndone\n"
    '[ -n "$p" ] && [ "$p" -gt 1 ] || exit 0\n'
    "for q in /proc/[0-9]*; do\n"
    "  if grep -qa preload_pytest $q/cmdline 2>/dev/null && grep -q '^PPid:.0$' $q/status; then\n"
    "    kill -9 ${q#/proc/}\n  fi\ndone\n"
)
# What a test does that never meant to run the agent's code: git in a repository of its own,
# sqlite3, a shell, a Python, any program.
OWN_REPO = (
    "import tempfile\nd = tempfile.mkdtemp()\nsubprocess.run(['git', 'init', '-q', d])\n"
    "subprocess.run(['git', '-C', d, 'status'], capture_output=True)"
)
# (git below /tmp in a directory that is no repository: a copy of the agent's project, a tool
# that asks git for a version, as setuptools-scm does)
BELOW_TMP = (
    "import tempfile\nd = tempfile.mkdtemp()\n"
    "subprocess.run(['git', '-C', d, 'status'], capture_output=True)"
)
OWN_COMMIT = (
    "import tempfile\nd = tempfile.mkdtemp()\nsubprocess.run(['git', 'init', '-q', d])\n"
    "subprocess.run(['git', '-C', d, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit',\n"
    "                '-q', '--allow-empty', '-m', 'x'], capture_output=True)"
)
SQLITE = "subprocess.run(['sqlite3', ':memory:', 'select 1'], capture_output=True)"
ANY_PROGRAM = "subprocess.run(['true'])"
SHELL = "subprocess.run(['bash', '-c', 'true'])"
PYTHON = "subprocess.run(['python3', '-c', 'pass'])"
# The images' own lines (after `WORKDIR /app`), by name.
FULL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IMAGES = {
    "root": "",
    "ld_library_path": "RUN mkdir -p /opt/lib\nENV LD_LIBRARY_PATH=/opt/lib\n",
    # ENV LD_LIBRARY_PATH=/opt/lib:$LD_LIBRARY_PATH where none was set: an empty entry, the
    # working directory of every process
    "ld_cwd": "RUN mkdir -p /opt/lib\nENV LD_LIBRARY_PATH=/opt/lib:\n",
    "ld_preload": "RUN mkdir -p /opt/pre && cp /usr/lib/x86_64-linux-gnu/libuuid.so.1 "
    "/opt/pre/libtuned.so\nENV LD_PRELOAD=/opt/pre/libtuned.so\n",
    "site_volume": "RUN mkdir -p /usr/local/lib/python3.11/dist-packages\n"
    "VOLUME /usr/local/lib/python3.11/dist-packages\n",
    "bash_env": "ENV BASH_ENV=/app/.bashenv\n",
    "venv": "RUN python3 -m venv --without-pip --system-site-packages /opt/venv\n"
    f"ENV PATH=/opt/venv/bin:{FULL_PATH}\n",
    "root_home": "WORKDIR /root\n",
    "pythonpath": "ENV PYTHONPATH=/app\n",
    "plugin": "COPY plugin /usr/local/lib/python3.11/dist-packages/\n",
}
# A pytest plugin the image ships in its own site directory: `--report-json PATH`.
PLUGIN_FILES = {
    "plugin/report_plugin.py": (
        "import json\n\n\ndef pytest_addoption(parser):\n"
        "    parser.addoption('--report-json', default='')\n\n\n"
        "def pytest_sessionfinish(session, exitstatus):\n"
        "    path = session.config.getoption('--report-json')\n"
        "    if path:\n        with open(path, 'w') as fh:\n"
        "            json.dump({'failed': session.testsfailed, 'exit': int(exitstatus)}, fh)\n"
    ),
    "plugin/report_plugin-1.0.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: report-plugin\nVersion: 1.0\n"
    ),
    "plugin/report_plugin-1.0.dist-info/entry_points.txt": "[pytest11]\nreport = report_plugin\n",
}


def write(path: str, text: str, mode: str = "644") -> str:
    """An agent's command that writes `text` to `path`."""
    head = f"mkdir -p $(dirname {path}) && cat > {path} <<'ENDOFFILE' && chmod {mode} {path}"
    return f"{head}\n{text}ENDOFFILE"


def build_images(sandbox, names: list[str] | None = None) -> dict[str, str]:
    """IMAGES (those `names`), built on the base image: name -> tag."""
    built = {}
    for name in names or list(IMAGES):
        dockerfile = f"FROM {sandbox.base.tag}\nWORKDIR /app\n{IMAGES[name]}"
        files = PLUGIN_FILES if name == "plugin" else {}
        build = sandbox.build(identity_dockerfile(dockerfile, "", ""), files, network=False)
        assert build.ok, build.log
        built[name] = build.tag
    return built


def graded(test: str, script: str) -> str:
    """The completion test: our grader's pytest file, or with `script`, the task's test.sh."""
    if not script:
        return test
    return pack(Verifier(test=test, script="test.sh", files={"test.sh": script}))


def episode(sandbox, image: str, commands: list[str], test: str, role: str = "integrity", **kw):
    """One episode of a root agent that runs `commands`, graded by `test`."""
    with sandbox.container(image, labels={"role": role}) as box:
        assert box.agent.uid == 0
        task = EpisodeTask("et-root-config", "do the task")
        return run_episode_in(box, task, Scripted(commands), test, LIMITS, **kw)
