"""What a root agent changed, read in its container's overlay upper directory (changes.py),
flags the same protected paths as `docker diff` does, for every kind of change an agent can make:
a file added, appended to, removed, a file's mode changed, a directory emptied and made again
(opaque), a directory moved away, a directory replaced by a file and a file by a directory, a
link replaced."""

from __future__ import annotations

import os
import stat

import pytest

from endless_assets.sandbox.containers.changes import upper_changes
from endless_assets.sandbox.grading import verifier

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
    box.system = []
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
    assert ("/etc/issue", 2) in {(c["Path"], c["Kind"]) for c in upper_changes(str(upper))}


def checked(protected: list[str], changes: list[dict], engine: list[dict], monkeypatch) -> str:
    """verifier.tampering over these changes, for a container that protects `protected`."""
    from types import SimpleNamespace

    from endless_assets.sandbox.containers.changes import change_key

    monkeypatch.setattr(verifier, "diff", lambda container: changes)
    box = SimpleNamespace(
        protected=protected,
        engine_changes={change_key(c) for c in engine},
        system=[],
        upper_dir="",
        lower_dirs=[],
        homes=[],
        agent=SimpleNamespace(workdir="/"),
    )
    return verifier.tampering(box)


def test_a_directory_made_again_under_fuse_whiteouts_hides_nothing(tmp_path, monkeypatch):
    upper = tmp_path / "diff"
    (upper / "usr" / "lib" / "py" / "sub").mkdir(parents=True)
    (upper / "usr" / "lib" / "py" / ".wh..wh..opq").touch()  # no xattr: a fuse-style marker
    (upper / "usr" / "lib" / "py" / "sub" / "other.py").write_text("x")
    changes = upper_changes(str(upper))
    assert {"Path": "/usr/lib/py", "Kind": 0} not in [
        {"Path": c["Path"], "Kind": c["Kind"]} for c in changes
    ]
    assert checked(["/usr/lib/py/sub/x.py"], changes, [], monkeypatch) == "/usr/lib/py"


def test_a_name_that_is_not_utf8_is_listed_as_text(tmp_path):
    upper = tmp_path / "diff"
    upper.mkdir()
    (upper / os.fsdecode(b"bad\xffname")).touch()
    (path,) = [c["Path"] for c in upper_changes(str(upper))]
    assert path == "/bad\ufffdname"
    path.encode("utf-8")  # what the lake's writers need


def test_a_file_the_engine_wrote_at_start_and_the_agent_rewrote_is_the_agents(
    tmp_path, monkeypatch
):
    upper = tmp_path / "diff"
    (upper / "etc").mkdir(parents=True)
    cache = upper / "etc" / "ld.so.cache"
    cache.write_text("written by the image's entrypoint at start")
    at_start = upper_changes(str(upper))
    assert checked(["/etc/ld.so.cache"], upper_changes(str(upper)), at_start, monkeypatch) == ""
    cache.unlink()
    cache.write_text("the agent's")
    found = checked(["/etc/ld.so.cache"], upper_changes(str(upper)), at_start, monkeypatch)
    assert found == "/etc/ld.so.cache"


OTHER_NAMES = {
    # a merged /usr's link replaced by a directory: ld.so.cache names /lib/x86_64-linux-gnu/...
    # (in one process: once /lib is gone, no program starts, its loader being under /lib)
    "python3 -c \"import os, shutil; d = '/tmp/l/x86_64-linux-gnu'; os.makedirs(d); "
    "[shutil.copy('/usr/lib/x86_64-linux-gnu/' + n, d) "
    "for n in ('libc.so.6', 'ld-linux-x86-64.so.2')]; os.unlink('/lib'); "
    "os.rename('/tmp/l', '/lib')\"": "/lib",
    # what a test script's #!/bin/bash runs
    "rm /bin && mkdir /bin && cp /usr/bin/bash /bin/bash": "/bin",
    # the name the loader opens for a library grading loads (the maps name its target)
    "cd /usr/lib/x86_64-linux-gnu && rm libexpat.so.1 && cp libexpat.so.1.* libexpat.so.1": (
        "/usr/lib/x86_64-linux-gnu/libexpat.so.1"
    ),
}


@pytest.mark.parametrize("action", list(OTHER_NAMES))
def test_another_name_for_what_grading_loads_is_protected_too(
    sandbox, root_image, monkeypatch, action
):
    """The protected list once named only the files themselves (their resolved paths): without
    the name each change goes through, the check passes it. The grader now protects the names
    that lead to those files too (grader_describe.other_names). (Asked of a first grader that
    names only what it loaded, not every library grading could load: those would flag each.)"""
    from endless_assets.sandbox.grading import verdict
    from endless_assets.sandbox.grading.verdict import start_grader

    monkeypatch.setattr(verdict, "LOADS", "ENDLESS_NOT_ASKED")
    name = OTHER_NAMES[action]
    with sandbox.container(root_image, labels={"role": "changes"}) as box:
        start_grader(box)
        protected = list(box.protected or [])
        assert name in protected
        done = box.exec_root(["sh", "-c", action])
        assert done.exit_code == 0, done.output
        box.system = []  # (the system locations would flag each anyway: system_paths.py)
        found = verifier.tampering(box)
        box.protected = [p for p in protected if p != name]
        without = verifier.tampering(box)
    assert without == "", f"the list without {name} flags it anyway: {without}"
    assert found == name
