"""How a setting is declared (`setting()`), what a declared one is (`Field`), and how a raw value
from the environment or from config becomes its typed value."""

from __future__ import annotations

import math
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any


class SettingsError(ValueError):
    pass


def setting(
    default: Any,
    env: str,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    fallback_env: str = "",
    operational: bool = False,
    name: str = "",
) -> Any:
    """A settings field: its default, environment variable, meaning (and allowed values).

    `name`: the setting's public name (config, flags, `endless settings`, the docs) when it is
    not the attribute's in its group (`solver_model` is `settings.solver.model`).

    `operational`: the setting says where or how fast work runs (engines, endpoints' URLs,
    parallelism, the data directory), not what any stage makes of a task; a rerun under other
    operational values reuses journaled work."""
    meta = {
        "env": env,
        "help": help,
        "choices": choices,
        "fallback_env": fallback_env,
        "operational": operational,
        "name": name,
    }
    return dataclass_field(default=default, metadata=meta)


def endpoint(env: str, help: str, *, fallback_env: str = "", name: str = "") -> Any:
    """An OpenAI-compatible endpoint's URL (operational). Its API key is read from the
    environment when a client is made: never a setting, never stored."""
    return setting("", env, help, fallback_env=fallback_env, operational=True, name=name)


@dataclass(frozen=True)
class Field:
    """A declared setting: `name` is its public name (config, flags, docs); its value is
    `settings.<group>.<attr>`."""

    name: str
    env: str
    default: Any
    kind: type
    help: str
    choices: tuple[str, ...] = ()
    fallback_env: str = ""  # read when `env` is unset (e.g. a solver endpoint -> the generator's)
    group: str = ""
    operational: bool = False
    attr: str = ""


KINDS = {"str": str, "int": int, "float": float, "bool": bool}
# Text settings that go to Docker as text are stripped: Docker does not read " 2g".
STRIPPED = ("memory", "disk")
# An empty data_dir means the default, as in Lake (an empty path would be the working directory).
EMPTY_IS_DEFAULT = ("data_dir",)


def is_unset(f: Field, raw: Any) -> bool:
    """True when `raw` means "the default": absent, or empty for a non-text setting."""
    return raw is None or (raw == "" and (f.kind is not str or f.name in EMPTY_IS_DEFAULT))


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


_KIND_HINT = {int: " (a whole number)", float: " (a finite number)", str: ""}
_KIND_HINT[bool] = " (true/false, yes/no, on/off or 1/0)"


def parse(f: Field, raw: Any, source: str) -> Any:
    """`raw` (text from the environment, or a value from config) as the field's kind."""
    hint = f"; its environment variable is {f.env}" if source == "config" else ""
    try:
        if f.kind is bool:
            value = _parse_bool(raw)
        elif f.kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        else:
            value = f.kind(raw)
        if f.kind is float and not math.isfinite(value):
            raise ValueError(raw)
    except (TypeError, ValueError, OverflowError):
        raise SettingsError(
            f"{f.name} ({source}) must be {f.kind.__name__}, got {raw!r}{_KIND_HINT[f.kind]}{hint}"
        ) from None
    if f.name in STRIPPED:
        value = value.strip()
    if f.choices and value not in f.choices:
        raise SettingsError(
            f"{f.name} ({source}) must be one of {', '.join(f.choices)}, got {value!r}{hint}"
        )
    return value


def origin(f: Field, source: str) -> str:
    if source == "config":
        return f"from config; its environment variable is {f.env}"
    return f"from {source}"
