"""The base image every task builds on: Debian minbase + python3 + pytest + a non-root `user`.

No Docker Hub is needed: the root filesystem comes from `debootstrap` against Debian's mirror
(the host's default, or ENDLESS_DEBIAN_MIRROR) and is imported with `docker import`. The image is
tagged by a hash of this recipe and rebuilt only when the recipe changes.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass

import docker.errors
from docker import DockerClient

from endless_assets.models import content_hash
from endless_assets.sandbox.client import SandboxError, base_labels

log = logging.getLogger(__name__)

SUITE = "bookworm"
# Tools a terminal agent expects and that the procedural families use. pytest comes from Debian,
# so grading never downloads anything.
PACKAGES = (
    "python3",
    "python3-pytest",
    "sqlite3",
    "git",
    "jq",
    "zip",
    "unzip",
    "xz-utils",
    "bzip2",
    "procps",
    "file",
    "bc",
    "less",
    "gawk",
    "cron",
    "ca-certificates",
    # What peer harnesses drive agents with: Terminal-Bench and Harbor's terminus agents run
    # their shell in tmux (and Terminal-Bench records with asciinema); with both in the image,
    # exported tasks need no network when a real agent runs them.
    "tmux",
    "asciinema",
)
USER_LAYER = """\
FROM {rootfs}
RUN rm -f /var/cache/apt/archives/*.deb \\
 && useradd --create-home --uid 1000 --shell /bin/bash user \\
 && mkdir -p /verifier && chmod 700 /verifier
ENV LANG=C.UTF-8 LC_ALL=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
WORKDIR /home/user
"""
RECIPE_VERSION = "1"
REPOSITORY = "endless-base"


@dataclass(frozen=True)
class BaseImage:
    tag: str
    image_id: str
    built: bool  # False when it already existed
    seconds: float


def recipe_hash() -> str:
    return content_hash(RECIPE_VERSION, SUITE, " ".join(PACKAGES), USER_LAYER, length=12)


def base_image_tag() -> str:
    return f"{REPOSITORY}:{recipe_hash()}"


def ensure_base_image(client: DockerClient, *, progress=log.info) -> BaseImage:
    """Return the base image, building it first if this recipe has not been built here."""
    tag = base_image_tag()
    started = time.monotonic()
    try:
        image = client.images.get(tag)
        return BaseImage(tag, image.id, built=False, seconds=time.monotonic() - started)
    except docker.errors.ImageNotFound:
        pass
    rootfs_tag = f"endless-rootfs:{recipe_hash()}"
    try:
        client.images.get(rootfs_tag)
    except docker.errors.ImageNotFound:
        _import_rootfs(client, rootfs_tag, progress)
    progress(f"base image: adding the agent user layer -> {tag}")
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = USER_LAYER.format(rootfs=rootfs_tag).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    try:
        image, _ = client.images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            labels=base_labels(kind="base-image"),
        )
    except docker.errors.BuildError as exc:
        log_text = "".join(str(chunk.get("stream", chunk)) for chunk in exc.build_log)
        raise SandboxError(f"base image build failed: {exc}\n{log_text[-4000:]}") from exc
    progress(f"base image ready: {tag} ({time.monotonic() - started:.0f} s)")
    return BaseImage(tag, image.id, built=True, seconds=time.monotonic() - started)


def _import_rootfs(client: DockerClient, rootfs_tag: str, progress) -> None:
    if shutil.which("debootstrap") is None:
        raise SandboxError(
            "debootstrap is not installed; run scripts/ensure-docker.sh (it installs it)"
        )
    mirror = os.environ.get("ENDLESS_DEBIAN_MIRROR")
    with tempfile.TemporaryDirectory(prefix="endless-rootfs-") as tmp:
        root = os.path.join(tmp, "rootfs")
        cmd = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            root,
        ]
        if mirror:
            cmd.append(mirror)
        progress(f"base image: debootstrap {SUITE} minbase (about a minute)")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SandboxError(
                f"debootstrap failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
                f"\n{proc.stderr[-3000:]}"
            )
        for junk in ("var/cache/apt/archives", "usr/share/doc", "usr/share/man"):
            path = os.path.join(root, junk)
            for entry in os.listdir(path) if os.path.isdir(path) else []:
                full = os.path.join(path, entry)
                if os.path.isfile(full) and full.endswith(".deb"):
                    os.unlink(full)
        tar_path = os.path.join(tmp, "rootfs.tar")
        subprocess.run(["tar", "-C", root, "-cf", tar_path, "."], check=True)
        progress("base image: importing the root filesystem into Docker")
        repository, _, version = rootfs_tag.partition(":")
        try:
            client.api.import_image_from_file(tar_path, repository=repository, tag=version)
        except docker.errors.APIError as exc:
            raise SandboxError(f"docker import of the root filesystem failed: {exc}") from exc
