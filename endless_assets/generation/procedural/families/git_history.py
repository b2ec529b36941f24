"""Git: tag, branch from, or revert the commit of a small repository that names a ticket.

Up the levels: a tag, a branch, a revert (next to a ticket whose number starts with the
target's), then a tag and a branch at once, two reverts in order with a tag at the new tip, and
an annotated tag with a given message beside someone's branch and an untracked scratch file
that must survive (git.py computes the commit ids the tests expect).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.families import git_objects as git
from endless_assets.generation.procedural.names import PEOPLE, PROJECTS, SERVICES
from endless_assets.generation.procedural.render import render_test, sha256

FIXES = [
    "Fix timeout handling in {s}",
    "Tune retry limits for {s}",
    "Handle empty payloads in {s}",
    "Guard against missing config in {s}",
    "Log slow requests in {s}",
]
ADDS = ["Add {s} health check", "Document {s} deployment", "Add {s} metrics exporter"]
Commit = tuple[str, str, str, str, dict[str, str]]  # message, author, email, stamp, changes


@dataclass
class Plan:
    project: str
    repo: str
    prefix: str
    tickets: list[int]
    commits: list[Commit]
    actions: list[tuple[str, int, str]] = field(default_factory=list)  # action, commit, ref
    level: int | None = None
    tip_tag: str = ""  # a tag at the tip of main once the work is done
    tag_message: str = ""  # its message: an annotated tag
    feature: tuple[str, int] = ("", 0)  # someone's branch, at that commit
    untracked: tuple[str, str] = ("", "")  # a scratch file in the work tree, not tracked

    def ticket(self, k: int) -> str:
        return f"{self.prefix}-{self.tickets[k]}"

    def history(self) -> tuple[list[str], dict[str, str]]:
        """Each commit's id, and the files at the tip."""
        state: dict[str, str] = {}
        shas: list[str] = []
        for message, author, email, stamp, changes in self.commits:
            state.update(changes)
            who = f"{author} <{email}>"
            shas.append(
                git.commit_id(git.tree_id(state), shas[-1] if shas else "", who, stamp, message)
            )
        return shas, state

    def reverted(self, targets: list[int]) -> str:
        """The tree id of the tip with the changes of `targets` undone (each file is changed by
        at most one commit after the first)."""
        _, state = self.history()
        files = dict(state)
        for target in targets:
            for rel in self.commits[target][4]:
                earlier = [c[4][rel] for c in self.commits[:target] if rel in c[4]]
                if earlier:
                    files[rel] = earlier[-1]
                else:
                    files.pop(rel)
        return git.tree_id(files).hex()

    @property
    def reverts(self) -> list[int]:
        """The commits to revert, newest first."""
        return sorted((k for a, k, _ in self.actions if a == "revert"), reverse=True)


def _history(rng: random.Random, project: str, n_later: int | None = None) -> Plan:
    repo = f"/home/user/{rng.choice(['repos', 'src', 'work'])}/{project}"
    prefix = project.upper()[:4]
    svcs = rng.sample(SERVICES, 4)
    base = {
        "README.md": f"# {project}\n\nInternal service bundle.\n",
        "config/app.yaml": f"name: {project}\nreplicas: {rng.randint(1, 5)}\n",
        **{f"src/{s}.py": f"def handle(request):\n    return {s!r}\n" for s in svcs},
    }
    tickets = rng.sample(range(100, 999), 10)
    people = rng.sample(PEOPLE, 3)
    stamp0 = 1767000000 + rng.randint(0, 10_000_000)
    commits: list[Commit] = []
    state: dict[str, str] = {}
    modifiable = [f"src/{s}.py" for s in svcs] + ["config/app.yaml"]
    rng.shuffle(modifiable)
    n_later = rng.randint(4, 7) if n_later is None else n_later
    for k in range(n_later + 1):
        person = rng.choice(people)
        stamp = f"@{stamp0 + k * rng.randint(3600, 86400)} +0000"
        if k == 0:
            message, changes = "Initial import", dict(base)
        elif modifiable and rng.random() < 0.6:
            rel = modifiable.pop()
            svc = rel.split("/")[-1].split(".")[0]
            message = rng.choice(FIXES).format(s=svc)
            changes = {rel: state[rel] + f"# {message.lower()}\nLIMIT = {rng.randint(2, 90)}\n"}
        else:
            svc = rng.choice(SERVICES)
            rel = f"{rng.choice(['docs', 'ops'])}/{svc}-{k}.md"
            message = rng.choice(ADDS).format(s=svc)
            changes = {rel: f"# {message}\n\nOwner: {person}\n"}
        if k:
            message = f"{message} ({prefix}-{tickets[k]})"
        commits.append((message, person.title(), f"{person}@{project}.dev", stamp, changes))
        state.update(changes)
    return Plan(project, repo, prefix, tickets, commits)


class GitHistory(Family[Plan]):
    name = "git_history"
    category = "git repository operations"

    def sample(self, rng: random.Random) -> Plan:
        plan = _history(rng, rng.choice(PROJECTS))
        target = rng.randint(1, len(plan.commits) - 2)  # never the tip: that would be too easy
        action = rng.choice(["tag", "branch", "revert"])
        plan.actions.append((action, target, self._ref(rng, plan, action, target)))
        return plan

    def _ref(self, rng: random.Random, plan: Plan, action: str, target: int) -> str:
        if action == "tag":
            return f"v{rng.randint(1, 3)}.{rng.randint(0, 12)}.{rng.randint(0, 9)}"
        return f"hotfix/{plan.ticket(target).lower()}" if action == "branch" else ""

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        plan = _history(rng, rng.choice(PROJECTS), by_level(level, 4, 5, 6, 6, 7, 8))
        plan.level = level
        kinds = by_level(
            level,
            ["tag"],
            ["branch"],
            ["revert"],
            ["tag", "branch"],
            ["revert", "revert"],
            ["revert", "revert", "branch"],
        )
        targets = rng.sample(range(1, len(plan.commits) - 1), len(kinds))
        for kind, target in zip(kinds, targets, strict=True):
            plan.actions.append((kind, target, self._ref(rng, plan, kind, target)))
        if level >= 3:  # a later ticket whose number starts with a target's
            decoy = rng.choice([k for k in range(1, len(plan.commits)) if k not in targets])
            message = plan.commits[decoy][0].replace(
                f"({plan.ticket(decoy)})", f"({plan.ticket(targets[0])}{rng.randint(0, 9)})"
            )
            plan.commits[decoy] = (message, *plan.commits[decoy][1:])
        if level >= 5:
            plan.tip_tag = f"v{rng.randint(2, 4)}.{rng.randint(0, 9)}.1"
        if level == 6:
            plan.tag_message = f"Roll back {' and '.join(plan.ticket(k) for k in plan.reverts)}"
            plan.feature = (f"feature/{rng.choice(SERVICES)}-rework", rng.randint(1, 3))
            plan.untracked = ("scratch/notes.txt", f"todo: check {plan.ticket(targets[0])}\n")
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        shas, _ = plan.history()
        action, target, ref = plan.actions[0]
        truth = {
            "repo": plan.repo,
            "ticket": plan.ticket(target),
            "target": shas[target],
            "head": shas[-1],
            "action": action,
            "ref": ref,
        }
        if plan.level is not None:
            truth["actions"] = [[a, plan.ticket(k), shas[k], r] for a, k, r in plan.actions]
            truth.update(tip_tag=plan.tip_tag, tag_message=plan.tag_message)
        return self.task(
            plan,
            truth=truth,
            setup_script=self._setup(plan, shas),
            complexity={"tag": "easy", "branch": "medium", "revert": "hard"}[action],
            scenario="developer maintaining a git repository",
        )

    def _setup(self, plan: Plan, shas: list[str]) -> str:
        script = git.SETUP.format(
            repo=plan.repo,
            commits=plan.commits,
            maintainer=f"{plan.project.title()} Maintainer",
            maintainer_email=f"maintainer@{plan.project}.dev",
        ).lstrip()
        name, at = plan.feature
        path, text = plan.untracked
        if name or path:
            script += dedent(f"""
                if {name!r}:
                    git = ["git", "-c", "safe.directory=*", "-C", REPO]
                    subprocess.run([*git, "branch", {name!r}, {shas[at]!r}], check=True)
                if {path!r}:
                    os.makedirs(os.path.dirname(os.path.join(REPO, {path!r})), exist_ok=True)
                    with open(os.path.join(REPO, {path!r}), "w") as fh:
                        fh.write({text!r})
                subprocess.run(["chown", "-R", "user:user", os.path.dirname(REPO)], check=True)
            """)
        return script

    def _ask(self, plan: Plan, action: str, target: int, ref: str) -> str:
        ticket = plan.ticket(target)
        if action == "tag":
            return (
                f"tag the commit that mentions {ticket} in its message as `{ref}` (lightweight or "
                "annotated, either is fine)"
            )
        if action == "branch":
            return (
                f"create a branch `{ref}` that starts at the commit whose message mentions "
                f"{ticket}, but stay on `main` (don't check the new branch out)"
            )
        if len(plan.reverts) > 1:
            tickets = " and ".join(plan.ticket(k) for k in plan.reverts)
            return (
                f"undo the commits whose messages mention {tickets}: they broke production. Do "
                "it with new commits on top of `main`, one per commit undone, the newer one "
                "first (the history is shared, so don't rewrite it), and leave the working tree "
                "clean"
            )
        return (
            f"undo the commit whose message mentions {ticket}: it broke production. Do it with "
            "a new commit on top of `main` that reverses exactly that change (the history is "
            "shared, so don't rewrite it), and leave the working tree clean"
        )

    def instruction(self, plan: Plan) -> str:
        asks = []
        for action, target, ref in plan.actions:
            ask = self._ask(plan, action, target, ref)
            if ask not in asks:
                asks.append(ask)
        if plan.tip_tag:
            how = (
                f"an annotated tag with the message `{plan.tag_message}`"
                if plan.tag_message
                else "a tag"
            )
            asks.append(f"mark the resulting tip of `main` with {how} named `{plan.tip_tag}`")
        said = asks[0] if len(asks) == 1 else "; ".join(asks[:-1]) + f"; then {asks[-1]}"
        text = (
            f"The git repository {plan.repo} is on branch `main`. Please {said}. Every other "
            "commit and branch must stay as it is."
        )
        if plan.feature[0]:
            text += f" (`{plan.feature[0]}` is a colleague's branch.)"
        if plan.untracked[0]:
            where = f"{plan.repo}/{plan.untracked[0]}"
            text += f" {where} is my untracked scratch file: leave it there, untracked."
        return text

    def tests(self, plan: Plan) -> tuple[str, str]:
        shas, _ = plan.history()
        action, target, ref = plan.actions[0]
        consts = {"REPO": plan.repo, "HEAD_SHA": shas[-1]}
        if plan.level is None:
            consts.update(TARGET_SHA=shas[target], ACTION=action, REF=ref)
            consts["REVERTED_TREE"] = plan.reverted([target])
            checks = git.REVERTED if action == "revert" else git.REF_AT_TARGET
            return (
                render_test(["subprocess"], consts, git.GIT, git.INITIAL),
                render_test(["subprocess"], consts, git.GIT, checks),
            )
        refs = {r: shas[k] for a, k, r in plan.actions if r}
        feature = {plan.feature[0]: shas[plan.feature[1]]} if plan.feature[0] else {}
        path, text = plan.untracked
        consts.update(NEW_REFS=list(refs), REFS={**refs, **feature})
        consts["TREES"] = [plan.reverted(plan.reverts[: k + 1]) for k in range(len(plan.reverts))]
        consts.update(TIP_TAG=plan.tip_tag, TAG_MESSAGE=plan.tag_message)
        consts["UNTRACKED"] = {f"{plan.repo}/{path}": sha256(text)} if path else {}
        return (
            render_test(["subprocess"], consts, git.GIT, git.LEVELED_INITIAL),
            render_test(["hashlib", "subprocess"], consts, git.GIT, git.LEVELED),
        )

    def solution(self, plan: Plan) -> str:
        if plan.level is None:  # today's draw: one action
            action, target, ref = plan.actions[0]
            ticket = plan.ticket(target)
            command = f'git {action} {ref} "$sha"'
            if action == "revert":
                command = 'git revert --no-edit "$sha"'
            return dedent(f"""
                cd {plan.repo}
                sha=$(git log --format='%H %s' main | grep -F '({ticket})' | cut -d' ' -f1)
                {command}
            """)
        lines = [f"cd {plan.repo}"]
        find = "$(git log --format='%H %s' main | grep -F '({t})' | cut -d' ' -f1)"
        for k in plan.reverts:
            lines.append(f'git revert --no-edit "{find.format(t=plan.ticket(k))}"')
        for action, target, ref in plan.actions:
            if action != "revert":
                lines.append(f'git {action} {ref} "{find.format(t=plan.ticket(target))}"')
        if plan.tip_tag and plan.tag_message:
            lines.append(f"git tag -a {plan.tip_tag} -m '{plan.tag_message}'")
        elif plan.tip_tag:
            lines.append(f"git tag {plan.tip_tag}")
        return "\n".join(lines) + "\n"
