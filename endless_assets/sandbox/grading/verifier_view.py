"""What a verifier container sees of the agent's (verifier.py): the agent's files, but the image's
own configuration where the agent changed it and the reference solution does not, and fresh
volumes where an image's VOLUME holds a system location or configuration.

Configuration (system_paths.is_config) decides what a library or tool loads or runs (OpenSSL's
providers, git's hooks and fsmonitor, PAM, ssh, shell rc files); which of it a test reaches
cannot be listed, so the verifier's layer gets the image's version back (containers/pristine.py)
and the verdict names the paths. That is not called cheating: an honest agent leaves a
`~/.gitconfig` too. What the agent wrote in a VOLUME never reaches its layer, so is never
checked: a volume holding a system location or configuration is fresh from the image."""

from __future__ import annotations

from collections.abc import Callable

from endless_assets.sandbox.containers import pristine
from endless_assets.sandbox.containers.container import TaskContainer
from endless_assets.sandbox.engine.client import SandboxError
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.system_paths import CONFIG_DIRS, inside, is_config

WORKING = ("/", "/tmp")  # where grading works, whatever the task (homes_of)


def homes_of(container: TaskContainer, spec: bundle.Verifier | None = None) -> list[str]:
    """The directories whose dot-entries are configuration: where grading works (`/`, and `/tmp`,
    where a test makes a repository: git reads the config of a `.git` above it), root's home and
    that of the user a task's own script runs as."""
    homes = [*WORKING, *container.homes]
    if spec is not None and spec.script:
        agent = container.agent
        user = spec.user or agent.image_user or "root"
        try:
            home = agent.home if user == agent.user else agent.lookup(user)[2]
        except ValueError:
            home = ""  # (the script's verdict says so: script_route.VerifierUserUnknown)
        if home.startswith("/") and home != "/" and home not in homes:
            homes.append(home)
    return homes


def shared_volumes(container: TaskContainer, homes: list[str]) -> tuple[list[str] | None, str]:
    """The agent's volumes a verifier shares ("name:destination:mode"; None: all), and a line for
    the verdict naming those it gets fresh instead: at, in or above a system location or /etc,
    or at or above a directory of `homes`."""
    reached = [*container.system, *CONFIG_DIRS]
    kept, fresh = [], []
    for name, destination, writable in container.volumes:
        homely = is_config(destination, homes)
        homely = homely or any(inside(home, destination) for home in homes if home != "/")
        if homely or any(inside(destination, s) or inside(s, destination) for s in reached):
            fresh.append(destination)
            continue
        kept.append(f"{name}:{destination}:{'rw' if writable else 'ro'}")
    if not fresh:
        return None, ""
    return kept, (
        f"graded with the image's own {', '.join(sorted(fresh))} (a VOLUME holding a system "
        "location or configuration: what the agent wrote there was not seen)"
    )


def put_back(container: TaskContainer, paths: tuple[str, ...]) -> Callable[[str], None] | None:
    """What makes a verifier's layer show the image's own `paths` (pristine.py), or None."""
    if not paths:
        return None

    def prepare(upper: str) -> None:
        if not upper or not container.lower_dirs:
            raise SandboxError("the verifier's layer is out of reach: configuration not set back")
        try:
            pristine.restore(upper, container.lower_dirs, paths)
        except OSError as exc:
            raise SandboxError(f"setting the agent's configuration aside failed: {exc}") from exc

    return prepare
