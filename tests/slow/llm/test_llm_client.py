"""The shared chat client against a scripted OpenAI-compatible server, over real HTTP."""

from __future__ import annotations

import itertools
import json
import random
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx
import openai
import pytest

from endless_assets.llm import errors
from endless_assets.llm.cache import ReplyCache
from endless_assets.llm.client import ChatClient, Endpoint, LLMRequestError, LLMUnavailable
from endless_assets.llm.pacing import queue_clock
from endless_assets.testing.scripted_server import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "hello"}]


_ENDPOINTS = itertools.count()


def endpoint(server: ScriptedServer, **kw) -> Endpoint:
    # A model name of its own: a pacer is per endpoint and process, and a later server may get
    # an earlier one's port (and so its pacer, with that test's cap and limit).
    return Endpoint(
        model=f"m-{next(_ENDPOINTS)}",
        base_url=server.base_url,
        retries=kw.pop("retries", 3),
        backoff=0.01,
        **kw,
    )


def test_a_reply_with_usage():
    with ScriptedServer(lambda r: Reply("hi there", reasoning="thinking...")) as server:
        reply = ChatClient(endpoint(server)).complete(MESSAGES, temperature=0.6, max_tokens=64)
    assert reply.text == "hi there" and reply.reasoning == "thinking..."
    assert reply.tokens_in > 0 and reply.tokens_out > 0
    sent = server.requests[0]
    assert (
        sent["model"].startswith("m-") and sent["temperature"] == 0.6 and sent["max_tokens"] == 64
    )


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
        cache, same = ReplyCache(tmp_path), endpoint(server)
        first = ChatClient(same, cache).complete(MESSAGES, seed=1)
        again = ChatClient(same, cache).complete(MESSAGES, seed=1)
        other_seed = ChatClient(same, cache).complete(MESSAGES, seed=2)
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


# -- what servers say when they refuse (errors.py) ---------------------------------------------

ERROR_BODIES = {
    "FastAPI's detail": {"detail": "Server is pinned to 'a'; requested 'b'."},
    "FastAPI's validation list": {"detail": [{"loc": ["body"], "msg": "field required"}]},
    "OpenAI's error object": {"error": {"message": "maximum context length is 4096 tokens"}},
    "Ollama's error string": {"error": 'model "b" not found, try pulling it first'},
    "a bare message": {"message": "prompt is too long"},
}


@pytest.mark.parametrize("shape", list(ERROR_BODIES), ids=list(ERROR_BODIES))
def test_the_servers_own_words_are_kept_whatever_key_carries_them(shape):
    body = ERROR_BODIES[shape]
    words = json.dumps(body).split('"')[-2]  # the innermost string of the body
    with ScriptedServer(lambda r: Reply(status=400, body=body)) as server:
        with pytest.raises(LLMRequestError) as caught:
            ChatClient(endpoint(server)).complete(MESSAGES)
    assert "HTTP 400" in str(caught.value) and words in str(caught.value)


def test_a_plain_text_error_body_is_kept_too():
    message = errors.server_message(_status_error(502, "upstream model crashed\n"))
    assert message == "upstream model crashed"
    assert errors.server_message(_status_error(500, "")) == ""


def _status_error(status: int, text: str) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, text=text, request=request)
    return openai.APIStatusError("Error code", response=response, body=None)


# -- pacing: what the endpoint sustains (pacing.py) --------------------------------------------


def test_a_timed_out_request_keeps_its_slot_while_the_server_may_still_compute_it():
    # A serial server: the first reply takes longer than the client waits. The client gives up
    # on it, but the server computes it to the end; a retry sent at once would queue behind it.
    delays = iter([3.0])
    with ScriptedServer(lambda r: Reply("ok", delay=next(delays, 0.0)), serial=True) as server:
        client = ChatClient(endpoint(server, timeout=2.0))
        assert client.complete(MESSAGES).text == "ok"
    assert len(server.requests) == 2
    assert server.max_in_flight == 1, "the retry was sent while the server still computed"
    assert client.timeouts == 1 and client.retries == 1
    assert client.pacer.stats().timeouts == 1


def test_the_concurrency_grows_to_the_cap_against_a_server_that_batches():
    # Every reply takes the same time however many are in flight: nothing to back off from.
    with ScriptedServer(lambda r: Reply("x" * 400, delay=0.5)) as server:
        client = ChatClient(endpoint(server, concurrency=8))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: client.complete(MESSAGES, seed=i), range(64)))
    stats = client.pacer.stats()
    assert stats.limit == 8 and server.max_in_flight == 8


def test_replies_that_vary_by_themselves_are_not_taken_for_a_queue():
    # A batching server whose replies take 0.2-0.6 s whatever the load (prompt lengths, sampling):
    # one slow reply among fast ones is no queue, so nothing shrinks and the cap is reached.
    rng = random.Random(5)
    with ScriptedServer(lambda r: Reply("x" * 400, delay=rng.uniform(0.2, 0.6))) as server:
        client = ChatClient(endpoint(server, concurrency=8))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: client.complete(MESSAGES, seed=i), range(96)))
    stats = client.pacer.stats()
    assert stats.decreases == 0 and stats.limit == 8 and server.max_in_flight == 8


def test_time_waiting_for_a_slot_is_reported_and_charged_to_the_open_queue_clock():
    with ScriptedServer(lambda r: Reply("ok", delay=0.3), serial=True) as server:
        client = ChatClient(endpoint(server, concurrency=1))
        clocks: list[float] = []
        replies = []

        def call(i: int) -> None:
            with queue_clock() as clock:
                replies.append(client.complete(MESSAGES, seed=i))
            clocks.append(clock.seconds)

        with ThreadPoolExecutor(3) as pool:
            list(pool.map(call, range(3)))
    assert server.max_in_flight == 1
    assert sorted(clocks) == pytest.approx(sorted(r.queue_seconds for r in replies))
    assert max(clocks) > 0.3, "the last caller waited for two replies"
    assert min(clocks) < max(clocks)


# -- a template that refuses the system role (system_role.py) ----------------------------------


def test_a_template_that_refuses_the_system_role_gets_the_system_text_in_the_first_user_turn():
    refusal = {"error": {"message": "System role not supported", "type": "BadRequestError"}}

    def responder(request):
        if any(m["role"] == "system" for m in request["messages"]):
            return Reply(status=400, body=refusal)
        return Reply("ok")

    messages = [{"role": "system", "content": "Be brief."}, *MESSAGES]
    with ScriptedServer(responder) as server:
        client = ChatClient(endpoint(server))
        assert client.complete(messages).text == "ok"
        assert client.complete(messages, use_cache=False).text == "ok"
    sent = [r["messages"] for r in server.requests]
    # The refused request, the two probes, the same request folded; then folded at once.
    assert [len(m) for m in sent] == [2, 2, 1, 1, 1]
    assert sent[-1] == [{"role": "user", "content": "Be brief.\n\nhello"}]
    assert client.report()["llm_system_prompt"] == "folded into the first user message"


def test_an_unrelated_error_is_not_taken_for_a_system_role_refusal():
    messages = [{"role": "system", "content": "Be brief."}, *MESSAGES]
    too_long = {"error": {"message": "maximum context length is 10"}}
    with ScriptedServer(lambda r: Reply(status=400, body=too_long)) as server:
        client = ChatClient(endpoint(server))
        with pytest.raises(LLMRequestError, match="maximum context length"):
            client.complete(messages)
    assert len(server.requests) == 1, "no probe: the error says what it is"
