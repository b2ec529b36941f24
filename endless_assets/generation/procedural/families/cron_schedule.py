"""Cron: write a crontab file whose entries run given commands on schedules described in words.

Up the levels: more jobs and harder schedules, then MAILTO, an existing crontab to edit (keep
its comments and entries, retire one), times said on a team clock two hours ahead of the
server's UTC (the day moves back too), a SHELL, a schedule to move, and a command with `%`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.families import cron_specs
from endless_assets.generation.procedural.names import PEOPLE, PROJECTS
from endless_assets.generation.procedural.render import constants, render_test, sha256

JOBS = ["backup-db", "rotate-logs", "sync-reports", "cleanup-tmp", "renew-certs", "send-digest"]
MORE_JOBS = ["compact-db", "refresh-cache", "export-metrics", "prune-backups", "check-disk"]


@dataclass
class Plan:
    project: str
    expected: dict[str, str]  # command as written in the crontab -> its fields
    asks: list[str]
    files: dict[str, str]
    env: dict[str, str]
    level: int | None = None
    existing: list[str] = field(default_factory=list)  # the crontab's lines now
    comments: list[str] = field(default_factory=list)  # its comments, to keep
    retired: str = ""  # the command whose entry goes
    moved: str = ""  # the command whose schedule changes (its new words are in `asks`)
    offset: int = 0  # hours the team's clock is ahead of the server's

    @property
    def crontab(self) -> str:
        return f"/home/user/cron/{self.project}.crontab"


class CronSchedule(Family[Plan]):
    name = "cron_schedule"
    category = "scheduled tasks and cron jobs"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        jobs = rng.sample(JOBS, rng.randint(1, 2))
        plan = Plan(project, {}, [], {}, {})
        for job in jobs:
            words, spec = cron_specs.schedule(rng)
            command = self._script(plan, job)
            if rng.random() < 0.5:
                command += f" >> /home/user/logs/{job}.log 2>&1"
            plan.expected[command] = spec
            plan.asks.append(f"`{command}` should run {words}")
        if rng.random() < 0.3:
            plan.env["MAILTO"] = f"ops-{project}@example.com"
        return plan

    def _script(self, plan: Plan, job: str) -> str:
        plan.files[f"bin/{job}.sh"] = f"#!/bin/sh\n# {job} for {plan.project}\nexit 0\n"
        return f"/home/user/bin/{job}.sh"

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        plan = Plan(project, {}, [], {}, {}, level=level, offset=2 if level >= 5 else 0)
        n_new, n_old = by_level(level, 1, 2, 3, 2, 4, 5), 3 if level >= 4 else 0
        names = rng.sample(JOBS + MORE_JOBS, n_new + n_old)
        if n_old:
            self._existing(rng, plan, names[n_new:])
        for k, job in enumerate(names[:n_new]):
            if level == 1:
                words, spec = cron_specs.team_schedule(rng, 0)
            elif plan.offset and k % 2 == 0:
                words, spec = cron_specs.team_schedule(rng, plan.offset)
                words += " (team time)"
            else:
                words, spec = cron_specs.schedule(rng)
            command = shown = self._script(plan, job)
            if level == 6 and k == 0:  # cron turns an unescaped % into a newline
                command, shown = command + " --tag $(date +\\%F)", shown + " --tag $(date +%F)"
            elif rng.random() < 0.5:
                command = shown = command + f" >> /home/user/logs/{job}.log 2>&1"
            plan.expected[command] = spec
            plan.asks.append(f"`{shown}` should run {words}")
        if level >= 3:
            plan.env["MAILTO"] = f"ops-{project}@example.com"
        if level >= 5:
            plan.env["SHELL"] = "/bin/bash"
        return plan

    def _existing(self, rng: random.Random, plan: Plan, jobs: list[str]) -> None:
        """A crontab already there: comments and entries to keep, one entry to retire and, at
        level 6, one to move."""
        plan.comments = [f"# {plan.project} jobs, checked in by ops"]
        plan.existing = [plan.comments[0], ""]
        for job in jobs:
            words, spec = cron_specs.schedule(rng)
            command = self._script(plan, job)
            comment = f"# {job}: owner {rng.choice(PEOPLE)}"
            plan.comments.append(comment)
            plan.existing += [comment, f"{spec} {command}"]
            plan.expected[command] = spec
        plan.retired = f"/home/user/bin/{jobs[0]}.sh"
        del plan.expected[plan.retired]
        del plan.comments[1]  # the retired job's comment may go with it
        if plan.level == 6:
            plan.moved = f"/home/user/bin/{jobs[1]}.sh"
            words, spec = cron_specs.schedule(rng)
            plan.expected[plan.moved] = spec
            plan.asks.append(f"`{plan.moved}` should from now on run {words}")

    def build(self, plan: Plan) -> FamilyTask:
        truth = {"crontab": plan.crontab, "entries": plan.expected, "env": plan.env}
        if plan.level is not None:
            truth.update(retired=plan.retired, moved=plan.moved, team_offset=plan.offset)
        n_jobs = len(plan.asks)
        hard = n_jobs > 1 or bool(plan.env)
        return self.task(
            plan,
            truth=truth,
            files=plan.files,
            setup_script=self._setup(plan),
            complexity="hard" if n_jobs > 1 and plan.env else "medium" if hard else "easy",
            scenario="sysadmin scheduling maintenance jobs",
        )

    def _setup(self, plan: Plan) -> str:
        if not plan.existing:
            return ""
        text = "\n".join(plan.existing) + "\n"
        return dedent(f"""
            import os
            import shutil

            os.makedirs("/home/user/cron", exist_ok=True)
            with open({plan.crontab!r}, "w") as fh:
                fh.write({text!r})
            for path in ("/home/user/cron", {plan.crontab!r}):
                shutil.chown(path, "user", "user")
        """)

    def instruction(self, plan: Plan) -> str:
        crontab, env = plan.crontab, plan.env
        if not plan.existing:
            head = (
                f"I need the scheduled jobs for {plan.project} written down as a crontab file at "
                f"{crontab} (the ops team installs it later; you don't need to, and can't, load "
                "it with `crontab` yourself)."
            )
        else:
            head = (
                f"The crontab of {plan.project}, {crontab}, is checked in; the ops team installs "
                "it later (you don't need to, and can't, load it with `crontab` yourself). Keep "
                f"its comments and its other entries, but retire `{plan.retired}`: remove its "
                "entry."
            )
        clock = "Times are the server's local time on a 24-hour clock."
        if plan.offset:
            clock = (
                "The server's clock is UTC; times marked (team time) are on our team's clock, "
                f"UTC+{plan.offset:02d}:00, and the entries must fire at those moments."
            )
        mail = ""
        if env:
            mail = f", and have cron mail output to {env['MAILTO']} (MAILTO)"
            if "SHELL" in env:
                mail += f" and run the jobs with {env['SHELL']} (SHELL)"
        exact = "Use each command exactly as written, one entry per job"
        if plan.level == 6:
            exact = "Cron must run each command exactly as written, one entry per job"
        also = "Also: " if plan.existing else ""
        return f"{head} {clock} {also}" + "; ".join(plan.asks) + f". {exact}{mail}."

    def tests(self, plan: Plan) -> tuple[str, str]:
        consts = {"CRONTAB": plan.crontab, "EXPECTED": plan.expected, "ENV": plan.env}
        if plan.level is None:
            initial = render_test(["os"], consts, SCRIPTS, ABSENT)
            return initial, constants(consts) + cron_specs.TEST_BODY
        consts["COMMENTS"] = plan.comments
        text = "\n".join(plan.existing) + "\n" if plan.existing else ""
        consts["INITIAL_SHA"] = sha256(text) if text else ""
        initial = render_test(["hashlib", "os"], consts, SCRIPTS, SHIPPED)
        return initial, constants(consts) + cron_specs.TEST_BODY + "\n\n" + dedent(COMMENTS_KEPT)

    def solution(self, plan: Plan) -> str:
        env = [f"{k}={v}" for k, v in plan.env.items()]
        kept = [] if plan.existing else [f"# {plan.project} jobs", *env]
        for line in plan.existing:
            command = _command(line)
            if command == plan.retired or line.startswith(f"# {_job(plan.retired)}:"):
                continue
            kept.append(f"{plan.expected[command]} {command}" if command else line)
        if plan.existing:
            kept = env + kept
        written = {_command(line) for line in kept}
        new = [f"{spec} {c}" for c, spec in plan.expected.items() if c not in written]
        body = "\n".join(kept + new)
        return dedent(f"""
            mkdir -p /home/user/cron
            cat > {plan.crontab} <<'EOF'
            {{body}}
            EOF
        """).replace("{body}", body)


def _job(script: str) -> str:
    return script.rsplit("/", 1)[-1].removesuffix(".sh")


def _command(line: str) -> str:
    """The command of a crontab entry line, "" for a comment, a blank or a setting."""
    if not line.strip() or line.startswith("#") or "=" in line.split(None, 1)[0]:
        return ""
    return line.split(None, 5)[-1]


SCRIPTS = """
    def test_scripts_present():
        for command in EXPECTED:
            assert os.path.isfile(command.split()[0])
"""
ABSENT = """
    def test_crontab_absent():
        assert not os.path.exists(CRONTAB)
"""
SHIPPED = """
    def test_crontab_as_shipped():
        if not INITIAL_SHA:
            assert not os.path.exists(CRONTAB)
            return
        with open(CRONTAB, "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == INITIAL_SHA
"""
COMMENTS_KEPT = """
    def test_comments_kept():
        with open(CRONTAB) as fh:
            lines = [ln.strip() for ln in fh]
        for comment in COMMENTS:
            assert comment in lines, comment
"""
