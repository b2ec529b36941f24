"""What a valid value of each setting is (settings.py checks every value against these rules
before anything runs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from endless_assets.sandbox.disk import check_budget, parse_size

# Memory goes to Docker as given, so it takes the forms both parse_size and docker-py read:
# digits, an optional fraction, k/m/g, an optional b (no t, no "gib").
_MEMORY = re.compile(r"^\d+(?:\.\d+)?[kmg]?b?$", re.IGNORECASE)
MIN_MEMORY = 6 * 2**20  # the smallest limit Docker accepts


def _memory_ok(value: str) -> bool:
    return bool(_MEMORY.match(value)) and parse_size(value) >= MIN_MEMORY


def _disk_ok(value: str) -> bool:
    try:
        return check_budget(value) >= 0
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
    from endless_assets.sandbox.engines import parse_hosts

    try:
        parse_hosts(value, 1)
    except ValueError:
        return False
    return True


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
_COUNTS = ("tasks", "workers", "max_turns", "output_cap", "pids", "max_tokens", "repair_rounds")
_COUNTS += ("llm_concurrency", "turn_tokens", "context_tokens", "shard_tasks")
_NOT_NEGATIVES = ("task_temperature", "test_temperature", "solver_temperature", "llm_retries")
_NOT_NEGATIVES += ("llm_backoff", "rollout_workers", "warm_containers")

# setting -> (is the value acceptable, what is expected), checked in this order.
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "data_dir": (_directory_ok, "a directory, or a path where one can be made (not a file)"),
    **{name: _at_least(1) for name in _COUNTS},
    "k": ((lambda v: v >= 0), "0 (automatic) or more"),
    **{name: _POSITIVE for name in ("command_timeout", "episode_seconds", "llm_timeout")},
    "cpus": ((lambda v: v >= 0.01), "at least 0.01 (Docker's smallest CPU limit)"),
    "memory": (_memory_ok, "a size like 1g, 1.5g or 512m (units k, m, g), at least 6m"),
    "disk": (_disk_ok, "0 (no budget) or a size like 2g or 512m, at least 16m"),
    "docker_host": (
        _docker_host_ok,
        "empty or a Docker engine URL like unix:///var/run/docker.sock or tcp://host:2375",
    ),
    "docker_hosts": (
        _docker_hosts_ok,
        "empty or comma-separated engine URLs, each with an optional =slots, like "
        "unix:///run/a.sock=4,tcp://host:2376",
    ),
    "generator_base_url": _URL,
    **{name: _URL for name in ("solver_base_url", "auditor_base_url")},
    "reference_judge_base_url": _URL,
    **{name: _NOT_NEGATIVE for name in _NOT_NEGATIVES},
    "dedupe_threshold": ((lambda v: 0 < v <= 1), "above 0 and at most 1"),
    "min_pass_rate": _SHARE,
    "max_pass_rate": _SHARE,
    "soundness_repeats": _at_least(1),
    "min_mutation_score": _SHARE,
}
