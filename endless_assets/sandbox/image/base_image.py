"""The base image every task builds on: Debian minbase + python3 + pytest + a non-root `user`.

No Docker Hub is needed: the root filesystem comes from `debootstrap` against Debian's mirror
(the host's default, or ENDLESS_DEBIAN_MIRROR) and is imported with `docker import`. The image is
tagged by a hash of its recipe and rebuilt only when the recipe changes. On Podman it is copied
from the Docker engine on this host when that has it (the provider's `base_from_elsewhere`: same
image, same id), else built the same way.

Two recipes, the same packages on two Debian releases: `bookworm` (Python 3.11, the default) and
`trixie` (Python 3.13, what Terminal-Bench's python-3-13 images run; floating-point sums differ
between the two). The setting `base_recipe` (ENDLESS_BASE_RECIPE) picks the one `endless-base`
means; an import's `--base-image-map` may name either as `endless-base-bookworm` or
`endless-base-trixie`. `python -m endless_assets.sandbox.image.base_image trixie` builds one by
name.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass

import docker.errors
from docker import DockerClient

from endless_assets.models import content_hash
from endless_assets.sandbox.engine.client import KIND_LABEL, PROJECT, PROJECT_LABEL, SandboxError
from endless_assets.sandbox.engine.lock import engine_lock
from endless_assets.sandbox.engine.provider import provider_for

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
DEFAULT_RECIPE = "bookworm"
RECIPE_ENV = "ENDLESS_BASE_RECIPE"


@dataclass(frozen=True)
class Recipe:
    name: str
    suite: str
    packages: tuple[str, ...]
    python: str  # what the release's python3 is, for messages
    # Installed with apt inside the new root filesystem after debootstrap (whose own resolver
    # cannot: trixie's cron needs a sysusers provider, and it would pick systemd, which then
    # fails to configure in the same batch).
    later: tuple[str, ...] = ()


RECIPES = {
    "bookworm": Recipe("bookworm", SUITE, PACKAGES, "3.11"),
    "trixie": Recipe(
        "trixie",
        "trixie",
        tuple(p for p in PACKAGES if p != "cron"),
        "3.13",
        later=("cron", "systemd-standalone-sysusers"),
    ),
}


def recipe_named(name: str | None = None) -> Recipe:
    """The recipe called `name`; None or "": the setting's (ENDLESS_BASE_RECIPE), else bookworm.
    ValueError naming the choices for any other name."""
    chosen = name or os.environ.get(RECIPE_ENV, "").strip() or DEFAULT_RECIPE
    if chosen not in RECIPES:
        raise ValueError(
            f"base recipe {chosen!r} is not one of {', '.join(RECIPES)} (setting base_recipe, "
            f"{RECIPE_ENV})"
        )
    return RECIPES[chosen]


def symbolic_names() -> dict[str, str]:
    """Names an import's --base-image-map may use for our base images -> recipe ("" = the
    setting's)."""
    return {REPOSITORY: "", **{f"{REPOSITORY}-{name}": name for name in RECIPES}}


@dataclass(frozen=True)
class BaseImage:
    tag: str
    image_id: str
    built: bool  # False when it already existed
    seconds: float


def recipe_hash(recipe: str | None = None) -> str:
    chosen = recipe_named(recipe)
    packages = " ".join(chosen.packages)
    later = (" ".join(chosen.later),) if chosen.later else ()
    return content_hash(RECIPE_VERSION, chosen.suite, packages, *later, USER_LAYER, length=12)


def base_image_tag(recipe: str | None = None) -> str:
    return f"{REPOSITORY}:{recipe_hash(recipe)}"


def ensure_base_image(
    client: DockerClient, *, progress=log.info, recipe: str | None = None
) -> BaseImage:
    """Return the base image, building it first if this recipe has not been built here.

    One process at a time builds it on an engine (the engine's lock, lock.py): the others wait,
    then use what it built. An image of the recipe's tag is the base, whoever built it: it is
    never replaced (a base built from the same recipe is the same base)."""
    chosen = recipe_named(recipe)
    tag = base_image_tag(chosen.name)
    started = time.monotonic()
    found = image_id_of(client, tag)
    if found:
        return BaseImage(tag, found, built=False, seconds=time.monotonic() - started)
    with engine_lock(client, f"base-{recipe_hash(chosen.name)}", progress=progress):
        found = image_id_of(client, tag)
        if found:
            progress(f"base image ready: {tag}, built by another process meanwhile")
            return BaseImage(tag, found, built=False, seconds=time.monotonic() - started)
        return _build(client, chosen, tag, progress, started)


def image_id_of(client: DockerClient, tag: str) -> str:
    """The id of image `tag` on the engine, "" when it has none. SandboxError when the engine
    fails."""
    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return ""
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxError(f"the engine failed to look up {tag}: {exc}") from exc


def _build(client: DockerClient, chosen: Recipe, tag: str, progress, started: float) -> BaseImage:
    """Build the base image of `chosen` (the caller holds the engine's lock)."""
    copied = provider_for(client).base_from_elsewhere(tag, progress)
    if copied:
        seconds = time.monotonic() - started
        progress(f"base image ready: {tag}, copied from Docker ({seconds:.0f} s)")
        return BaseImage(tag, copied, built=True, seconds=seconds)
    rootfs_tag = f"endless-rootfs:{recipe_hash(chosen.name)}"
    try:
        client.images.get(rootfs_tag)
    except docker.errors.ImageNotFound:
        _import_rootfs(client, rootfs_tag, progress, chosen)
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
            # No owner label: the base is any process's, and the same recipe the same image.
            labels={PROJECT_LABEL: PROJECT, KIND_LABEL: "base-image"},
        )
    except docker.errors.BuildError as exc:
        log_text = "".join(str(chunk.get("stream", chunk)) for chunk in exc.build_log)
        raise SandboxError(f"base image build failed: {exc}\n{log_text[-4000:]}") from exc
    except (docker.errors.DockerException, OSError) as exc:
        raise SandboxError(f"base image build failed on the engine: {exc}") from exc
    progress(f"base image ready: {tag} ({time.monotonic() - started:.0f} s)")
    return BaseImage(tag, image.id, built=True, seconds=time.monotonic() - started)


def _install_later(root: str, recipe: Recipe, progress) -> None:
    """apt-get install `recipe.later` inside the new root filesystem (the host's network, as
    debootstrap's own downloads), then drop the package lists."""
    progress(f"base image: installing {', '.join(recipe.later)} in the {recipe.suite} root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *recipe.later]
    for cmd in (["apt-get", "update"], install):
        proc = subprocess.run(
            ["chroot", root, *cmd], capture_output=True, text=True, check=False, env=env
        )
        if proc.returncode != 0:
            raise SandboxError(
                f"{' '.join(cmd[:2])} in the {recipe.suite} root failed (exit "
                f"{proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
    shutil.rmtree(os.path.join(root, "var/lib/apt/lists"), ignore_errors=True)
    os.makedirs(os.path.join(root, "var/lib/apt/lists/partial"), exist_ok=True)


def _import_rootfs(client: DockerClient, rootfs_tag: str, progress, recipe: Recipe) -> None:
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
            f"--include={','.join(recipe.packages)}",
            recipe.suite,
            root,
        ]
        if mirror:
            cmd.append(mirror)
        progress(f"base image: debootstrap {recipe.suite} minbase (about a minute)")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SandboxError(
                f"debootstrap failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
                f"\n{proc.stderr[-3000:]}"
            )
        if recipe.later:
            _install_later(root, recipe, progress)
        for junk in ("var/cache/apt/archives", "usr/share/doc", "usr/share/man"):
            path = os.path.join(root, junk)
            for entry in os.listdir(path) if os.path.isdir(path) else []:
                full = os.path.join(path, entry)
                if os.path.isfile(full) and full.endswith(".deb"):
                    os.unlink(full)
        tar_path = os.path.join(tmp, "rootfs.tar")
        subprocess.run(["tar", "-C", root, "-cf", tar_path, "."], check=True)
        progress("base image: importing the root filesystem into the engine")
        repository, _, version = rootfs_tag.partition(":")
        try:
            reply = client.api.import_image_from_file(tar_path, repository=repository, tag=version)
            provider_for(client).tag_imported(reply, rootfs_tag)
        except docker.errors.APIError as exc:
            raise SandboxError(f"docker import of the root filesystem failed: {exc}") from exc


if (
    __name__ == "__main__"
):  # build one recipe by name: python -m endless_assets.sandbox.image.base_image
    from endless_assets.sandbox.engine.client import docker_client

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        names = sys.argv[1:] or [""]
        for name in names:
            built = ensure_base_image(docker_client(), recipe=name, progress=log.info)
            print(f"{recipe_named(name).name}: {built.tag}")
    except (ValueError, SandboxError) as exc:
        print(f"base image: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
