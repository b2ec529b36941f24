"""Git objects computed offline (blob, tree and commit ids of the family's repositories), the
setup script that builds a repository commit by commit, and the tests' way of running git."""

from __future__ import annotations

import hashlib

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


def obj(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def tree_id(files: dict[str, str]) -> bytes:
    """The binary sha1 of the git tree holding `files` (relative path -> text, mode 100644)."""
    entries: dict[str, tuple[bytes, bytes]] = {}  # sort key -> (mode+name, sha)
    subdirs: dict[str, dict[str, str]] = {}
    for rel, text in files.items():
        head, _, rest = rel.partition("/")
        if rest:
            subdirs.setdefault(head, {})[rest] = text
        else:
            entries[head] = (f"100644 {head}".encode(), obj("blob", text.encode()))
    for name, sub in subdirs.items():
        entries[name + "/"] = (f"40000 {name}".encode(), tree_id(sub))
    body = b"".join(entries[k][0] + b"\0" + entries[k][1] for k in sorted(entries))
    return obj("tree", body)


def commit_id(tree: bytes, parent: str, who: str, stamp: str, message: str) -> str:
    lines = [f"tree {tree.hex()}"] + ([f"parent {parent}"] if parent else [])
    lines += [f"author {who} {stamp[1:]}", f"committer {who} {stamp[1:]}", "", message, ""]
    return obj("commit", "\n".join(lines).encode()).hex()


# The repository is the agent's: its config, hooks and attributes can name programs
# (core.fsmonitor, filters, ...). The grader runs this test as the agent's uid, so git
# and anything it starts have the agent's privilege, no more; hooks and fsmonitor are
# off, and neither the agent's ~/.gitconfig nor a system one is read.
GIT = """
    GIT = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
           "--no-optional-locks", "--no-replace-objects"]
    GIT_ENV = {"HOME": "/nonexistent", "PATH": "/usr/bin:/bin", "LC_ALL": "C",
               "GIT_CONFIG_NOSYSTEM": "1"}


    def git(*args):
        out = subprocess.run([*GIT, "-C", REPO, *args], capture_output=True, text=True,
                             timeout=60, cwd="/", env=GIT_ENV)
        return out.stdout.strip() if out.returncode == 0 else None
"""
INITIAL = """
    def test_history():
        assert git("rev-parse", "main") == HEAD_SHA
        assert git("symbolic-ref", "HEAD") == "refs/heads/main"
        assert git("cat-file", "-t", TARGET_SHA) == "commit"


    def test_ref_absent():
        if REF:
            assert git("rev-parse", "--verify", "-q", REF) is None
"""
REVERTED = """
    def test_reverted_on_top():
        assert git("symbolic-ref", "HEAD") == "refs/heads/main"
        assert git("rev-parse", "main~1") == HEAD_SHA
        assert git("rev-parse", "main^{tree}") == REVERTED_TREE


    def test_clean_worktree():
        assert git("status", "--porcelain") == ""
"""
REF_AT_TARGET = """
    def test_ref_points_at_target():
        assert git("rev-parse", "--verify", "-q", REF + "^{commit}") == TARGET_SHA


    def test_main_untouched():
        assert git("symbolic-ref", "HEAD") == "refs/heads/main"
        assert git("rev-parse", "main") == HEAD_SHA
"""
LEVELED_INITIAL = """
    def test_history():
        assert git("rev-parse", "main") == HEAD_SHA
        assert git("symbolic-ref", "HEAD") == "refs/heads/main"


    def test_refs_absent():
        for ref in [*NEW_REFS, TIP_TAG]:
            if ref:
                assert git("rev-parse", "--verify", "-q", ref) is None, ref
"""
LEVELED = """
    def test_main():
        assert git("symbolic-ref", "HEAD") == "refs/heads/main"
        assert git("rev-parse", f"main~{len(TREES)}") == HEAD_SHA
        for k, tree in enumerate(TREES):
            assert git("rev-parse", f"main~{len(TREES) - 1 - k}^{{tree}}") == tree, k


    def test_refs():
        for ref, sha in REFS.items():
            assert git("rev-parse", "--verify", "-q", ref + "^{commit}") == sha, ref


    def test_tag_at_tip():
        if TIP_TAG:
            tip = git("rev-parse", "main")
            assert git("rev-parse", "--verify", "-q", TIP_TAG + "^{commit}") == tip
        if TAG_MESSAGE:
            assert git("cat-file", "-t", "refs/tags/" + TIP_TAG) == "tag"
            assert git("tag", "-l", "--format=%(contents:subject)", TIP_TAG) == TAG_MESSAGE


    def test_worktree():
        assert git("status", "--porcelain", "--untracked-files=no") == ""
        for path, digest in UNTRACKED.items():
            with open(path, "rb") as fh:
                assert hashlib.sha256(fh.read()).hexdigest() == digest, path
            assert git("ls-files", "--error-unmatch", path) is None, "must stay untracked"
"""
