"""A small TOML writer for task.toml (Python reads TOML with `tomllib` but cannot write it).

Supports what task files need: tables and nested tables of strings, booleans, integers, finite
floats and lists of those. `dumps` checks its own output by parsing it back with `tomllib`.
"""

from __future__ import annotations

import math
import re
import tomllib
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else _string(name)


def _string(text: str) -> str:
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: TOML cannot hold {value}")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    raise ValueError(f"{where}: cannot write a {type(value).__name__} to TOML")


def _table(lines: list[str], path: list[str], table: dict[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict) and v is not None}
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    if path:
        if lines:
            lines.append("")
        lines.append("[" + ".".join(_key(p) for p in path) + "]")
    for name, value in scalars.items():
        lines.append(f"{_key(name)} = {_value(value, '.'.join([*path, name]))}")
    for name, sub in tables.items():
        _table(lines, [*path, name], sub)


def dumps(data: dict[str, Any]) -> str:
    lines: list[str] = []
    _table(lines, [], data)
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # our own output must parse
    return text
