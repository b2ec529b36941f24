"""The one place a model name is checked, for every path that uses one (generator, solver, CLI).

`require_model(settings, role)` builds the role's endpoint from the settings and, before anything
runs, asks the endpoint's `/v1/models` what it serves:

- no model name set -> a SettingsError naming the variable to set;
- the endpoint lists models and not this one -> a SettingsError in one line naming the model,
  the endpoint and what it lists (the CLI exits 2; a Dagster step fails before writing a row),
  instead of every task being rejected as `request_refused`;
- the endpoint does not answer the listing (404, not reachable, another shape) -> no verdict:
  the run goes on and the requests themselves will say;
- an entry with the context length the server enforces (vLLM's `max_model_len`) -> reported, and
  the solver uses it instead of assuming `context_tokens`.

Each endpoint is asked once per process.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import openai

from endless_assets.llm import errors
from endless_assets.llm.cache import ReplyCache
from endless_assets.llm.client import Endpoint
from endless_assets.settings import Settings, SettingsError
from endless_assets.store.lake import resolve_data_dir

log = logging.getLogger(__name__)
Role = Literal["generator", "solver"]
SOLVER_API_KEY_ENVS = ("ENDLESS_SOLVER_API_KEY", "OPENAI_API_KEY")
GENERATOR_API_KEY_ENVS = ("OPENAI_API_KEY",)
LISTING_TIMEOUT = 15.0
CONTEXT_KEYS = ("max_model_len", "context_length", "context_window")
SHOWN = 12  # model names quoted in the error, at most


@dataclass(frozen=True)
class ModelCheck:
    """What the endpoint's listing said about the model."""

    listed: tuple[str, ...] = ()  # empty: the endpoint did not list anything
    context_tokens: int | None = None  # the context the endpoint enforces, where it says


def endpoint_for(settings: Settings, role: Role) -> Endpoint:
    """The endpoint the settings describe for `role`; a SettingsError when no model is named."""
    if role == "generator":
        if not settings.generator.model:
            raise SettingsError(
                "the llm generator needs a model: set ENDLESS_GENERATOR_MODEL (generator_model in "
                "the pipeline config), e.g. ENDLESS_GENERATOR_MODEL=qwen3-32b"
            )
        model, base_url, keys = (
            settings.generator.model,
            settings.generator.base_url,
            GENERATOR_API_KEY_ENVS,
        )
    else:
        if not settings.solver.model:
            raise SettingsError(
                "the chat solver needs a model: set ENDLESS_SOLVER_MODEL (solver_model in the "
                "pipeline config)"
            )
        model = settings.solver.model
        base_url = settings.solver.base_url or settings.generator.base_url
        keys = SOLVER_API_KEY_ENVS
    return endpoint_with(settings, model, base_url, keys)


def endpoint_with(
    settings: Settings, model: str, base_url: str, key_envs: tuple[str, ...]
) -> Endpoint:
    """An endpoint for `model` at `base_url` (keys from the first of `key_envs` that is set),
    with the settings' client limits: timeout, retries, backoff, concurrency."""
    return Endpoint(
        model=model,
        base_url=base_url,
        api_key_envs=key_envs,
        **settings.llm.client_options(),
    )


def reply_cache(settings: Settings) -> ReplyCache | None:
    """The batch's reply cache beside the lake (None when `llm_cache` is off)."""
    if not settings.llm.cache:
        return None
    return ReplyCache(Path(resolve_data_dir(settings.run.data_dir)) / "llm_cache")


def require_model(settings: Settings, role: Role) -> tuple[Endpoint, ModelCheck]:
    """The role's endpoint, its model checked against what the endpoint lists."""
    endpoint = endpoint_for(settings, role)
    return endpoint, check_model(endpoint, role)


def roles_in_use(settings: Settings) -> list[Role]:
    roles: list[Role] = []
    if settings.generator.kind == "llm":
        roles.append("generator")
    if settings.solver.policy == "chat":
        roles.append("solver")
    return roles


_checked: dict[tuple[str, str], ModelCheck] = {}
_checked_guard = threading.Lock()


def check_model(endpoint: Endpoint, role: Role = "generator") -> ModelCheck:
    key = (endpoint.base_url, endpoint.model)
    with _checked_guard:
        if key in _checked:
            return _checked[key]
    entries = _listing(endpoint)
    ids = tuple(str(e.get("id")) for e in entries if e.get("id"))
    if ids and not _listed(endpoint.model, ids):
        more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
        shown = ", ".join(ids[:SHOWN]) + more
        raise SettingsError(
            f"the {role} model {endpoint.model!r} is not served at "
            f"{endpoint.base_url or 'the OpenAI API'}: its /v1/models lists {shown}"
        )
    entry = next((e for e in entries if e.get("id") in _names(endpoint.model)), {})
    check = ModelCheck(ids, _context_of(entry))
    with _checked_guard:
        _checked[key] = check
    return check


def _listing(endpoint: Endpoint) -> list[dict[str, Any]]:
    client = openai.OpenAI(
        base_url=endpoint.base_url or None,
        api_key=endpoint.api_key(),
        timeout=min(endpoint.timeout, LISTING_TIMEOUT),
        max_retries=0,
    )
    try:
        page = client.models.list()
        entries = [m.model_dump() for m in page.data]
    except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:
        log.info(
            "%s does not list its models (%s): the model name is not checked",
            endpoint.describe(),
            errors.describe(exc),
        )
        return []
    finally:
        client.close()
    return [e for e in entries if isinstance(e, dict)]


def _names(model: str) -> tuple[str, ...]:
    # Ollama answers for `llama3` and lists it as `llama3:latest`.
    return (model, f"{model}:latest") if ":" not in model else (model,)


def _listed(model: str, ids: tuple[str, ...]) -> bool:
    return any(name in ids for name in _names(model))


def _context_of(entry: dict[str, Any]) -> int | None:
    for key in CONTEXT_KEYS:
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
