"""Podman as a sandbox engine, through its Docker-compatible API socket (docs/sandbox.md).

Real parts: a rootful Podman service on a socket of its own (scripts/ensure-podman.sh installs
and starts it), the Docker engine of the test session (the base image's source), a real Dagster
run of a procedural batch on Podman, and hostile agents from test_reward_integrity.py. Skipped
only when Podman cannot be installed or started here (the reason is the script's own words).
"""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
import subprocess
from pathlib import Path

import dagster as dg
import docker.errors
import pytest
from build_probe import host_address, recorder
from build_probe import probe as probe_urls
from project import ROOT
from red_team import PLANT_SITECUSTOMIZE, ROUTES, Scripted, hostile_rollout

import endless_assets.definitions as definitions
from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask
from endless_assets.defs.io_manager import ParquetLakeIOManager
from endless_assets.defs.jobs import PIPELINE_ASSETS
from endless_assets.defs.resources import PipelineSettings
from endless_assets.sandbox.containers.container import Limits
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.sandbox.containers.shell import ShellSession
from endless_assets.sandbox.engine import podman
from endless_assets.sandbox.engine.client import OWNER_LABEL, PROJECT_LABEL, owner_tag
from endless_assets.sandbox.engine.engines import EngineSpec
from endless_assets.sandbox.engine.provider import DockerProvider, PodmanProvider, provider_for
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.image.images import build_task_image
from endless_assets.sandbox.sandbox import Sandbox, SandboxConfig
from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake

SCRIPT = ROOT / "scripts" / "ensure-podman.sh"
BATCH = "2026-04-02"
TASKS = 4
ASSETS = PIPELINE_ASSETS


@pytest.fixture(scope="module")
def podman_url() -> str:
    """The Podman service's URL; the module is skipped if Podman cannot be installed or started
    on this machine."""
    try:
        proc = subprocess.run(
            [str(SCRIPT)], capture_output=True, text=True, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"Podman cannot be started here: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"Podman cannot be installed or started here: {proc.stderr.strip()[-400:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def docker_sandbox(sandbox) -> Sandbox:
    """The session's sandbox, which is Docker's (unless DOCKER_HOST names Podman itself)."""
    if provider_for(sandbox.client).kind == podman.PODMAN:
        pytest.skip("the session's engine is Podman itself: no Docker engine beside it")
    return sandbox


@pytest.fixture(scope="module")
def on_podman(podman_url, docker_sandbox) -> Sandbox:
    """A sandbox on Podman whose base image came from the session's Docker engine."""
    box = Sandbox(SandboxConfig(docker_host=podman_url))
    assert isinstance(provider_for(box.client), PodmanProvider)
    assert box.base.image_id == docker_sandbox.base.image_id
    return box


def own_containers(client) -> list[str]:
    labels = [f"{PROJECT_LABEL}=endless", f"{OWNER_LABEL}={owner_tag()}"]
    return [c.name for c in client.containers.list(all=True, filters={"label": labels})]


def test_the_engine_kind_chooses_the_podman_or_the_docker_provider(on_podman, docker_sandbox):
    assert podman.engine_kind(on_podman.client) == podman.PODMAN
    assert podman.engine_kind(docker_sandbox.client) == podman.DOCKER
    assert isinstance(provider_for(on_podman.client), PodmanProvider)
    assert isinstance(provider_for(docker_sandbox.client), DockerProvider)


def test_the_base_image_is_copied_from_docker_to_podman_with_its_id(on_podman, docker_sandbox):
    """What ensure_base_image does on Podman when the Docker engine here has the base image:
    `docker save` streamed into Podman's load API. (Under a tag of its own, so that nothing
    else here sees the base image change; absent on Docker, nothing is copied.)"""
    tag = f"endless-copytest:{secrets.token_hex(4)}"
    assert PodmanProvider(on_podman.client).base_from_elsewhere(tag, print) == ""
    repository, _, version = tag.partition(":")
    sandbox = docker_sandbox
    sandbox.client.api.tag(sandbox.base.image_id, repository, version)
    try:
        copied = PodmanProvider(on_podman.client).base_from_elsewhere(tag, print)
        assert copied == sandbox.base.image_id
        listed = {podman.short_name(t) for t in on_podman.client.images.get(tag).tags}
        assert tag in listed
    finally:
        for client in (sandbox.client, on_podman.client):
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag, noprune=True)


def test_a_podman_task_container_keeps_every_isolation_guarantee(on_podman):
    """No network, the agent unprivileged with no capabilities, no-new-privileges, our seccomp
    profile (ptrace refused), the memory, process and file-size limits, the disk budget mounted
    under the container, and the container removed afterwards."""
    limits = (
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max "
        "2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max"
    )
    probe = (
        "grep -c : /proc/net/dev; id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' "
        "/proc/self/status | tr -s '\\t' ' '; df -k / | tail -1 | tr -s ' ' | cut -d' ' -f2; "
        'python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True); '
        "print('ptrace', l.ptrace(0, 0, 0, 0), ctypes.get_errno())\"; "
        f"{limits}; ulimit -f"
    )
    with on_podman.container(on_podman.base.tag, labels={"role": "podman"}) as box:
        assert box.disk_layer and os.path.ismount(box.disk_layer)
        with ShellSession(box) as shell:
            result = shell.run(probe, timeout=30)
    lines = result.output.split("\n")
    assert lines[:2] == ["1", "1000"], result.output  # only lo; the agent's uid
    assert "CapEff: 0000000000000000" in lines and "NoNewPrivs: 1" in lines
    assert "Seccomp: 2" in lines
    budget_kib = int(lines[5])
    assert 1.8 * 2**20 < budget_kib <= 2 * 2**20  # the default budget, 2g
    # PTRACE_TRACEME, which the kernel and Docker's default profile allow: EPERM, our profile
    assert lines[6] == "ptrace -1 1", result.output
    assert lines[7:10] == [str(2**30), "512", str(2**20)], result.output  # 1g, 512, 1 GiB
    assert not own_containers(on_podman.client)


def test_a_build_on_podman_reaches_a_network_only_when_asked_and_never_this_host(on_podman):
    """Podman's Docker API would run every RUN step in the host's network namespace; a build
    without a network gets loopback only, one with it its gateway's loopback and the proxy to
    the registries (image/build_network.py), which never connects to this host."""
    seen = {}
    with recorder("127.0.0.1") as loopback, recorder("0.0.0.0") as everywhere:
        urls = {
            "loopback": f"http://127.0.0.1:{loopback.server_address[1]}",
            "uplink": f"http://{host_address()}:{everywhere.server_address[1]}",
        }
        for network in (False, True):
            probe = "cut -d: -f1 /proc/net/dev | tail -n +3 > /ifs && echo $https_proxy >> /ifs"
            dockerfile = f"FROM {on_podman.base.tag}\nRUN {probe}\n{probe_urls(urls)}"
            build = on_podman.build(dockerfile, {}, network=network)
            assert build.ok, build.log
            with on_podman.container(build.tag, labels={"role": "podman"}) as box:
                seen[network] = box.exec_root(["cat", "/ifs"]).output.split()
            on_podman.remove_image(build.tag)
        assert loopback.seen == [] and everywhere.seen == []
    assert seen[False] == ["lo"]
    assert seen[True] == ["lo", "http://127.0.0.1:3128"]


def test_a_fork_bomb_in_a_build_on_podman_stops_at_the_pids_limit(podman_url, on_podman):
    """Podman's build endpoint takes no process limit: the build's cgroup parent of ours
    (build_cgroup.py) holds its steps to it, as on Docker."""
    small = Sandbox(SandboxConfig(docker_host=podman_url, limits=Limits(memory="256m", pids=64)))
    bomb = f"echo {secrets.token_hex(4)} && timeout 60 sh -c 'f(){{ f|f; }}; f'"
    build = small.build(f"FROM {small.base.tag}\nRUN {bomb}\n", {}, network=False)
    assert not build.ok
    assert "Cannot fork" in build.log
    assert build.log.endswith(
        "the build's processes reached their limit (64): a step could not fork"
    )


def test_a_build_on_podman_past_its_budget_is_stopped_with_the_step_it_was_running(on_podman):
    """Podman goes on running a step whose build's connection closed: the step's processes
    are killed in the build's cgroup (none is left on this host)."""
    run = secrets.token_hex(8)
    build = build_task_image(
        on_podman.client,
        f"FROM {on_podman.base.tag}\nRUN yes {run}\n",
        {},
        base_image_id=on_podman.base.image_id,
        network=False,
        limits=Limits(memory="256m", cpus=0.2, pids=64),
        budget=5,
    )
    assert not build.ok
    assert build.log.endswith("the build ran past its budget of 5 s and was cancelled")
    running = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if run.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                running.append(pid)
    assert not running, "the cancelled step still runs"


@pytest.mark.parametrize(
    "name",
    [
        "git core.fsmonitor (git status runs it)",
        "ptrace the test process to exit 0 with a forged report",
        "pytest-level: conftest that rewrites every outcome to passed",
    ],
)
def test_a_hostile_agent_earns_zero_on_podman(on_podman, name):
    """Routes that fool a naive grader (test_reward_integrity.py shows each does) are scored 0
    on Podman too: a verdict, not a harness error."""
    if name.startswith("ptrace") and platform.machine() != "x86_64":
        pytest.skip("the ptrace forge injects an x86_64 system call")
    route = ROUTES[name]
    assert route.image == "base"
    with on_podman.container(on_podman.base.tag, labels={"role": "integrity"}) as box:
        rollout = hostile_rollout(box, route)
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == 0, rollout.verdict
    assert not own_containers(on_podman.client)


@pytest.mark.parametrize("plant", [False, True], ids=["honest", "plants sitecustomize.py"])
def test_a_root_agent_on_podman_is_graded_from_a_snapshot_and_its_tampering_found(on_podman, plant):
    """A root agent's verdict on Podman: its container paused, what it changed read (in
    Podman's overlay upper directory, where Podman's own changes to /etc at start are left
    out), a verifier container of the snapshot. The honest agent earns 1; one that plants a
    sitecustomize.py in the interpreter's library earns 0, scored."""
    dockerfile = identity_dockerfile(f"FROM {on_podman.base.tag}\nWORKDIR /app\n", "", "")
    build = on_podman.build(dockerfile, {}, network=False)
    assert build.ok, build.log
    commands = ["echo done > /app/out.txt", *([PLANT_SITECUSTOMIZE] if plant else [])]
    test = "def test_out():\n    assert open('/app/out.txt').read() == 'done\\n'\n"
    with on_podman.container(build.tag, labels={"role": "integrity"}) as box:
        assert box.agent.uid == 0
        rollout = run_episode_in(
            box,
            EpisodeTask("et-podman-root", "write done to /app/out.txt"),
            Scripted(commands),
            test,
            EpisodeLimits(command_timeout=30, test_timeout=60),
        )
    assert rollout.termination == "done", rollout.error
    assert rollout.reward == (0 if plant else 1), rollout.verdict
    if plant:
        assert rollout.verdict.status == "tampered", rollout.verdict
    assert not own_containers(on_podman.client)


def test_a_procedural_batch_is_built_validated_and_solved_on_podman(
    on_podman, podman_url, tmp_path
):
    """The build, validation and solver stages on Podman through Dagster: every task's image builds,
    its tests hold, the soundness probes and the oracle's episodes run; no container is left
    behind."""
    result = dg.materialize(
        [getattr(definitions, name) for name in ASSETS],
        partition_key=BATCH,
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "pipeline": PipelineSettings(
                data_dir=str(tmp_path), tasks=TASKS, docker_host=podman_url, workers=2
            ),
            "lake_io_manager": ParquetLakeIOManager(data_dir=str(tmp_path)),
        },
    )
    assert result.success
    lake = Lake(tmp_path)
    funnel = query(lake, "select stage, entered, survived from funnel order by stage_order")
    assert funnel["survived"].to_list() == [TASKS] * len(funnel), query(
        lake, "select * from funnel_reasons"
    )
    rollouts = query(lake, "select reward, termination from solver_rollouts")
    assert rollouts["reward"].to_list() == [1] * TASKS
    assert set(rollouts["termination"]) == {"done"}
    assert not own_containers(on_podman.client)


def test_a_pool_of_docker_and_podman_spreads_containers_and_grades_on_both(
    on_podman, docker_sandbox, podman_url
):
    local = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    specs = (EngineSpec(local, 2), EngineSpec(podman_url, 2))
    pool_box = Sandbox(SandboxConfig(engines=specs, limits=Limits(disk="0")))
    nonce = secrets.token_hex(4)  # a new image: built here, on each engine that runs it
    dockerfile = f"FROM {pool_box.base.tag}\nRUN echo {nonce} > /home/user/where\n"
    build = pool_box.build(dockerfile, {})
    assert build.ok, build.log
    test = f"def test_where():\n    assert open('/home/user/where').read() == '{nonce}\\n'\n"
    with contextlib.ExitStack() as stack:
        boxes = [stack.enter_context(pool_box.container(build.tag)) for _ in range(4)]
        kinds = sorted(provider_for(box.client).kind == podman.PODMAN for box in boxes)
        verdicts = [run_pytest(box, test, stop_agent=False) for box in boxes]
    assert kinds == [False, False, True, True]  # two containers on each engine
    assert all(v.passed for v in verdicts), [v.summary() for v in verdicts]
    for client in (docker_sandbox.client, on_podman.client):  # the image is on both, one tag
        assert client.images.get(build.tag)
        assert not own_containers(client)
