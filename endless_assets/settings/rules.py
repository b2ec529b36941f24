"""What a valid value of each setting is (Settings.check holds every value against these rules
before anything runs)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from endless_assets.sandbox.engine.disk import check_budget, parse_size
from endless_assets.settings.declare import SettingsError
from endless_assets.settings.references import parse_references

# Memory goes to Docker as given, so it takes the forms both parse_size and docker-py read:
# digits, an optional fraction, k/m/g, an optional b (no t, no "gib").
_MEMORY = re.compile(r"^\d+(?:\.\d+)?[kmg]?b?$", re.IGNORECASE)
MIN_MEMORY = 6 * 2**20  # the smallest limit Docker accepts
# The largest values that go to Docker: a limit Docker or the kernel would refuse at every
# container's start (a 500 error) is refused here, in one line, before anything runs.
MAX_MEMORY = 2**50  # 1 PiB (Docker reads the limit as an int64 of bytes)
MAX_DISK = 16 * 2**40  # ext4's largest file (the budget's filesystem is one, disk.py)
MAX_PIDS = 2**22  # Linux's largest pid_max: a higher pids.max fails at the container's start
MAX_CPUS = 8192  # Linux's largest CPU count (NR_CPUS); Docker takes nanoCPUs as an int64


def _memory_ok(value: str) -> bool:
    return bool(_MEMORY.match(value)) and MIN_MEMORY <= parse_size(value) <= MAX_MEMORY


def _disk_ok(value: str) -> bool:
    try:
        return 0 <= check_budget(value) <= MAX_DISK
    except ValueError:
        return False


def _directory_ok(value: str) -> bool:
    """A directory, or a path whose nearest existing ancestor is one (so it can be made)."""
    path = Path(value).expanduser().absolute()
    try:
        return next(p for p in (path, *path.parents) if p.exists()).is_dir()
    except OSError:
        return False


def _docker_host_ok(value: str) -> bool:
    if not value:
        return True
    from docker.utils import parse_host  # the engine URLs docker-py itself reads

    try:
        parse_host(value)
    except Exception:  # DockerException, or ValueError for a bad port
        return False
    return True


def _docker_hosts_ok(value: str) -> bool:
    """True, or a SettingsError saying which entry is wrong and how (a duplicate, a slot count)."""
    from endless_assets.sandbox.engine.engines import parse_hosts

    try:
        parse_hosts(value, 1)
    except ValueError as exc:
        raise _refused("docker_hosts", "ENDLESS_DOCKER_HOSTS", value, str(exc)) from None
    return True


def _references_ok(value: str) -> bool:
    """True, or a SettingsError naming the entry that is wrong and why (decontamination)."""
    try:
        parse_references(value)
    except ValueError as exc:
        name, env = "decontamination_references", "ENDLESS_DECONTAMINATION_REFERENCES"
        raise _refused(name, env, value, str(exc)) from None
    return True


def _ngrams_ok(value: str) -> bool:
    sizes = [part.strip() for part in value.split(",")]
    return all(s.isdigit() and 3 <= int(s) <= 50 for s in sizes) and len(set(sizes)) == len(sizes)


def _refused(name: str, env: str, value: str, reason: str) -> Exception:
    """A SettingsError worded as Settings.check words one, with the reason the rule found."""
    origin = f"from {env}"
    if os.environ.get(env) != value:
        origin = f"from config; its environment variable is {env}"
    return SettingsError(f"{name} must be {EXPECTED[name]}, got {value!r} ({origin}): {reason}")


def _http_url_ok(value: str) -> bool:
    if not value:
        return True
    try:
        parts = urlsplit(value)
        _ = parts.port  # ValueError for a port that is not a number in range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _at_least(n: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v >= n), f"at least {n}"


_POSITIVE = ((lambda v: v > 0), "positive")
_NOT_NEGATIVE = ((lambda v: v >= 0), "0 or more")
_SHARE = ((lambda v: 0 <= v <= 1), "between 0 and 1")
_URL = (_http_url_ok, "empty or an http(s):// URL like http://localhost:8000/v1")
_COUNTS = ("tasks", "workers", "max_turns", "output_cap", "max_tokens", "repair_rounds")
_COUNTS += ("llm_concurrency", "turn_tokens", "context_tokens", "shard_tasks")
_NOT_NEGATIVES = ("task_temperature", "test_temperature", "solver_temperature", "llm_retries")
_NOT_NEGATIVES += ("llm_backoff", "rollout_workers", "warm_containers")

EXPECTED = {
    "docker_hosts": "empty or comma-separated engine URLs, each with an optional =slots, like "
    "unix:///run/a.sock=4,tcp://host:2376",
    "decontamination_references": "empty or comma-separated directories of benchmark tasks, "
    "each name=path or a bare path, like tb2=/data/terminal-bench-2/tasks",
}

# setting -> (is the value acceptable, what is expected), checked in this order.
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "data_dir": (_directory_ok, "a directory, or a path where one can be made (not a file)"),
    **{name: _at_least(1) for name in _COUNTS},
    "pids": (
        (lambda v: 1 <= v <= MAX_PIDS),
        f"at least 1 and at most {MAX_PIDS} (Linux's largest pid_max)",
    ),
    "k": ((lambda v: v >= 0), "0 (automatic) or more"),
    **{name: _POSITIVE for name in ("command_timeout", "episode_seconds", "llm_timeout")},
    "cpus": (
        (lambda v: 0.01 <= v <= MAX_CPUS),
        f"at least 0.01 (Docker's smallest CPU limit) and at most {MAX_CPUS}",
    ),
    "memory": (
        _memory_ok,
        f"a size like 1g, 1.5g or 512m (units k, m, g), at least 6m and at most "
        f"{MAX_MEMORY >> 30}g",
    ),
    "disk": (_disk_ok, "0 (no budget) or a size like 2g or 512m, at least 16m and at most 16t"),
    "docker_host": (
        _docker_host_ok,
        "empty or a Docker engine URL like unix:///var/run/docker.sock or tcp://host:2375",
    ),
    "docker_hosts": (_docker_hosts_ok, EXPECTED["docker_hosts"]),
    "generator_base_url": _URL,
    **{name: _URL for name in ("solver_base_url", "auditor_base_url")},
    "reference_judge_base_url": _URL,
    **{name: _NOT_NEGATIVE for name in _NOT_NEGATIVES},
    "dedupe_threshold": ((lambda v: 0 < v <= 1), "above 0 and at most 1"),
    "min_pass_rate": _SHARE,
    "max_pass_rate": _SHARE,
    "soundness_repeats": _at_least(1),
    "min_mutation_score": _SHARE,
    "decontamination_references": (
        _references_ok,
        EXPECTED["decontamination_references"],
    ),
    "decontamination_ngrams": (
        _ngrams_ok,
        "comma-separated whole numbers from 3 to 50, none twice, like 13,8",
    ),
    "decontamination_fuzzy": ((lambda v: 0 < v <= 1), "above 0 and at most 1"),
    "target_pass_rate": ((lambda v: 0 < v < 1), "strictly between 0 and 1"),
    "sampler_window": _at_least(1),
    "exploration_floor": _SHARE,
    "evolve_budget": _SHARE,
}
