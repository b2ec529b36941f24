"""How the soundness stage runs its jobs: lanes of containers, restored between jobs.

`repeats` lanes, each a fresh container of the task's image, run in parallel. A lane first
snapshots the agent-writable state (sandbox/containers/snapshot.py), then runs its two controls,
restoring the initial state in between (a task with services gets a fresh container and fresh
services instead: what a job changed in a service, no snapshot restores): even lanes the
reference first (in the fresh container), odd lanes the do-nothing episode first. Lane 0 lists
what its reference run changed (by inode change time against a marker touched just before it);
from that the shortcut probes are made and put on a queue that every lane drains, with the
ablations. Each such job is one script in the lane's persistent root shell (restore + state
change: no `docker exec`) and one verdict on the lane's resident grader. A shortcut that passes
in a shared container is run again in a fresh one (`confirm`) before it counts.

An engine failure (SandboxError) discards the lane's container; the job runs again in a new one,
at most `engine_retries` more times, then the error propagates (a harness error for the stage).
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask, NoopPolicy, OraclePolicy, Policy
from endless_assets.models import Task
from endless_assets.sandbox.containers.container import ExecResult, TaskContainer
from endless_assets.sandbox.containers.snapshot import (
    MARK_SCRIPT,
    Agent,
    Changes,
    RootShell,
    Snapshot,
    agent_of,
    as_agent,
    container_cpu_seconds,
    content_hashes,
    list_changes,
    restore_script,
    take_snapshot,
)
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading.grade import run_pytest
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.stages.soundness.probes import (
    ABLATION,
    SHORTCUT,
    Probe,
    ablations,
    hash_requests,
    shortcut_probes,
)

CONTROL = "control"
REFERENCE, NOOP = "reference", "noop"
EXEC_SECONDS = 240.0  # a probe's own commands, at most (the engine client waits 300 s)


@dataclass
class ProbeOutcome:
    """One graded end state: a control run, a shortcut probe or an ablation."""

    name: str  # reference#2, noop#1, stub:empty, ablation:3/5, ...
    kind: str  # control | shortcut | ablation
    passed: bool | None  # did the completion test pass? None: the probe could not be applied
    detail: str = ""  # the verdict's summary, or why the probe was not applied
    confirmed: bool | None = None  # a passing shortcut: did it pass in a fresh container too?
    lane: int = 0  # -1: a fresh container of its own (a confirmation)
    seconds: float = 0.0
    cpu_seconds: float | None = None  # the container's CPU during the job (None: not seen)


@dataclass(frozen=True)
class Job:
    name: str
    kind: str
    policy: str = ""  # reference | noop: an episode, like the validation stage's; else a probe
    probe: Probe | None = None
    scan: bool = False  # list what the run changed (lane 0's reference)


class JobQueue:
    """Jobs for every lane; lane 0 adds the shortcut probes once its reference ran."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []
        self._open = True
        self._cond = threading.Condition()

    def put(self, jobs: list[Job]) -> None:
        with self._cond:
            self._jobs.extend(jobs)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._open = False
            self._cond.notify_all()

    def get(self) -> Job | None:
        """The next job; None once the queue is closed and empty."""
        with self._cond:
            while not self._jobs and self._open:
                self._cond.wait()
            return self._jobs.pop(0) if self._jobs else None


class LaneRun:
    """Every job of one task's soundness check, and what they cost."""

    def __init__(
        self,
        task: Task,
        image: str,
        sandbox: Sandbox,
        *,
        limits: EpisodeLimits,
        engine_retries: int,
        probes: bool = True,
    ) -> None:
        self.task, self.image, self.sandbox, self.limits = task, image, sandbox, limits
        self.cpu_slot = sandbox.cpu  # held for a lane's whole life, across its containers
        self.engine_retries = max(0, engine_retries)
        self.probes = probes  # False: the controls only
        self.test = task.completion_test or ""
        self.episode_task = EpisodeTask(task.task_id, task.instruction, task.reference_solution)
        self.labels = {"task_id": task.task_id, "batch": task.batch, "role": "soundness"}
        self.exec_seconds = min(limits.command_timeout, EXEC_SECONDS)
        self.results: list[ProbeOutcome] = []
        self.containers = self.retries = 0
        self.cpu: float | None = 0.0  # the containers' cgroup CPU; None once one is unseen
        self.lock = threading.Lock()
        self._queue = JobQueue()
        self._failed = threading.Event()
        self._shortcuts: list[Job] = []

    def record(self, result: ProbeOutcome) -> None:
        with self.lock:
            self.results.append(result)

    def run_lanes(self, count: int) -> None:
        """Controls in `count` fresh lanes, then every probe and ablation across them."""
        probes = ablations(self.task) if self.probes else []
        self._queue.put([Job(p.name, ABLATION, probe=p) for p in probes])
        lane0_has_slot = threading.Event()
        with ThreadPoolExecutor(max_workers=count, thread_name_prefix="soundness") as pool:
            futures = [pool.submit(self._lane, i, lane0_has_slot) for i in range(count)]
            errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

    def confirm(self, workers: int) -> None:
        """Run every shortcut that passed in a shared lane again in a fresh container."""
        passed = {p.name: p for p in self.results if p.kind == SHORTCUT and p.passed}
        jobs = [j for j in self._shortcuts if j.name in passed]

        def again(job: Job) -> None:
            with Lane(self, -1) as lane:
                lane.stack.enter_context(self.cpu_slot)
                result = lane.run(job)
            passed[job.name].confirmed = bool(result.passed)
            if not result.passed:
                passed[job.name].detail += f"; in a fresh container: {result.detail}"

        if not jobs:
            return
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for future in [pool.submit(again, job) for job in jobs]:
                future.result()

    def _lane(self, index: int, lane0_has_slot: threading.Event) -> None:
        """One lane: its controls, then jobs from the queue. Lane 0 takes its slot first (the
        others wait for the probes it posts while holding theirs) and posts the probes."""
        try:
            with Lane(self, index) as lane:
                if index == 0:
                    try:
                        lane.stack.enter_context(self.cpu_slot)
                    finally:
                        lane0_has_slot.set()
                else:
                    lane0_has_slot.wait()
                    lane.stack.enter_context(self.cpu_slot)
                try:
                    for policy in _control_order(index):
                        name = f"{policy}#{index + 1}"
                        scan = index == 0 and policy == REFERENCE and self.probes
                        self.record(lane.run(Job(name, CONTROL, policy=policy, scan=scan)))
                    if index == 0 and self.probes:
                        self._queue.put(self._shortcut_jobs(lane))
                finally:
                    if index == 0:
                        self._queue.close()
                while not self._failed.is_set() and (job := self._queue.get()) is not None:
                    self.record(lane.run(job))
        except BaseException:
            self._failed.set()
            self._queue.close()
            raise

    def _shortcut_jobs(self, lane: Lane) -> list[Job]:
        snapshot = lane.snapshot if lane.snapshot is not None else Snapshot()
        changes = lane.changes if lane.changes is not None else Changes()
        probes = shortcut_probes(self.task, snapshot, changes)
        self._shortcuts = [Job(p.name, SHORTCUT, probe=p) for p in probes]
        return self._shortcuts


class Lane:
    """A sequence of jobs in one container at a time, restored to the initial state between
    jobs; a new container after an engine failure (the job is then run again)."""

    def __init__(self, run: LaneRun, index: int) -> None:
        self.run_, self.index = run, index
        self.stack = ExitStack()  # the slot, for the lane's whole life
        self._box_stack: ExitStack | None = None
        self.box: TaskContainer | None = None
        self.shell: RootShell | None = None
        self.snapshot: Snapshot | None = None
        self.changes: Changes | None = None
        self.agent = Agent()
        self.dirty = False
        self._cpu0: float | None = None

    def __enter__(self) -> Lane:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._close(quiet=exc[0] is not None)
        finally:
            self.stack.close()

    def run(self, job: Job) -> ProbeOutcome:
        attempts = self.run_.engine_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                if self.box is None:
                    self._open()
                return self._once(job)
            except SandboxError:
                self._close(quiet=True)
                if attempt == attempts:
                    raise
                with self.run_.lock:
                    self.run_.retries += 1
                self.run_.sandbox.recover()
        raise AssertionError("unreachable")

    def _open(self) -> None:
        run = self.run_
        self._box_stack = ExitStack()
        self.box = self._box_stack.enter_context(
            run.sandbox.container(run.image, labels=run.labels)
        )
        with run.lock:
            run.containers += 1
        self.agent = agent_of(self.box)
        snapshot = take_snapshot(self.box)
        self.snapshot = snapshot if snapshot.ok else None
        self.shell = RootShell(self.box)
        self._box_stack.callback(self.shell.close)
        self.dirty = False

    def _close(self, *, quiet: bool = False) -> None:
        if self._box_stack is None:
            return
        run = self.run_
        cpu = container_cpu_seconds(self.box) if self.box is not None else None
        with run.lock:
            run.cpu = None if cpu is None or run.cpu is None else run.cpu + cpu
        stack, self._box_stack, self.box, self.shell = self._box_stack, None, None, None
        if quiet:
            with contextlib.suppress(SandboxError):
                stack.close()
        else:
            stack.close()

    def _initial_state(self, *, mark_changes: bool) -> str:
        """Bring the container back to the initial state: returns the restore script to run
        first (empty when the container is fresh, or was replaced for want of a snapshot)."""
        if not self.dirty:
            return MARK_SCRIPT if mark_changes and self.snapshot is not None else ""
        # A task's services hold state of their own that no snapshot restores: fresh ones.
        if self.snapshot is None or self.box is None or self.box.services:
            self._close()
            self._open()
            return self._initial_state(mark_changes=mark_changes)
        return restore_script(self.snapshot, mark=mark_changes)

    def _once(self, job: Job) -> ProbeOutcome:
        run, started = self.run_, time.monotonic()
        restore = self._initial_state(mark_changes=job.scan)
        box = self.box
        assert box is not None
        self._cpu0 = container_cpu_seconds(box)
        self.dirty = True
        if job.policy:
            if restore:
                self._root(restore)
            policy: Policy = OraclePolicy() if job.policy == REFERENCE else NoopPolicy()
            rollout = run_episode_in(box, run.episode_task, policy, run.test, run.limits)
            if rollout.termination == "harness_error":
                raise SandboxError(rollout.error)
            if job.scan and self.snapshot is not None:
                changes = list_changes(box, self.snapshot)
                final, initial = hash_requests(run.task, self.snapshot, changes)
                hashes = content_hashes(box, final, initial)
                changes.final_hashes, changes.initial_hashes = hashes
                self.changes = changes
            detail = rollout.verdict.summary() if rollout.verdict else rollout.termination
            passed: bool | None = rollout.reward == 1
        else:
            assert job.probe is not None
            script = restore + job.probe.script
            if job.probe.agent_command:
                script += as_agent(job.probe.agent_command, self.agent, timeout=run.exec_seconds)
            result = self._root(script)
            if result.exit_code == 98:
                detail = f"not applied: {result.output[-300:]}"
                return self._outcome(job, None, detail, started)
            verdict = run_pytest(box, run.test, timeout=run.limits.test_timeout)
            passed, detail = verdict.passed, verdict.summary()
            if job.probe.detail:
                detail = f"{job.probe.detail}; {detail}"
        return self._outcome(job, passed, detail, started)

    def _root(self, script: str) -> ExecResult:
        """Run a harness script in the lane's root shell; a failed restore (exit 97) is the
        engine's or the container's fault: SandboxError, so the job runs again elsewhere."""
        assert self.shell is not None
        result = self.shell.run(script, timeout=self.run_.exec_seconds + 60)
        if result.exit_code == 97:
            raise SandboxError(f"restoring the initial state failed: {result.output[-300:]}")
        return result

    def _outcome(self, job: Job, passed: bool | None, detail: str, started: float) -> ProbeOutcome:
        seconds = time.monotonic() - started
        cpu = container_cpu_seconds(self.box) if self.box is not None else None
        used = None if cpu is None or self._cpu0 is None else cpu - self._cpu0
        return ProbeOutcome(
            job.name, job.kind, passed, detail, lane=self.index, seconds=seconds, cpu_seconds=used
        )


def _control_order(index: int) -> tuple[str, str]:
    """Even lanes run the reference first, odd lanes the do-nothing control: each control runs
    in a fresh container in some lanes and after the other's verdict (restored) in others, so a
    test or a reference that depends on what ran before it disagrees with itself (flaky)."""
    return (REFERENCE, NOOP) if index % 2 == 0 else (NOOP, REFERENCE)
