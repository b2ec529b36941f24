"""The chat client: pacing, retries, cache, usage, error text. See the package docstring."""

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

from endless_assets.llm import errors
from endless_assets.llm.cache import ReplyCache, request_key
from endless_assets.llm.pacing import Pacer, Ticket, pacer_for
from endless_assets.llm.system_role import (
    Messages,
    SystemRole,
    has_system,
    may_be_refusal,
    system_role_for,
)

log = logging.getLogger(__name__)
PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, Ollama, llama.cpp) accept any key


class LLMUnavailable(Exception):
    """The endpoint could not answer after every retry: infrastructure, not the model's fault."""


class LLMRequestError(Exception):
    """The endpoint refused the request itself (400/413/422: e.g. the context is too long)."""


@dataclass
class ChatReply:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    finish_reason: str = ""
    reasoning: str = ""  # separate reasoning text, where the server returns one
    cached: bool = False
    seconds: float = 0.0  # from the call to the reply, waits for a slot included
    queue_seconds: float = 0.0  # of which waiting for a free slot in this client (pacing.py)


_NOT_CACHED = ("cached", "seconds", "queue_seconds")


@dataclass
class Endpoint:
    """Where and how to reach a model. `api_key_envs` are tried in order."""

    model: str
    base_url: str = ""
    api_key_envs: tuple[str, ...] = ("OPENAI_API_KEY",)
    timeout: float = 300.0
    retries: int = 6
    concurrency: int = 32  # the most requests in flight; pacing.py finds what the server takes
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


class LLMUnavailableReply(openai.OpenAIError):
    """A 200 reply without a usable body: retried like a server error."""


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, LLMUnavailableReply) or errors.is_retryable(exc)


class ChatClient:
    """Thread-safe; one per endpoint and process is enough. Clients of the same endpoint share
    its pacer (how many requests it gets at once) and what its template accepts."""

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
        self.pacer: Pacer = pacer_for(endpoint.base_url, endpoint.model, endpoint.concurrency)
        self.system_role: SystemRole = system_role_for(endpoint.base_url, endpoint.model)
        self._token_param = "max_tokens"
        self._send_temperature = True
        self.requests = 0  # requests actually sent (cache hits excluded), retries included
        self.timeouts = 0  # requests abandoned after `timeout` seconds
        self.retries = 0  # requests sent again after a failure
        self._count_guard = threading.Lock()

    def complete(
        self,
        messages: Messages,
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
        waited: list[float] = []
        reply = self._send_with_retries(messages, params, waited)
        reply.seconds = time.monotonic() - started
        reply.queue_seconds = sum(waited)
        if self.cache is not None and reply.finish_reason != "error":
            stored = {k: v for k, v in reply.__dict__.items() if k not in _NOT_CACHED}
            self.cache.put(key, stored)
        return reply

    def report(self) -> dict[str, Any]:
        """What this client asked of the endpoint and what the endpoint's pacer settled on (for
        asset metadata; no key, no message text)."""
        stats = self.pacer.stats()
        return {
            "llm_requests_sent": self.requests,  # retries and probes included
            "llm_timeouts": self.timeouts,
            "llm_retries": self.retries,
            "llm_concurrency_settled": stats.limit,
            "llm_concurrency_cap": stats.cap,
            "llm_concurrency_peak": stats.peak_in_flight,
            "llm_queue_seconds": stats.queue_seconds,
            "llm_system_prompt": self.system_role.describe(),
        }

    # -- internals -----------------------------------------------------------------------------
    def _send_with_retries(
        self, messages: Messages, params: dict[str, Any], waited: list[float]
    ) -> ChatReply:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            with self._count_guard:
                self.retries += 1
            log.warning(
                "LLM request to %s failed (%s); retry %d of %d",
                self.endpoint.describe(),
                errors.describe(exc),
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
        where = self.endpoint.describe()
        try:
            return retrying(self._attempt, messages, params, waited)
        except openai.APIStatusError as exc:
            if errors.is_refusal(exc):
                raise LLMRequestError(
                    f"{where} refused the request: {errors.describe(exc)}"
                ) from exc
            if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
                raise LLMUnavailable(
                    f"{where} rejected the API key ({errors.describe(exc)}); set "
                    f"{' or '.join(self.endpoint.api_key_envs)}"
                ) from exc
            if isinstance(exc, openai.NotFoundError):
                raise LLMUnavailable(
                    f"{where}: not found ({errors.describe(exc)}); check the model name and that "
                    "the base URL ends in /v1"
                ) from exc
            raise self._unavailable(exc) from exc
        except openai.OpenAIError as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: BaseException) -> LLMUnavailable:
        return LLMUnavailable(
            f"{self.endpoint.describe()} did not answer after {self.endpoint.retries} retries: "
            f"{errors.describe(exc)}"
        )

    def _attempt(
        self, messages: Messages, params: dict[str, Any], waited: list[float]
    ) -> ChatReply:
        """One try: a slot from the pacer, the request, and what its outcome says of the load."""
        ticket = self.pacer.acquire()
        waited.append(ticket.waited)
        sent = time.monotonic()
        try:
            reply = self._create(self.system_role.prepare(messages), params)
        except Exception as exc:
            if self._system_role_refused(exc, messages):
                self.pacer.released(ticket)
                return self._attempt(messages, params, waited)  # now folded (system_role.py)
            self._settle(ticket, exc)
            raise
        seconds = time.monotonic() - sent
        self.pacer.answered(ticket, seconds, reply.tokens_out, self.endpoint.timeout)
        return reply

    def _settle(self, ticket: Ticket, exc: BaseException) -> None:
        if errors.is_timeout(exc):
            with self._count_guard:
                self.timeouts += 1
        if errors.is_timeout(exc) or errors.is_overload(exc):
            self.pacer.failed(
                ticket,
                timed_out=errors.is_timeout(exc),
                overloaded=errors.is_overload(exc),
                timeout=self.endpoint.timeout,
            )
        else:
            self.pacer.released(ticket)

    def _system_role_refused(self, exc: BaseException, messages: Messages) -> bool:
        """Whether `exc` came from a template that refuses the system role (asked once per
        endpoint, with two one-token probes sent in this request's slot)."""
        status, message = errors.status_of(exc), errors.server_message(exc)
        if not has_system(messages) or not may_be_refusal(status, message):
            return False
        if self.system_role.accepted is not None:
            return False  # decided already: this error is something else
        refused = self.system_role.check(self._probe)
        if refused:
            log.warning(
                "%s refuses the system role (%s); the system text goes into the first user "
                "message from now on",
                self.endpoint.describe(),
                errors.describe(exc),
            )
        return refused

    def _probe(self, messages: Messages) -> bool:
        try:
            self._create(messages, {"temperature": 1.0, "max_tokens": 1})
        except openai.OpenAIError:
            return False
        return True

    def _create(self, messages: Messages, params: dict[str, Any]) -> ChatReply:
        while True:
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
                return _reply_from(self._client.chat.completions.create(**kwargs))
            except openai.BadRequestError as exc:
                # OpenAI's reasoning models want max_completion_tokens and their default
                # temperature.
                text = errors.server_message(exc) or str(exc)
                adapted = False
                if "max_tokens" in text and self._token_param == "max_tokens":
                    self._token_param, adapted = "max_completion_tokens", True
                if "temperature" in text and self._send_temperature:
                    self._send_temperature, adapted = False, True
                if not adapted:
                    raise


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
