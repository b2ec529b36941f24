"""The chat client: retries, concurrency cap, cache, usage. See the package docstring."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import openai
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from endless_assets.llm.cache import ReplyCache, request_key

log = logging.getLogger(__name__)
PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, Ollama, llama.cpp) accept any key


class LLMUnavailable(Exception):
    """The endpoint could not answer after every retry: infrastructure, not the model's fault."""


class LLMRequestError(Exception):
    """The endpoint refused the request itself (400: e.g. the context is too long)."""


@dataclass
class ChatReply:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    finish_reason: str = ""
    reasoning: str = ""  # separate reasoning text, where the server returns one
    cached: bool = False
    seconds: float = 0.0


@dataclass
class Endpoint:
    """Where and how to reach a model. `api_key_envs` are tried in order."""

    model: str
    base_url: str = ""
    api_key_envs: tuple[str, ...] = ("OPENAI_API_KEY",)
    timeout: float = 300.0
    retries: int = 6
    concurrency: int = 32
    backoff: float = 0.5  # first retry delay in seconds; doubles each time, capped at 30 s
    extra: dict[str, Any] = field(default_factory=dict)

    def api_key(self) -> str:
        for name in self.api_key_envs:
            value = os.environ.get(name)
            if value:
                return value
        return PLACEHOLDER_KEY

    def describe(self) -> str:
        return f"{self.model} at {self.base_url or 'the OpenAI API'}"


_semaphores: dict[tuple[str, str], threading.BoundedSemaphore] = {}
_semaphores_guard = threading.Lock()


def _semaphore(endpoint: Endpoint) -> threading.BoundedSemaphore:
    key = (endpoint.base_url, endpoint.model)
    with _semaphores_guard:
        if key not in _semaphores:
            _semaphores[key] = threading.BoundedSemaphore(max(1, endpoint.concurrency))
        return _semaphores[key]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, LLMUnavailableReply):
        return True
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 425, 429) or exc.status_code >= 500
    return False


class ChatClient:
    """Thread-safe; one per endpoint and process is enough."""

    def __init__(self, endpoint: Endpoint, cache: ReplyCache | None = None) -> None:
        if not endpoint.model:
            raise ValueError("no model name given for the LLM endpoint")
        self.endpoint = endpoint
        self.cache = cache
        self._client = openai.OpenAI(
            base_url=endpoint.base_url or None,
            api_key=endpoint.api_key(),
            timeout=endpoint.timeout,
            max_retries=0,  # tenacity retries, with backoff we control and can test
        )
        self._token_param = "max_tokens"
        self._send_temperature = True
        self.requests = 0  # requests actually sent (cache hits excluded), retries included
        self._count_guard = threading.Lock()

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 1.0,
        max_tokens: int = 4096,
        seed: int | None = None,
        use_cache: bool = True,
    ) -> ChatReply:
        params: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
        if seed is not None:
            params["seed"] = seed
        key = request_key(self.endpoint.model, messages, params)
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return ChatReply(**{**hit, "cached": True, "seconds": 0.0})
        started = time.monotonic()
        with _semaphore(self.endpoint):
            reply = self._send_with_retries(messages, params)
        reply.seconds = time.monotonic() - started
        if self.cache is not None and reply.finish_reason != "error":
            stored = {k: v for k, v in reply.__dict__.items() if k not in ("cached", "seconds")}
            self.cache.put(key, stored)
        return reply

    def _send_with_retries(
        self, messages: list[dict[str, Any]], params: dict[str, Any]
    ) -> ChatReply:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "LLM request to %s failed (%s); retry %d of %d",
                self.endpoint.describe(),
                _short(exc),
                state.attempt_number,
                self.endpoint.retries,
            )

        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.endpoint.retries + 1),
            wait=wait_exponential_jitter(
                multiplier=self.endpoint.backoff, max=30, jitter=self.endpoint.backoff
            ),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(self._send_once, messages, params)
        except openai.BadRequestError as exc:
            raise LLMRequestError(
                f"{self.endpoint.describe()} refused the request: {_short(exc)}"
            ) from exc
        except openai.AuthenticationError as exc:
            raise LLMUnavailable(
                f"{self.endpoint.describe()} rejected the API key ({_short(exc)}); set "
                f"{' or '.join(self.endpoint.api_key_envs)}"
            ) from exc
        except openai.NotFoundError as exc:
            raise LLMUnavailable(
                f"{self.endpoint.describe()}: not found ({_short(exc)}); check the model name "
                "and that the base URL ends in /v1"
            ) from exc
        except openai.OpenAIError as exc:
            raise LLMUnavailable(
                f"{self.endpoint.describe()} did not answer after {self.endpoint.retries} "
                f"retries: {_short(exc)}"
            ) from exc

    def _send_once(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> ChatReply:
        with self._count_guard:
            self.requests += 1
        kwargs: dict[str, Any] = {"model": self.endpoint.model, "messages": messages}
        kwargs[self._token_param] = params["max_tokens"]
        if self._send_temperature:
            kwargs["temperature"] = params["temperature"]
        if "seed" in params:
            kwargs["seed"] = params["seed"]
        kwargs.update(self.endpoint.extra)
        try:
            response = self._client.chat.completions.create(**kwargs)
        except openai.BadRequestError as exc:
            # OpenAI's reasoning models want max_completion_tokens and their default temperature.
            text = str(exc)
            adapted = False
            if "max_tokens" in text and self._token_param == "max_tokens":
                self._token_param, adapted = "max_completion_tokens", True
            if "temperature" in text and self._send_temperature:
                self._send_temperature, adapted = False, True
            if not adapted:
                raise
            return self._send_once(messages, params)
        return _reply_from(response)


def _reply_from(response: Any) -> ChatReply:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise LLMUnavailableReply("the endpoint replied without any choices")
    choice = choices[0]
    message = choice.message
    text = message.content or ""
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    usage = getattr(response, "usage", None)
    return ChatReply(
        text=text,
        tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
        tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
        finish_reason=str(choice.finish_reason or ""),
        reasoning=reasoning if isinstance(reasoning, str) else "",
    )


class LLMUnavailableReply(openai.OpenAIError):
    """A 200 reply without a usable body: retried like a server error."""


def _short(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 400 else text[:397] + "..."
