"""A verifier's layer made to show the image's own version of the agent's configuration
(containers/pristine.py), checked through a real overlay mount of the same layers: the image's
layers (a file overridden, a file deleted by a whiteout, a directory made opaque), the agent's
layer on top (a file changed, one added, one brought back, a directory replaced), and the
verifier's upper directory prepared by `restore`. What it is to be is what the image shows; the
agent's other files stay the agent's. And which paths are configuration (system_paths)."""

from __future__ import annotations

import os
import subprocess

import pytest

from endless_assets.sandbox.containers import pristine
from endless_assets.sandbox.grading import system_paths


def put(root, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def whiteout(root, rel: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    os.mknod(root / rel, 0o20600, 0)


def opaque(root, rel: str) -> None:
    (root / rel).mkdir(parents=True, exist_ok=True)
    os.setxattr(root / rel, "trusted.overlay.opaque", b"y")


@pytest.fixture
def layers(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("overlay mounts and whiteouts need root")
    bottom, top, agent = tmp_path / "image2", tmp_path / "image1", tmp_path / "agent"
    put(bottom, "etc/a.conf", "bottom\n")
    put(bottom, "etc/gone.conf", "bottom\n")
    put(bottom, "etc/dir/x", "x\n")
    put(bottom, "etc/keep/k", "k\n")
    put(top, "etc/a.conf", "top\n")
    whiteout(top, "etc/gone.conf")
    opaque(top, "etc/dir")
    put(top, "etc/dir/z", "z\n")
    os.symlink("a.conf", top / "etc/link")
    put(agent, "etc/a.conf", "agent\n")
    put(agent, "etc/new/evil.conf", "evil\n")
    put(agent, "etc/gone.conf", "agent\n")
    opaque(agent, "etc/dir")
    put(agent, "etc/dir/evil", "evil\n")
    whiteout(agent, "etc/link")
    whiteout(agent, "etc/keep")
    put(agent, "app/data", "the agent's work\n")
    return tmp_path, [str(top), str(bottom)], str(agent)


def merged(tmp_path, lowers: list[str], agent: str, upper: str) -> str:
    work, view = tmp_path / "work", tmp_path / "view"
    work.mkdir()
    view.mkdir()
    options = f"lowerdir={agent}:{':'.join(lowers)},upperdir={upper},workdir={work}"
    done = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(view)])
    if done.returncode != 0:
        pytest.skip("this kernel cannot mount an overlay here")
    return str(view)


def test_the_verifier_sees_the_images_own_configuration_and_the_agents_work(layers):
    tmp_path, lowers, agent = layers
    upper = tmp_path / "upper"
    upper.mkdir()
    changed = ["/etc/a.conf", "/etc/new", "/etc/new/evil.conf", "/etc/gone.conf", "/etc/dir"]
    pristine.restore(str(upper), lowers, [*changed, "/etc/link", "/etc/keep"])
    view = merged(tmp_path, lowers, agent, str(upper))
    try:
        assert read(f"{view}/etc/a.conf") == "top\n"
        assert not os.path.lexists(f"{view}/etc/new")
        assert not os.path.lexists(f"{view}/etc/gone.conf")
        assert sorted(os.listdir(f"{view}/etc/dir")) == ["z"]
        assert os.readlink(f"{view}/etc/link") == "a.conf"
        assert read(f"{view}/etc/keep/k") == "k\n"
        assert read(f"{view}/app/data") == "the agent's work\n"
    finally:
        subprocess.run(["umount", view], check=True)


def test_etc_and_the_dot_entries_of_a_home_are_configuration():
    homes = ["/root", "/home/tester"]
    assert system_paths.is_config("/etc/ssl/openssl.cnf", homes)
    assert system_paths.is_config("/root/.gitconfig", homes)
    assert system_paths.is_config("/home/tester/.config/git/config", homes)
    assert not system_paths.is_config("/root/answer.txt", homes)
    assert not system_paths.is_config("/etc/shadow", homes)  # (the user database: data)
    assert not system_paths.is_config("/home/user/.gitconfig", homes)
    assert not system_paths.is_config("/app/.env", homes)
    working = ["/", "/tmp"]  # (verifier_view.WORKING: where grading works)
    assert system_paths.is_config("/.git/config", working)
    assert system_paths.is_config("/tmp/.git/hooks/post-commit", working)
    assert not system_paths.is_config("/tmp/data.txt", working)
    assert not system_paths.is_config("/app/.git/config", working)


def test_the_paths_an_images_env_loads_code_from_are_its_code_locations():
    env = {
        "LD_LIBRARY_PATH": "/opt/lib:/usr/local/cuda/lib64",
        "BASH_ENV": "/app/.bashenv",
        "JAVA_TOOL_OPTIONS": "-javaagent:/opt/agent.jar -Xmx1g",
        "PYTHONPATH": "/app",
        "DATA_DIR": "/data",
        "VIRTUAL_ENV": "/app",
    }
    found = system_paths.code_locations(env, "/app")
    assert found == ["/app/.bashenv", "/opt/agent.jar", "/opt/lib", "/usr/local/cuda/lib64"]


def test_changed_configuration_is_set_back_where_the_layer_can_be_and_tampering_where_not():
    changes = [{"Path": "/etc/gitconfig", "Kind": 1}, {"Path": "/root/.gitconfig", "Kind": 1}]
    common = {"system": ["/usr"], "protected": [], "allowed": {}, "homes": ["/root"]}
    local = system_paths.check(changes, upper="/nonexistent", **common)
    assert local.pristine == ("/etc/gitconfig", "/root/.gitconfig") and not local.tampered
    assert "/etc/gitconfig" in local.unseen()
    remote = system_paths.check(changes, upper="", **common)
    assert remote.tampered == ("/etc/gitconfig", "/root/.gitconfig") and not remote.pristine
    allowed = system_paths.check(
        changes, upper="/x", **{**common, "allowed": {"/etc/gitconfig": ""}}
    )
    assert allowed.pristine == ("/root/.gitconfig",)


def test_the_installation_prefix_of_a_bin_directory_on_the_images_path_is_a_code_location():
    """A venv at /opt/venv, first on the PATH: its bin/ was a system location, but its
    site-packages (a .pth there runs in a script's `python3 -m pytest`) was the agent's."""
    path = "/opt/venv/bin:/root/.local/bin:/app/.venv/bin:/usr/local/bin:/usr/bin:/bin:/opt/x/lib"
    found = system_paths.code_locations({"PATH": path}, "/app")
    assert found == ["/opt/venv", "/usr", "/usr/local"]  # (/app/.venv: the project's, its data)
    assert system_paths.code_locations({"PATH": path}, "/") == [
        "/app/.venv",
        "/opt/venv",
        "/usr",
        "/usr/local",
    ]


def test_grading_leaves_out_what_an_images_search_list_names_relative_to_a_working_directory():
    env = {
        "LD_LIBRARY_PATH": "/opt/lib:",  # (ENV LD_LIBRARY_PATH=/opt/lib:$LD_LIBRARY_PATH)
        "PATH": ".:/usr/bin::bin:/bin",
        "LD_PRELOAD": "libjemalloc.so.2 ./forge.so /opt/pre/libtuned.so",
        "GCONV_PATH": "",
        "BASH_ENV": ".bashenv",
        "OPENSSL_CONF": "/etc/ssl/tuned.cnf",
        "PYTHONPATH": "/app:",  # (not a search list of code: the agent's, by design)
        "CLASSPATH": ".:/usr/share/java/x.jar",  # (where Java is meant to find the program)
    }
    graded = system_paths.grading_env(env)
    assert graded == {
        "LD_LIBRARY_PATH": "/opt/lib",
        "PATH": "/usr/bin:/bin",
        "LD_PRELOAD": "libjemalloc.so.2:/opt/pre/libtuned.so",
        "OPENSSL_CONF": "/etc/ssl/tuned.cnf",
        "PYTHONPATH": "/app:",
        "CLASSPATH": ".:/usr/share/java/x.jar",
    }


def test_a_dot_entry_of_a_home_that_is_the_working_directory_is_the_agents_where_the_reference_is():
    """A task in /root: the reference commits in /root/.git, so the agent's /root/.git (other
    objects than the reference's) is its work; its ~/.gitconfig is still configuration."""
    changes = [
        {"Path": "/root/.git/objects/ab/cdef", "Kind": 1},
        {"Path": "/root/.gitconfig", "Kind": 1},
        {"Path": "/root/notes.txt", "Kind": 1},
    ]
    common = {"system": ["/usr"], "protected": [], "upper": "/x", "homes": ["/root"]}
    allowed = {"/root/.git/objects/12/3456": ""}
    found = system_paths.check(changes, allowed=allowed, workdir="/root", **common)
    assert found.pristine == ("/root/.gitconfig",) and not found.tampered
    elsewhere = system_paths.check(changes, allowed=allowed, workdir="/app", **common)
    assert elsewhere.pristine == ("/root/.git/objects/ab/cdef", "/root/.gitconfig")


def test_a_volume_holding_configuration_or_where_grading_works_is_fresh_in_the_verifier():
    """What the agent writes in an image's VOLUME never reaches its layer, so the check never
    sees it: a volume at or above configuration (/tmp, where a repository above the test's own
    is configuration; root's home; /etc/ssl) or a system location is the image's own there."""
    from types import SimpleNamespace

    from endless_assets.sandbox.grading import verifier_view

    volumes = ["/tmp", "/root", "/etc/ssl", "/root/.config", "/usr/local/lib/x", "/data", "/app"]
    box = SimpleNamespace(
        system=["/usr", "/root/.local/bin"],
        volumes=[(f"v{i}", d, True) for i, d in enumerate(volumes)],
    )
    kept, line = verifier_view.shared_volumes(box, ["/", "/tmp", "/root"])
    assert kept == ["v5:/data:rw", "v6:/app:rw"]
    assert "/etc/ssl, /root, /root/.config, /tmp, /usr/local/lib/x" in line
