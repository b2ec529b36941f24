"""The shared chat client against a scripted OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import itertools

import pytest

from endless_assets.llm.cache import ReplyCache
from endless_assets.llm.client import ChatClient, Endpoint, LLMRequestError, LLMUnavailable
from endless_assets.testing.scripted_server import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "hello"}]


def endpoint(server: ScriptedServer, **kw) -> Endpoint:
    return Endpoint(
        model="m", base_url=server.base_url, retries=kw.pop("retries", 3), backoff=0.01, **kw
    )


def test_a_reply_with_usage():
    with ScriptedServer(lambda r: Reply("hi there", reasoning="thinking...")) as server:
        reply = ChatClient(endpoint(server)).complete(MESSAGES, temperature=0.6, max_tokens=64)
    assert reply.text == "hi there" and reply.reasoning == "thinking..."
    assert reply.tokens_in > 0 and reply.tokens_out > 0
    sent = server.requests[0]
    assert sent["model"] == "m" and sent["temperature"] == 0.6 and sent["max_tokens"] == 64


def test_429_and_500_are_retried():
    script = iter([Reply(status=429), Reply(status=500), Reply("finally")])
    with ScriptedServer(lambda r: next(script)) as server:
        client = ChatClient(endpoint(server))
        assert client.complete(MESSAGES).text == "finally"
    assert len(server.requests) == 3 and client.requests == 3


def test_an_endpoint_that_stays_down_is_unavailable_after_the_retries():
    with ScriptedServer(lambda r: Reply(status=503)) as server:
        with pytest.raises(LLMUnavailable, match="did not answer after 2 retries"):
            ChatClient(endpoint(server, retries=2)).complete(MESSAGES)
    assert len(server.requests) == 3


def test_a_400_is_not_retried():
    with ScriptedServer(lambda r: Reply(status=400)) as server, pytest.raises(LLMRequestError):
        ChatClient(endpoint(server)).complete(MESSAGES)
    assert len(server.requests) == 1


def test_reasoning_models_get_max_completion_tokens():
    def responder(request):
        if "max_tokens" in request:
            return Reply(
                status=400,
                body={
                    "error": {
                        "message": "Unsupported parameter: 'max_tokens'. Use max_completion_tokens."
                    }
                },
            )
        return Reply("ok")

    with ScriptedServer(responder) as server:
        client = ChatClient(endpoint(server))
        assert client.complete(MESSAGES).text == "ok"
        assert client.complete(MESSAGES, use_cache=False).text == "ok"
    assert "max_completion_tokens" in server.requests[-1]


def test_the_cache_answers_a_repeated_request(tmp_path):
    counter = itertools.count()
    with ScriptedServer(lambda r: Reply(f"reply {next(counter)}")) as server:
        cache = ReplyCache(tmp_path)
        first = ChatClient(endpoint(server), cache).complete(MESSAGES, seed=1)
        again = ChatClient(endpoint(server), cache).complete(MESSAGES, seed=1)
        other_seed = ChatClient(endpoint(server), cache).complete(MESSAGES, seed=2)
    assert again.text == first.text and again.cached
    assert other_seed.text != first.text
    assert len(server.requests) == 2


def test_the_api_key_comes_from_the_environment_and_is_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    with ScriptedServer(lambda r: Reply("ok")) as server:
        ChatClient(endpoint(server), ReplyCache(tmp_path)).complete(MESSAGES)
    assert server.headers[0]["authorization"] == "Bearer sk-secret-123"
    stored = "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    assert "sk-secret" not in stored
