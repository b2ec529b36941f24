"""What a root agent changed, read in its container's overlay upper directory (changes.py),
flags the same protected paths as `docker diff` does, for every kind of change an agent can make:
a file added, appended to, removed, a file's mode changed, a directory emptied and made again
(opaque), a directory moved away, a directory replaced by a file and a file by a directory, a
link replaced."""

from __future__ import annotations

import os
import stat

import pytest

from endless_assets.sandbox import verifier
from endless_assets.sandbox.changes import upper_changes

PY = "/usr/lib/python3/dist-packages"
ACTIONS = [
    "echo new > /opt/new.txt",
    "echo more >> /etc/debian_version",
    "rm /etc/issue",
    "chmod 700 /usr/bin/env",
    f"rm -rf {PY}/_pytest && mkdir {PY}/_pytest && echo evil > {PY}/_pytest/__init__.py",
    f"mv {PY}/exceptiongroup /opt/moved",
    "rm -rf /etc/cron.d && echo file > /etc/cron.d",
    "rm /etc/issue.net && mkdir /etc/issue.net",
    "rm /sbin && mkdir /sbin && echo fake > /sbin/ldconfig",
]
# Protected paths to ask about: each changed one, what lies under or above it, and neighbours
# that did not change.
GUARDED = [
    "/opt/new.txt",
    "/etc/debian_version",
    "/etc/issue",
    "/usr/bin/env",
    "/usr/bin/python3",
    f"{PY}/_pytest",
    f"{PY}/_pytest/python.py",
    f"{PY}/_pytest/__init__.py",
    f"{PY}/pytest",
    f"{PY}/exceptiongroup/__init__.py",
    f"{PY}/autocommand",
    "/etc/cron.d/e2scrub_all",
    "/etc/cron.daily",
    "/etc/issue.net",
    "/sbin/ldconfig",
    "/usr/sbin/ldconfig",
    "/lib64/ld-linux-x86-64.so.2",
    "/etc/ld.so.cache",
    "/etc",
    PY,
]


def flagged(box, changes: list[dict], engine: list[dict], guarded: str, monkeypatch) -> str:
    monkeypatch.setattr(verifier, "diff", lambda container: changes)
    box.protected = [guarded]
    box.engine_changes = {(c["Path"], c["Kind"]) for c in engine}
    return verifier.tampering(box)


def test_the_upper_directory_flags_what_docker_diff_flags(sandbox, root_image, monkeypatch):
    with sandbox.container(root_image, labels={"role": "changes"}) as box:
        assert box.agent.uid == 0 and box.upper_dir, "this engine's layers are out of reach"
        engine_upper = upper_changes(box.upper_dir)
        engine_docker = box.client.api.diff(box.id) or []
        for action in ACTIONS:
            done = box.exec_root(["sh", "-c", action])
            assert done.exit_code == 0, (action, done.output)
        box.client.api.pause(box.id)
        try:
            upper = upper_changes(box.upper_dir)
            docker = box.client.api.diff(box.id) or []
        finally:
            box.client.api.unpause(box.id)
        answers = {
            g: (
                bool(flagged(box, upper, engine_upper, g, monkeypatch)),
                bool(flagged(box, docker, engine_docker, g, monkeypatch)),
            )
            for g in GUARDED
        }
    differ = {g: a for g, a in answers.items() if a[0] != a[1]}
    assert not differ, f"(upper, docker diff) differ: {differ}"
    assert answers["/usr/bin/python3"] == (False, False)  # untouched: not flagged by either
    assert answers[f"{PY}/_pytest/python.py"] == (True, True)  # under a directory made again


def test_fuse_style_whiteouts_and_opaque_markers_are_listed_as_deletions(tmp_path):
    upper = tmp_path / "diff"
    (upper / "etc").mkdir(parents=True)
    (upper / "etc" / ".wh.issue").touch()  # fuse-overlayfs: /etc/issue deleted
    (upper / "usr" / "lib" / "py").mkdir(parents=True)
    (upper / "usr" / "lib" / "py" / ".wh..wh..opq").touch()  # /usr/lib/py made again
    (upper / "usr" / "lib" / "py" / "evil.py").write_text("x")
    changes = {(c["Path"], c["Kind"]) for c in upper_changes(str(upper))}
    assert ("/etc/issue", 2) in changes
    assert ("/usr/lib/py", 2) in changes
    assert ("/usr/lib/py/evil.py", 1) in changes
    assert ("/etc", 0) in changes  # a directory holding changes, not itself replaced


@pytest.mark.skipif(os.geteuid() != 0, reason="a 0:0 character device needs root")
def test_a_kernel_whiteout_is_listed_as_a_deletion(tmp_path):
    upper = tmp_path / "diff"
    (upper / "etc").mkdir(parents=True)
    os.mknod(upper / "etc" / "issue", stat.S_IFCHR | 0o600, os.makedev(0, 0))
    assert {"Path": "/etc/issue", "Kind": 2} in upper_changes(str(upper))
