"""Git: tag, branch from, or revert the commit of a small repository that names a ticket."""

from __future__ import annotations

import hashlib
import random

from endless_assets.generation.procedural.base import (
    PEOPLE,
    PROJECTS,
    SERVICES,
    Family,
    FamilyTask,
    dedent,
)
from endless_assets.generation.procedural.render import render_test

FIXES = [
    "Fix timeout handling in {s}",
    "Tune retry limits for {s}",
    "Handle empty payloads in {s}",
    "Guard against missing config in {s}",
    "Log slow requests in {s}",
]
ADDS = ["Add {s} health check", "Document {s} deployment", "Add {s} metrics exporter"]

SETUP = """
import os
import subprocess

REPO = {repo!r}
COMMITS = {commits!r}

os.makedirs(REPO, exist_ok=True)
subprocess.run(["git", "init", "-q", "-b", "main", REPO], check=True)
subprocess.run(["git", "-C", REPO, "config", "user.name", {maintainer!r}], check=True)
subprocess.run(["git", "-C", REPO, "config", "user.email", {maintainer_email!r}], check=True)
for message, author, email, stamp, changes in COMMITS:
    for rel, text in changes.items():
        path = os.path.join(REPO, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    env = dict(os.environ, GIT_AUTHOR_NAME=author, GIT_AUTHOR_EMAIL=email,
               GIT_COMMITTER_NAME=author, GIT_COMMITTER_EMAIL=email,
               GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    subprocess.run(["git", "-C", REPO, "add", "-A"], check=True)
    subprocess.run(["git", "-C", REPO, "commit", "-q", "-m", message], check=True, env=env)
subprocess.run(["chown", "-R", "user:user", os.path.dirname(REPO)], check=True)
"""


def _obj(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def _tree(files: dict[str, str]) -> bytes:
    """The binary sha1 of the git tree holding `files` (relative path -> text, mode 100644)."""
    entries: dict[str, tuple[bytes, bytes]] = {}  # sort key -> (mode+name, sha)
    subdirs: dict[str, dict[str, str]] = {}
    for rel, text in files.items():
        head, _, rest = rel.partition("/")
        if rest:
            subdirs.setdefault(head, {})[rest] = text
        else:
            entries[head] = (f"100644 {head}".encode(), _obj("blob", text.encode()))
    for name, sub in subdirs.items():
        entries[name + "/"] = (f"40000 {name}".encode(), _tree(sub))
    body = b"".join(entries[k][0] + b"\0" + entries[k][1] for k in sorted(entries))
    return _obj("tree", body)


def _commit(tree: bytes, parent: str, who: str, stamp: str, message: str) -> str:
    lines = [f"tree {tree.hex()}"] + ([f"parent {parent}"] if parent else [])
    lines += [f"author {who} {stamp[1:]}", f"committer {who} {stamp[1:]}", "", message, ""]
    return _obj("commit", "\n".join(lines).encode()).hex()


class GitHistory(Family):
    name = "git_history"
    category = "git repository operations"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
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
        commits: list[tuple[str, str, str, str, dict[str, str]]] = []
        state: dict[str, str] = {}
        shas: list[str] = []
        before_target: dict[str, str] = {}
        modifiable = [f"src/{s}.py" for s in svcs] + ["config/app.yaml"]
        rng.shuffle(modifiable)
        n_later = rng.randint(4, 7)
        for k in range(n_later + 1):
            person = rng.choice(people)
            who = f"{person.title()} <{person}@{project}.dev>"
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
            shas.append(_commit(_tree(state), shas[-1] if shas else "", who, stamp, message))
        target = rng.randint(1, n_later - 1)  # never the tip: that would be too easy
        ticket = f"{prefix}-{tickets[target]}"
        # what the tree looks like with the target commit undone (its file is touched only once)
        for rel in commits[target][4]:
            before_target = {r: t for r, t in state.items() if r != rel}
            earlier = [c[4][rel] for c in commits[:target] if rel in c[4]]
            if earlier:
                before_target[rel] = earlier[-1]
        reverted_tree = _tree(before_target).hex()

        action = rng.choice(["tag", "branch", "revert"])
        head = shas[-1]
        if action == "tag":
            ref = f"v{rng.randint(1, 3)}.{rng.randint(0, 12)}.{rng.randint(0, 9)}"
            ask = (
                f"tag the commit that mentions {ticket} in its message as `{ref}` (lightweight or "
                "annotated, either is fine)"
            )
            solution = f'git tag {ref} "$sha"'
        elif action == "branch":
            ref = f"hotfix/{ticket.lower()}"
            ask = (
                f"create a branch `{ref}` that starts at the commit whose message mentions "
                f"{ticket}, but stay on `main` (don't check the new branch out)"
            )
            solution = f'git branch {ref} "$sha"'
        else:
            ref = ""
            ask = (
                f"undo the commit whose message mentions {ticket}: it broke production. Do it with "
                "a new commit on top of `main` that reverses exactly that change (the history is "
                "shared, so don't rewrite it), and leave the working tree clean"
            )
            solution = 'git revert --no-edit "$sha"'
        instruction = (
            f"The git repository {repo} is on branch `main`. Please {ask}. Every other commit and "
            "branch must stay as it is."
        )
        solution = dedent(f"""
            cd {repo}
            sha=$(git log --format='%H %s' main | grep -F '({ticket})' | cut -d' ' -f1)
            {solution}
        """)
        consts = {
            "REPO": repo,
            "HEAD_SHA": head,
            "TARGET_SHA": shas[target],
            "ACTION": action,
            "REF": ref,
            "REVERTED_TREE": reverted_tree,
        }
        # The repository is the agent's: its config, hooks and attributes can name programs
        # (core.fsmonitor, filters, ...). The grader runs this test as the agent's uid, so git
        # and anything it starts have the agent's privilege, no more; hooks and fsmonitor are
        # off, and neither the agent's ~/.gitconfig nor a system one is read.
        git = """
            GIT = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                   "--no-optional-locks", "--no-replace-objects"]
            GIT_ENV = {"HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "LC_ALL": "C",
                       "GIT_CONFIG_NOSYSTEM": "1"}


            def git(*args):
                out = subprocess.run([*GIT, "-C", REPO, *args], capture_output=True, text=True,
                                     timeout=60, cwd="/", env=GIT_ENV)
                return out.stdout.strip() if out.returncode == 0 else None
        """
        initial_test = render_test(
            ["subprocess"],
            consts,
            git,
            """
            def test_history():
                assert git("rev-parse", "main") == HEAD_SHA
                assert git("symbolic-ref", "HEAD") == "refs/heads/main"
                assert git("cat-file", "-t", TARGET_SHA) == "commit"


            def test_ref_absent():
                if REF:
                    assert git("rev-parse", "--verify", "-q", REF) is None
        """,
        )
        if action == "revert":
            checks = dedent("""
                def test_reverted_on_top():
                    assert git("symbolic-ref", "HEAD") == "refs/heads/main"
                    assert git("rev-parse", "main~1") == HEAD_SHA
                    assert git("rev-parse", "main^{tree}") == REVERTED_TREE


                def test_clean_worktree():
                    assert git("status", "--porcelain") == ""
            """)
        else:
            checks = dedent("""
                def test_ref_points_at_target():
                    assert git("rev-parse", "--verify", "-q", REF + "^{commit}") == TARGET_SHA


                def test_main_untouched():
                    assert git("symbolic-ref", "HEAD") == "refs/heads/main"
                    assert git("rev-parse", "main") == HEAD_SHA
            """)
        completion_test = render_test(["subprocess"], consts, git, checks)
        return FamilyTask(
            instruction=instruction,
            truth={
                "repo": repo,
                "ticket": ticket,
                "target": shas[target],
                "head": head,
                "action": action,
                "ref": ref,
            },
            setup_script=SETUP.format(
                repo=repo,
                commits=commits,
                maintainer=f"{project.title()} Maintainer",
                maintainer_email=f"maintainer@{project}.dev",
            ).lstrip(),
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity={"tag": "easy", "branch": "medium", "revert": "hard"}[action],
            scenario="developer maintaining a git repository",
        )
