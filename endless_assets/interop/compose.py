"""A task's docker-compose file read into services (models.Service), on import.

The agent's service (Harbor: `main`; Terminal-Bench 1.x: `client`) is the task's own container;
every other service becomes a `Service`:

- `build:` (a path, or `context` and `dockerfile`, relative to the compose file and inside the
  task) -> its Dockerfile and build context (binary files and executable bits kept), its FROM
  mapped with `--base-image-map` like the task's own; `image:` -> a Dockerfile `FROM` it, which
  must be mapped (the task's images cannot be pulled here); with both, `build:` wins (`image:`
  only names what it builds);
- `command` / `entrypoint` (a list, or a string split as the shell would) -> its command (an
  `entrypoint` replaces the image's, as in Compose); neither: the Dockerfile's last `CMD`, or
  without one its last `ENTRYPOINT`;
- `environment` (a list of `K=V` or a map; a bare `K`, Compose's pass-through of this host's
  variable, is dropped) -> its environment; `user`, `working_dir` -> `USER` / `WORKDIR` lines;
- `healthcheck.test` (`CMD ...`, `CMD-SHELL ...` or a string) -> its readiness command, within
  `start_period` + `retries` x `interval` (Compose's defaults: 0 s, 3, 30 s) but never under
  60 s (a service that never answers still fails; one on a busy machine gets time); none: the
  Dockerfile's `HEALTHCHECK ... CMD`, else ready once started (`true`), as Compose's
  `depends_on` waits for nothing more;
- `mem_limit`, `cpus`, `pids_limit` (or `deploy.resources.limits`) -> its limits;
  `depends_on` (a list or a map) -> `after`: it starts once those are ready (one on the agent's
  service is dropped: every service is ready before the agent starts; an unknown name or a
  cycle is refused); named volumes (`data:/var/lib/x`) left out (the data stays in the
  container); bind mounts of the task's own files, `env_file` and `build.args`:
  compose_inputs.py; `ports` are not published (services are reached by name, never from this
  host) and `network_mode: none` is what the agent's container has anyway; the agent's
  service's harness log mounts (`${A}:${B}`, as Harbor's and Terminal-Bench's templates write)
  are dropped; a few other keys that change nothing here are ignored (`IGNORED`).

Exports write it back: compose_export.py.

Anything that would reach the host (`HOST_ACCESS`: bind mounts of anything but the task's own
files, privileged, host namespaces, added capabilities or devices...) and any other key is
refused with one line naming the key and the service: imported tasks are untrusted. A service
name that is not a DNS label (`my_db`, `DB`) becomes one (`my-db`, `db`) and keeps its own name
as a second network alias, which exports write back as the compose service's name.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from endless_assets.interop.compose_inputs import env_files, mounted, with_build_args
from endless_assets.interop.dockerfile import replace_base_images
from endless_assets.interop.import_files import ImportProblem, read_text, read_tree
from endless_assets.models import Service, start_order
from endless_assets.sandbox.image.images import encode_context

COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml")
SERVICES_DIR = "services"  # exports: environment/services/<name>/ is a service's build context
HOST_ACCESS = {
    "privileged", "network_mode", "cap_add", "devices", "pid", "ipc", "uts",
    "userns_mode", "security_opt", "volumes_from", "cgroup_parent", "cgroup", "runtime", "gpus",
    "device_cgroup_rules", "secrets", "configs", "sysctls", "extends",
}  # fmt: skip
IGNORED = {
    "container_name", "restart", "expose", "ports", "labels", "hostname", "init", "tty",
    "stdin_open", "logging", "deploy", "networks", "pull_policy", "platform", "stop_signal",
    "stop_grace_period", "links", "extra_hosts", "tmpfs", "shm_size", "ulimits", "dns",
    "mem_reservation", "memswap_limit", "cpu_shares", "oom_score_adj", "domainname", "scale",
}  # fmt: skip
HANDLED = {
    "build", "image", "command", "entrypoint", "environment", "healthcheck", "depends_on",
    "working_dir", "user", "mem_limit", "cpus", "pids_limit", "volumes", "env_file",
}  # fmt: skip
READY_FLOOR = 60.0  # seconds: a loaded machine starts a service slower than its author's did
_HARNESS_MOUNT = re.compile(r"^\$\{\w+\}:\$\{\w+\}(:r[ow])?$")  # the harness's own log mounts
_CMD = re.compile(r"^\s*CMD\s+(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_ENTRYPOINT = re.compile(r"^\s*ENTRYPOINT\s+(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_HEALTHCHECK = re.compile(r"^\s*HEALTHCHECK\s+(?:--\S+\s+)*CMD\s+(.+?)\s*$", re.I | re.M)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass
class ServiceSpec:
    """A service as read, before the base image map: `image` is the one it pulls ("" if built)."""

    name: str
    dockerfile: str
    command: list[str]
    ready: str = "true"
    ready_seconds: float = 60.0
    environment: dict[str, str] = field(default_factory=dict)
    context_files: dict[str, str] = field(default_factory=dict)  # encoded as images.py does
    limits: dict[str, Any] = field(default_factory=dict)  # memory, cpus, pids
    image: str = ""
    context: str = ""  # its build context, relative to the compose file's directory
    after: list[str] = field(default_factory=list)  # its depends_on, the agent's left out

    def service(self, image_map: dict[str, str]) -> Service:
        """The Service, its FROM mapped; an `image:` with no mapping is refused."""
        if self.image and self.image not in image_map:
            raise ImportProblem(
                f"service {self.name}: image {self.image} is not mapped (add --base-image-map "
                f"{self.image}=IMAGE; images are not pulled here)"
            )
        if not self.command:
            what = f"image {self.image}" if self.image else "its Dockerfile (no CMD)"
            raise ImportProblem(
                f"service {self.name}: no command: the default command of {what} is not known "
                "here; add `command:` (what the image runs, e.g. its CMD) to the compose service"
            )
        name = dns_label(self.name)
        return Service(
            name=name,
            aliases=[self.name] if name != self.name else [],
            after=[dns_label(n) for n in self.after],
            dockerfile=replace_base_images(self.dockerfile, image_map),
            context_files=self.context_files,
            command=self.command,
            environment=self.environment,
            ready=self.ready,
            ready_seconds=self.ready_seconds,
            **self.limits,
        )


def dns_label(name: str) -> str:
    """A compose service name as a DNS label: lower case, `_` and `.` as `-`, at most 31."""
    label = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")[:31].rstrip("-")
    return label if label[:1].isalpha() else f"s-{label}"[:31].rstrip("-")


def services_of(specs: list[ServiceSpec], image_map: dict[str, str]) -> list[Service]:
    """The services, FROM mapped, in a start order that exists (ImportProblem if not)."""
    services = [spec.service(image_map) for spec in specs]
    try:
        start_order(services)
    except ValueError as exc:
        raise ImportProblem(f"depends_on: {exc}") from None
    return services


def compose_path(directory: Path) -> Path | None:
    """The compose file of a directory (None without one)."""
    return next((directory / n for n in COMPOSE_NAMES if (directory / n).exists()), None)


def read_services(path: Path, where: Path) -> dict[str, dict[str, Any]]:
    """The `services` of a compose file (ImportProblem if it does not read)."""
    try:
        compose = yaml.safe_load(read_text(path, where)) or {}
    except yaml.YAMLError as exc:
        raise ImportProblem(f"{path.name} does not parse: {exc}") from exc
    services = compose.get("services") if isinstance(compose, dict) else None
    if not isinstance(services, dict) or not all(isinstance(s, dict) for s in services.values()):
        raise ImportProblem(f"{path.name} has no services map")
    return {str(name): config for name, config in services.items()}


def check_keys(name: str, config: dict[str, Any], agent: bool = False) -> None:
    """Refuse what would reach the host, and every key not understood here."""
    for key in config:
        if key == "network_mode" and config[key] == "none":
            continue
        if key in HOST_ACCESS:
            raise ImportProblem(
                f"service {name}: `{key}` is refused (imported tasks get no access to the host)"
            )
        if key not in HANDLED | IGNORED and not str(key).startswith("x-"):
            raise ImportProblem(f"service {name}: `{key}` is not supported")
    mounts = [v for v in config.get("volumes") or [] if not _HARNESS_MOUNT.match(str(v))]
    if agent and mounts:
        raise ImportProblem(f"service {name}: volumes of the agent's service are refused")


def argv(value: Any, where: str) -> list[str]:
    """A Compose command: a list, or a string split as the shell would."""
    if value is None:
        return []
    if isinstance(value, list):
        return [unescape(str(v)) for v in value]
    try:
        return shlex.split(unescape(str(value)))
    except ValueError as exc:
        raise ImportProblem(f"{where} does not split into words: {exc}") from exc


def unescape(text: str) -> str:
    return text.replace("$$", "$")  # Compose's escaped dollar


def env_map(value: Any) -> dict[str, str]:
    """A Compose environment, list or map, as a map (a pass-through `K` dropped)."""
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if v is not None]
    else:
        items = [tuple(str(e).split("=", 1)) for e in value or [] if "=" in str(e)]
    return {str(k): unescape(_scalar(v)) for k, v in items}


def _scalar(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _seconds(value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, int | float):
        return float(value)
    found = _DURATION.findall(str(value))
    return sum(float(n) * _UNITS[u] for n, u in found) if found else default


def readiness(name: str, health: Any) -> tuple[str, float]:
    """(the readiness command, its deadline in seconds) of a Compose healthcheck."""
    if not isinstance(health, dict) or health.get("disable") or not health.get("test"):
        return "true", 60.0
    test = health["test"]
    if isinstance(test, str):
        command = test
    elif test[0] == "CMD-SHELL" and len(test) == 2:
        command = str(test[1])
    elif test[0] == "CMD" and len(test) > 1:
        command = shlex.join(str(t) for t in test[1:])
    elif test[0] == "NONE":
        return "true", 60.0
    else:
        raise ImportProblem(f"service {name}: healthcheck test {test} is not CMD or CMD-SHELL")
    seconds = _seconds(health.get("start_period"), 0.0)
    seconds += int(health.get("retries") or 3) * _seconds(health.get("interval"), 30.0)
    return unescape(command), min(600.0, max(READY_FLOOR, seconds))


def _argv_of(form: str) -> list[str]:
    """A Dockerfile instruction's argument: the exec form's list, or the shell form's line."""
    try:
        parsed = json.loads(form)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, list):
        return [str(p) for p in parsed]
    return ["/bin/sh", "-c", form]


def default_command(dockerfile: str) -> tuple[list[str], str]:
    """What the image runs when compose names no command, and the Dockerfile to run it with: its
    last CMD (after its ENTRYPOINT, which stays in the image); with no CMD, its last ENTRYPOINT
    (the Dockerfile then ends `ENTRYPOINT []`: the argv says it all); ([], the Dockerfile) with
    neither."""
    commands, entrypoints = _CMD.findall(dockerfile), _ENTRYPOINT.findall(dockerfile)
    if commands:
        return _argv_of(commands[-1]), dockerfile
    if entrypoints and _argv_of(entrypoints[-1]):
        return _argv_of(entrypoints[-1]), f"{dockerfile.rstrip()}\nENTRYPOINT []\n"
    return [], dockerfile


def image_health(dockerfile: str) -> dict[str, Any] | None:
    """The Dockerfile's last `HEALTHCHECK ... CMD` as a compose healthcheck (None without)."""
    found = _HEALTHCHECK.findall(dockerfile)
    if not found:
        return None
    argv = _argv_of(found[-1])
    command = argv[2] if argv[:2] == ["/bin/sh", "-c"] else shlex.join(argv)
    return {"test": ["CMD-SHELL", command]}


def service_spec(
    name: str,
    config: dict[str, Any],
    base: Path,
    directory: Path,
    *,
    max_binary_bytes: int,
    skip: tuple[str, ...] = (),
    agent: str = "",
) -> ServiceSpec:
    """One service that is not the agent's (`agent`), read (see the module docstring); `base` is
    the compose file's directory, `directory` the task's, `skip` names its own files."""
    check_keys(name, config)
    build, image = config.get("build"), str(config.get("image") or "")
    context_files: dict[str, str] = {}
    context = ""
    if build:
        build = {"context": build} if isinstance(build, str) else build
        unknown = sorted(set(build) - {"context", "dockerfile", "args"})
        if unknown:
            raise ImportProblem(f"service {name}: build `{unknown[0]}` is not supported")
        root = (base / str(build.get("context") or ".")).resolve()
        if not root.is_relative_to(directory.resolve()) or not root.is_dir():
            where = build.get("context")
            raise ImportProblem(f"service {name}: build context {where} is not in the task")
        files = read_tree(root, directory, max_binary_bytes=max_binary_bytes, skip=skip)
        file = str(build.get("dockerfile") or "Dockerfile")
        dockerfile = files.pop(file)
        if dockerfile is None:
            raise ImportProblem(f"service {name}: no {file} (text) in its build context")
        files.text.pop(compose_path(root).name if compose_path(root) else "", None)
        context_files = encode_context(files.text, files.binary, sorted(files.executable))
        context, image = root.relative_to(base.resolve()).as_posix(), ""
        dockerfile = with_build_args(dockerfile, env_map(build.get("args")))
    elif image:
        dockerfile = f"FROM {image}\n"
    else:
        raise ImportProblem(f"service {name}: neither `build` nor `image`")
    mounts, copies = mounted(
        name, config.get("volumes"), base, directory, max_binary_bytes=max_binary_bytes
    )
    context_files |= mounts
    dockerfile = "\n".join([dockerfile.rstrip(), *copies]) + "\n"
    for key, line in (("user", "USER"), ("working_dir", "WORKDIR")):
        if config.get(key):
            dockerfile = f"{dockerfile.rstrip()}\n{line} {config[key]}\n"
    command = argv(config.get("command"), f"service {name}: command")
    entrypoint = config.get("entrypoint")
    if entrypoint is not None:
        dockerfile = f"{dockerfile.rstrip()}\nENTRYPOINT []\n"
        command = argv(entrypoint, f"service {name}: entrypoint") + command
    if not command:
        command, dockerfile = default_command(dockerfile)
    health = config.get("healthcheck") if "healthcheck" in config else image_health(dockerfile)
    ready, seconds = readiness(name, health)
    deployed = ((config.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    given = {k: v for k, v in {**deployed, **config}.items() if "${" not in str(v)}
    limits = {
        "memory": str(given.get("mem_limit") or given.get("memory") or "") or None,
        "cpus": float(given["cpus"]) if "cpus" in given else None,
        "pids": int(given.get("pids_limit") or given.get("pids") or 0) or None,
    }
    return ServiceSpec(
        name=name,
        dockerfile=dockerfile,
        command=command,
        ready=ready,
        ready_seconds=seconds,
        environment=env_files(name, config.get("env_file"), base, directory)
        | env_map(config.get("environment")),
        context_files=context_files,
        limits={k: v for k, v in limits.items() if v is not None},
        image=image,
        context=context,
        after=[str(n) for n in config.get("depends_on") or [] if str(n) != agent],
    )


def without_contexts(files: Any, specs: list[ServiceSpec]) -> None:
    """Leave the services' own build contexts (subdirectories) out of the agent's files."""
    prefixes = tuple(f"{s.context}/" for s in specs if s.context not in ("", "."))
    for part in (files.text, files.binary):
        for rel in [r for r in part if r.startswith(prefixes)]:
            del part[rel]
    files.executable = {r for r in files.executable if not r.startswith(prefixes)}
