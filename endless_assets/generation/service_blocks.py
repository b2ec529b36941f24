"""The `<service name="…">` blocks a model declares a task's services in (models.Service).

One block per service: `key: value` lines (`command:` the argv, split as a shell would, run as
the service's PID 1; `ready:` a shell command that exits 0 once it serves; optional
`ready_seconds:`, `after:` names of services it waits for, and `env: KEY=VALUE` lines) and one
```dockerfile block FROM the base image, checked as a task's is (it has no build-context files:
it writes what it needs with RUN). What models add around those is read through: a `- ` or
`* ` bullet, a key in backquotes, `environment`/`depends_on`/`healthcheck`/`cmd` for `env`/
`after`/`ready`/`command`, and lines of prose (no `key:` at their start). Every problem is one
line naming the service and what is wrong. Nothing here runs what it reads.
"""

from __future__ import annotations

import re
import shlex

from pydantic import ValidationError

from endless_assets.generation import Environment
from endless_assets.generation.dockerfile_checks import ParseError, check_dockerfile
from endless_assets.generation.parsing import (
    DOCKER_LANGS,
    EnvironmentReply,
    code_blocks,
    parse_environment,
    strip_reasoning,
)
from endless_assets.models import Service, start_order

_SERVICE_TAG = re.compile(
    r"<service\s+name\s*=\s*(?P<q>['\"])(?P<name>[^'\"]*)(?P=q)\s*>(?P<body>.*?)"
    r"(?:</service\s*>|(?=<service\b)|\Z)",
    re.S | re.I,
)
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", re.S | re.M)
KEYS = ("command", "ready", "ready_seconds", "after", "env")
SYNONYMS = {"environment": "env", "depends_on": "after", "healthcheck": "ready", "cmd": "command"}
_KEY_LINE = re.compile(r"^\s*(?:[-*]\s+)?`?(?P<key>[A-Za-z_]+)`?\s*:(?P<value>.*)$")


def without_services(text: str) -> str:
    """The reply with its service blocks taken out (what the other parsers read)."""
    return _SERVICE_TAG.sub("", text)


def parse_services(text: str, base_image: str) -> list[Service]:
    """The services the reply declares, in order (none: an empty list)."""
    services = [
        _service(m.group("name").strip(), m.group("body"), base_image)
        for m in _SERVICE_TAG.finditer(strip_reasoning(text))
    ]
    names = [s.name for s in services]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ParseError(f"service {twice[0]} is declared more than once")
    try:
        start_order(services)
    except ValueError as exc:
        raise ParseError(str(exc)) from None
    return services


def _service(name: str, body: str, base_image: str) -> Service:
    where = f"service {name or '(no name)'}"
    blocks = [b for b in code_blocks(body) if b.lang in DOCKER_LANGS or b.code.startswith("FROM")]
    if not blocks:
        raise ParseError(f"{where}: no ```dockerfile block (FROM {base_image}, then its RUN steps)")
    fields: dict[str, object] = {"name": name, "environment": {}, "after": []}
    for line in _FENCED.sub("", body).splitlines():
        found = _KEY_LINE.match(line)
        if not found:
            continue  # a blank line or prose
        key, value = found["key"].lower(), found["value"].strip()
        key = SYNONYMS.get(key, key)
        if key not in KEYS:
            raise ParseError(
                f"{where}: unexpected line {line.strip()[:80]!r} (lines are "
                + ", ".join(f"{k}:" for k in KEYS)
                + ")"
            )
        if key == "command":
            try:
                fields["command"] = shlex.split(value)
            except ValueError as exc:
                raise ParseError(f"{where}: command: {exc}") from None
        elif key == "env":
            var, eq, val = value.partition("=")
            if not eq or not var.strip():
                raise ParseError(f"{where}: env line {value!r} is not KEY=VALUE")
            fields["environment"][var.strip()] = val  # type: ignore[index]
        elif key == "after":
            fields["after"] = [n for n in re.split(r"[,\s]+", value) if n]
        else:
            fields[key] = value
    dockerfile = check_dockerfile(blocks[0].code, base_image, {})
    try:
        return Service.model_validate({**fields, "dockerfile": dockerfile})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "it"
        raise ParseError(f"{where}: {field}: {error['msg']}") from None


def render_services(services: list[Service]) -> str:
    """The services as blocks of the same format (what the model is shown it wrote)."""
    parts = []
    for s in services:
        lines = [f"command: {shlex.join(s.command)}", f"ready: {s.ready}"]
        lines += [f"ready_seconds: {s.ready_seconds:g}"] if s.ready_seconds != 60 else []
        lines += [f"after: {', '.join(s.after)}"] if s.after else []
        lines += [f"env: {k}={v}" for k, v in s.environment.items()]
        body = "\n".join(lines) + f"\n```dockerfile\n{s.dockerfile.rstrip()}\n```"
        parts.append(f'<service name="{s.name}">\n{body}\n</service>')
    return "\n\n".join(parts)


def replace_services(current: list[Service], repaired: list[Service]) -> list[Service]:
    """`current` with each service a repair resent in its place (by name; it adds none)."""
    known = {s.name for s in current}
    for s in repaired:
        if s.name not in known:
            raise ParseError(
                f"service {s.name} is not one of the task's services "
                f"({', '.join(sorted(known)) or 'it has none'}): resend one of those"
            )
    fixed = {s.name: s for s in repaired}
    return [fixed.get(s.name, s) for s in current]


def read_repair(
    text: str, base_image: str, previous: Environment, declared: list[Service]
) -> Environment:
    """A build-stage repair reply over `previous`: whichever of the Dockerfile (with its files),
    the initial-state test and the services (`declared`: the draft's) it resends."""
    current = declared if previous.services is None else previous.services
    repaired = parse_services(text, base_image)
    rest = without_services(text)
    parsed = EnvironmentReply(None)
    if not repaired or code_blocks(strip_reasoning(rest)) or "<file" in rest.lower():
        parsed = parse_environment(
            rest, base_image, allow_test=True, known_files=previous.context_files
        )
    return Environment(
        parsed.dockerfile or previous.dockerfile,
        {**previous.context_files, **parsed.files},
        parsed.initial_test or previous.initial_test,
        replace_services(current, repaired) if repaired else previous.services,
    )


def render_environment(env: Environment) -> str:
    """What the model wrote last round, as it would send it (the repair's assistant turn)."""
    parts = [f"```dockerfile\n{env.dockerfile.rstrip()}\n```"]
    for path, content in sorted(env.context_files.items()):
        parts.append(f'<file path="{path}">\n{content}</file>')
    if env.services:  # as an earlier repair left them
        parts.append(render_services(env.services))
    return "\n\n".join(parts) + "\n"
