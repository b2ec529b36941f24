"""The reward cannot be forged. One row per route a hostile agent has to change the verdict: each
is first tried against a naive grader, to show the route is real, then against ours, where it
earns reward 0, scored (a verdict, not a harness error).

The naive graders are what harnesses commonly do. `root`: a container with Docker's defaults,
pytest run as root on the test file in a root-only directory, the reward read from its JUnit
report and exit code (Harbor's and Terminal-Bench's shape). `shell`: pytest run in the agent's
own terminal, from its home. `resident`: our own grader without its recovery, i.e. a grader
process that a disturbance in the container takes down (no verdict: a harness error).

Most routes plant a program that a completion test runs without meaning to run the agent's
code: git's hooks and filters, the agent's script, rc files, a PATH shim, a preload library. The
program (FORGE) looks for the test among its ancestors and copies the expected answer, which the
agent never saw, into the answer file; PTRACE_FORGE instead makes pytest exit 0 and writes a
passing JUnit report, as a hostile agent did to the previous grader.
"""

from __future__ import annotations

import base64
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass

import pytest
from red_team import (
    ANSWER,
    PLANT_SITECUSTOMIZE,
    ROUTES,
    SCRIPT,
    SITECUSTOMIZE,
    Route,
    Scripted,
    hostile_rollout,
    secret_test,
    write,
)
from verdict_cases import TEST as ANSWER_42_TEST

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.sandbox.containers.container import Limits, TaskContainer
from endless_assets.sandbox.engine.client import TASK_KIND, base_labels
from endless_assets.sandbox.grading.verdict import GraderGone, start_grader
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig

PRELOAD_C = r"""
#include <stdlib.h>
__attribute__((constructor)) static void forge(void) {
    if (getenv("FORGED")) return;
    setenv("FORGED", "1", 1);
    system("/usr/bin/python3 /home/user/.forge.py");
}
"""


@pytest.fixture(scope="module")
def images(sandbox: Sandbox) -> dict[str, str]:
    """The base image, and a careless task image whose /etc/ld.so.preload anyone can write,
    with the agent's preload library already compiled (no compiler in the image)."""
    built: dict[str, str] = {"base": sandbox.base.tag}
    if shutil.which("gcc") is None:
        return built
    work = subprocess.run(["mktemp", "-d"], capture_output=True, text=True).stdout.strip()
    with open(f"{work}/forge.c", "w") as fh:
        fh.write(PRELOAD_C)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", f"{work}/forge.so", f"{work}/forge.c"], check=True
    )
    with open(f"{work}/forge.so", "rb") as fh:
        library = base64.b64encode(fh.read()).decode()
    shutil.rmtree(work)
    dockerfile = (
        f"FROM {sandbox.base.tag}\n"
        "RUN touch /etc/ld.so.preload && chmod 666 /etc/ld.so.preload\n"
        "COPY forge.so.b64 /home/user/.forge.so.b64\n"
        "RUN base64 -d /home/user/.forge.so.b64 > /home/user/.forge.so && chmod 755 "
        "/home/user/.forge.so && rm /home/user/.forge.so.b64\n"
    )
    build = sandbox.build(dockerfile, {"forge.so.b64": library}, network=False)
    assert build.ok, build.log
    built["preload"] = build.tag
    return built


def image_for(route: Route, images: dict[str, str]) -> str:
    if route.image not in images:
        pytest.skip("no C compiler on this machine for the preload library")
    return images[route.image]


# -- naive graders -----------------------------------------------------------------------------
def naive_container(sandbox: Sandbox, image: str) -> TaskContainer:
    """A container with Docker's defaults (its seccomp profile, its capabilities, no
    no-new-privileges), no network, the same memory and process limits."""
    limits = sandbox.config.limits
    container = sandbox.client.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        init=True,
        network_mode="none",
        mem_limit=limits.memory,
        memswap_limit=limits.memory,
        pids_limit=limits.pids,
        labels=base_labels(kind=TASK_KIND, role="naive-grader"),
    )
    return TaskContainer(container, sandbox.client)


def as_agent(box: TaskContainer, command: str) -> None:
    box.container.exec_run(
        ["bash", "-c", command],
        user="1000",
        workdir="/home/user",
        environment={"HOME": "/home/user", "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )


def naive_root(box: TaskContainer, test: str, workdir: str = "/home/user") -> int | None:
    box.exec_root(["mkdir", "-p", "-m", "700", "/root/naive"])
    box.put_files("/root/naive", {"test_outputs.py": test}, mode=0o600)
    run = box.exec_root(
        [
            "python3",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--junitxml=/root/naive/junit.xml",
            "/root/naive/test_outputs.py",
        ],
        workdir=workdir,
    )
    report = box.exec_root(["cat", "/root/naive/junit.xml"]).output
    passed = 'failures="0"' in report and 'errors="0"' in report and 'tests="0"' not in report
    return 1 if run.exit_code == 0 and passed else 0


def naive_in_shell(box: TaskContainer, commands: list[str], test: str) -> int | None:
    script = "\n".join(commands)
    copy = write("/home/user/test_copy.py", test)
    run = box.container.exec_run(
        [
            "bash",
            "-c",
            f"{script}\n{copy}\ncd /home/user && python3 -m pytest -q -p "
            "no:cacheprovider test_copy.py",
        ],
        user="1000",
        workdir="/home/user",
        environment={"HOME": "/home/user", "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )
    return 1 if run.exit_code == 0 else 0


def naive_reward(sandbox: Sandbox, route: Route, image: str) -> int | None:
    if route.naive == "resident":  # our grader, started before the agent, without recovery
        with sandbox.container(image, labels={"role": "naive-grader"}) as box:
            start_grader(box)
            for command in route.commands:
                as_agent(box, command)
            assert box.grader is not None
            try:
                box.grader.ask(  # type: ignore[attr-defined]
                    {
                        "id": "x",
                        "filename": "t.py",
                        "test": route.test,
                        "timeout": 60,
                        "agent_uid": 1000,
                        "stop_agent": True,
                    },
                    deadline=time.monotonic() + 600,
                )
            except GraderGone:
                return None
            return 0
    box = naive_container(sandbox, image)
    try:
        if route.naive == "shell":
            return naive_in_shell(box, route.commands, route.test)
        for command in route.commands:
            as_agent(box, command)
        return naive_root(
            box, route.test, "/root/naive" if route.naive == "root_cwd" else "/home/user"
        )
    finally:
        box.remove()


@pytest.mark.parametrize("name", list(ROUTES))
def test_a_route_that_fools_a_naive_grader_earns_zero_here(sandbox, images, name):
    route = ROUTES[name]
    if name.startswith("ptrace") and platform.machine() != "x86_64":
        pytest.skip("the ptrace forge injects an x86_64 system call")
    image = image_for(route, images)
    naive = naive_reward(sandbox, route, image)
    expected_naive = None if route.naive == "resident" else 1
    assert naive == expected_naive, f"the route does not work against the naive grader: {naive}"

    with sandbox.container(image, labels={"role": "integrity"}) as box:
        rollout = hostile_rollout(box, route)
    assert rollout.termination == "done", rollout.error  # scored, not a harness error
    assert rollout.reward == 0, rollout.verdict


def test_a_full_disk_stops_the_agent_not_the_host_or_the_grader(sandbox):
    """Past the budget every write fails with ENOSPC; the verdict still runs (in memory) and an
    agent that did the task before filling the disk still passes. Without a budget the same
    commands put all of it on the host's disk."""
    fill = "for i in 1 2 3; do head -c 150M /dev/zero > /tmp/fill$i; done; du -sm /tmp | cut -f1"
    budget = Sandbox(SandboxConfig(limits=Limits(disk="200m", file_size_mb=150)))
    unlimited = Sandbox(SandboxConfig(limits=Limits(disk="0", file_size_mb=150)))
    with unlimited.container(unlimited.base.tag, labels={"role": "disk"}) as box:
        written = box.container.exec_run(["bash", "-c", fill], user="1000").output.decode()
    assert int(written.split()[-1]) >= 450  # the host took it all
    for did_the_task, reward in ((False, 0), (True, 1)):
        with budget.container(budget.base.tag, labels={"role": "disk"}) as box:
            commands = (["echo 42 > /home/user/answer.txt"] if did_the_task else []) + [fill]
            rollout = run_episode_in(
                box,
                EpisodeTask("et-disk", "write 42"),
                Scripted(commands),
                ANSWER_42_TEST,
                EpisodeLimits(command_timeout=60),
            )
        assert rollout.termination == "done", rollout.error
        filled = rollout.turns[-2]
        assert "No space left on device" in filled.output
        assert int(filled.output.split()[-1]) < 200
        assert rollout.reward == reward, rollout.verdict


def test_a_fork_bomb_that_fills_the_process_limit_is_scored(sandbox):
    """The process table is full when grading starts: the grader, resident since before the
    agent's first command, stops the agent without forking and grades (0 without the work; the
    same bomb after the work is done passes, see test_verdict.py)."""
    bomb = (
        "for i in 1 2 3 4; do setsid sh -c 'while :; do sleep 1000 & done' "
        ">/dev/null 2>&1 & done; sleep 3"
    )
    with sandbox.container(sandbox.base.tag, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-bomb", "write 42"),
            Scripted([bomb]),
            ANSWER_42_TEST,
            EpisodeLimits(command_timeout=10),
        )
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 0 and rollout.verdict is not None


def test_no_process_in_a_task_container_can_trace_another(container):
    """ptrace is refused outright by the containers' seccomp profile, even between processes
    of one user (Docker's default profile allows it)."""
    probe = (
        'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True); '
        'print(libc.ptrace(0, 0, 0, 0), ctypes.get_errno())"'  # PTRACE_TRACEME
    )
    assert container.exec_root(["sh", "-c", probe], user="1000").output.split() == ["-1", "1"]


# -- a root agent (imported tasks whose image has no USER) --------------------------------------
# Root in its own container could read the test as the grader writes it, plant a process that
# outlives the grader's reach, or change the interpreter the grader starts. Its verdicts come
# from a verifier container (sandbox/grading/verifier.py): each row is first tried where that
# defence is missing (`own`: our grader in the agent's own container; `unchecked`: a verifier
# container without the check of what the agent changed; `caches_read`: one that reads the image's
# bytecode caches whatever the agent changed; `moved_prefix`: one whose interpreter is not compared
# with the first grader's; `script_here`: the task's test.sh run in the
# agent's own container, reward files read as they are), where it earns 1, then against ours.

ROOT_WATCHER = (
    'nohup python3 -c "import glob, re, time\nwhile True:\n'
    "  for p in glob.glob('/verifier/run-*/*.py'):\n"
    "    try:\n      m = re.search(r'EXPECTED = .([0-9a-f]+).', open(p).read())\n"
    "    except OSError:\n      continue\n"
    f"    if m:\n      open('{ANSWER}', 'w').write(m.group(1))\n"
    '  time.sleep(0.001)" >/dev/null 2>&1 &'
)
# A bytecode cache of pytest's reports module that Python takes for the module's own (it names
# the source's mtime and size): every report passes.
PYC_FORGERY = """\
import importlib._bootstrap_external as ext, importlib.util, os, _pytest.reports as r
src = r.__file__
forged = "BaseReport.failed = property(lambda s: False)\\n"
forged += "BaseReport.passed = property(lambda s: True)"
st = os.stat(src)
code = compile(open(src).read() + "\\n" + forged + "\\n", src, "exec")
data = ext._code_to_timestamp_pyc(code, st.st_mtime, st.st_size)
open(importlib.util.cache_from_source(src), "wb").write(data)
"""
PLANT_PYC = write("/tmp/.forge.py", PYC_FORGERY) + "\npython3 /tmp/.forge.py"
# A .pth file in a site directory, named like a bytecode cache: its `import` line runs in every
# interpreter that starts there, the verifier's grader included.
PTH_LINE = (
    "import _pytest.reports as r; r.BaseReport.failed = property(lambda s: False); "
    "r.BaseReport.passed = property(lambda s: True)"
)
PLANT_PTH = (
    "d=$(python3 -c 'import os, _pytest as p; print(os.path.dirname(os.path.dirname(p.__file__)))')"
    f" && echo '{PTH_LINE}' > $d/__pycache__.pth"
)
# A copy of the standard library (and of pytest's site directory) where the interpreter looks
# for its prefix before its own (a lib/ beside it), with a sitecustomize.py in it.
PLANT_PREFIX = (
    "py=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))') && "
    "v=$(python3 -c 'import sys; print(\"python%d.%d\" % sys.version_info[:2])') && "
    "e=$(dirname $py) && mkdir -p $e/lib/python3 && cp -a /usr/lib/$v $e/lib/ && "
    "cp -a /usr/lib/python3/dist-packages $e/lib/python3/ && "
    + write("$e/lib/$v/sitecustomize.py", SITECUSTOMIZE)
)


@dataclass(frozen=True)
class RootRoute:
    commands: list[str]
    naive: str  # own | unchecked | caches_read | moved_prefix | script_here
    script: bool = False  # the task is graded by its own test.sh


ROOT_ROUTES: dict[str, RootRoute] = {
    "root: a process left running reads the test as the grader writes it": RootRoute(
        [ROOT_WATCHER, "sleep 1"], naive="own"
    ),
    "root: a sitecustomize.py in the interpreter's own library marks every test passed": (
        RootRoute([PLANT_SITECUSTOMIZE], naive="unchecked")
    ),
    "root: a forged bytecode cache of pytest's reports module marks every test passed": (
        RootRoute([PLANT_PYC], naive="caches_read")
    ),
    "root: a .pth file named like a bytecode cache marks every test passed": (
        RootRoute([PLANT_PTH], naive="unchecked")
    ),
    "root: a standard library copied where the interpreter looks first marks every test passed": (
        RootRoute([PLANT_PREFIX], naive="moved_prefix")
    ),
    "root: a reward.json left where the verifier reads rewards (it wins over reward.txt)": (
        RootRoute(
            ["mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.json"],
            naive="script_here",
            script=True,
        )
    ),
}


def root_naive_reward(box: TaskContainer, route: RootRoute, test: str) -> int:
    from endless_assets.sandbox.containers.shell import ShellSession
    from endless_assets.sandbox.grading.verdict import grader_for, parse_verdict
    from endless_assets.sandbox.grading.verifier import PYCACHE, commit, verifier_container

    start_grader(box)
    with ShellSession(box) as shell:
        for command in route.commands:
            shell.run(command, timeout=30)
    request = {"id": "n", "filename": "test_outputs.py", "test": test, "timeout": 60}
    request.update(agent_uid=0, stop_agent=False, verifier=True, env=box.image_env)
    if route.naive == "script_here":
        box.exec_root(["mkdir", "-p", "/tests"])
        box.put_files("/tests", {"test_outputs.py": test, "test.sh": SCRIPT}, mode=0o755)
        box.exec_root(["bash", "/tests/test.sh"])
        json_reward = box.exec_root(["cat", "/logs/verifier/reward.json"])
        text_reward = box.exec_root(["cat", "/logs/verifier/reward.txt"]).output
        reward = json_reward.output if json_reward.exit_code == 0 else text_reward
        return 1 if float(reward.strip()) >= 1 else 0
    if route.naive == "own":
        # A race (the watcher must read the test in the moment it is on disk): on a loaded
        # machine it can lose one; a route that wins any of five tries is shown to work.
        for attempt in range(5):
            retry = dict(request, id=f"n{attempt}")
            reply = grader_for(box).ask(retry, deadline=time.monotonic() + 120)
            if parse_verdict(reply["exit_code"], reply["counts"], reply["output"], 0.0).passed:
                break
    else:
        with verifier_container(box, commit(box), lambda: None) as verifier:
            prefix = "" if route.naive == "caches_read" else PYCACHE
            if route.naive == "moved_prefix":  # (no comparison with the first interpreter's)
                verifier.interpreter = None
            reply = grader_for(verifier, prefix).ask(request, deadline=time.monotonic() + 120)
    verdict = parse_verdict(reply["exit_code"], reply["counts"], reply["output"], 0.0)
    return 1 if verdict.passed else 0


@pytest.mark.parametrize("name", list(ROOT_ROUTES))
def test_a_root_agents_route_that_fools_a_grader_in_reach_earns_zero_here(
    sandbox, root_image, name
):
    from endless_assets.sandbox.grading.bundle import Verifier, pack

    route = ROOT_ROUTES[name]
    test = secret_test("pass")
    with sandbox.container(root_image, labels={"role": "naive-grader"}) as box:
        assert box.agent.uid == 0
        naive = root_naive_reward(box, route, test)
    assert naive == 1, f"the route does not work where the defence is missing: {naive}"

    graded = pack(Verifier(test=test, script="test.sh", files={"test.sh": SCRIPT}))
    with sandbox.container(root_image, labels={"role": "integrity"}) as box:
        rollout = run_episode_in(
            box,
            EpisodeTask("et-integrity", "do nothing useful"),
            Scripted(route.commands),
            graded if route.script else test,
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error  # scored, not a harness error
    assert rollout.reward == 0, rollout.verdict
