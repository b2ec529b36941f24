"""The chat policy over real HTTP against the scripted OpenAI-compatible server (no Docker).

The episode loop is exercised on real containers in test_solver_episodes.py; here the policy is
driven turn by turn to check the conversation it sends, folding, and how failures are classified.
"""

from __future__ import annotations

import itertools

import pytest

from endless_assets.agent.chat import ChatConfig, ChatPolicy, SolverPrompts
from endless_assets.agent.context import fold, request_for_turn, summarize
from endless_assets.agent.episode import ContextExhausted, PolicyUnavailable
from endless_assets.agent.factory import policy_factory
from endless_assets.agent.policies import EpisodeTask
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.settings import Settings, SettingsError
from endless_assets.testing.scripted_server import Reply, ScriptedServer

TASK = EpisodeTask("et-test", "Count the lines of /home/user/a.txt into /home/user/n.txt.")


def policy(server: ScriptedServer, **config) -> ChatPolicy:
    endpoint = Endpoint(model="m", base_url=server.base_url, retries=0, backoff=0.01)
    return ChatPolicy(ChatClient(endpoint), ChatConfig(model="m", **config))


def observation(i: int, size: int = 40) -> str:
    return f"output of command {i} " + "x" * size + f"\n[exit code: {i % 2}]"


def test_the_conversation_sent_is_the_transcript_and_replies_are_parsed():
    replies = iter(["<think>look first</think><command>ls</command>", "<action>done</action>"])
    with ScriptedServer(lambda r: Reply(next(replies))) as server:
        agent = policy(server, temperature=0.3, turn_tokens=123)
        agent.reset(TASK)
        first = agent.act(None)
        second = agent.act("a.txt\n[exit code: 0]")
    assert (first.kind, first.command, first.thought) == ("command", "ls", "look first")
    assert first.tokens_in > 0 and first.tokens_out > 0 and first.finish_reason == "stop"
    assert second.kind == "done"
    transcript = agent.messages()
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "user", "assistant"]
    assert TASK.instruction in transcript[1]["content"]
    assert "at most 16 turns" in transcript[0]["content"]
    assert transcript[2]["content"] == "<think>look first</think><command>ls</command>"
    assert server.requests[0]["messages"] == transcript[:2]
    assert server.requests[1]["messages"] == transcript[:4]
    assert server.requests[1]["temperature"] == 0.3 and server.requests[1]["max_tokens"] == 123


def test_attempts_are_independent_samples_never_cached():
    with ScriptedServer(lambda r: Reply("<action>done</action>")) as server:
        endpoint = Endpoint(model="m", base_url=server.base_url, retries=0)
        client = ChatClient(endpoint)
        for _ in range(3):
            agent = ChatPolicy(client, ChatConfig(model="m"))
            agent.reset(TASK)
            agent.act(None)
    assert len(server.requests) == 3


def test_older_turns_fold_into_a_summary_and_each_request_can_be_rebuilt():
    turns = 12
    with ScriptedServer(lambda r: Reply(f"<command>echo {len(r['messages'])}</command>")) as server:
        agent = policy(server, context_tokens=1600, turn_tokens=100)
        agent.reset(TASK)
        actions = [agent.act(None)]
        for i in range(turns - 1):
            actions.append(agent.act(observation(i, size=400)))
    folded = [a.folded_turns for a in actions]
    assert folded[0] == 0 and folded[-1] > 0
    assert folded == sorted(folded), "folding only grows within an episode"
    assert len(set(folded)) < turns // 2, "folding happens rarely, not at every turn"
    transcript = agent.messages()
    trajectory = [{"folded_turns": a.folded_turns} for a in actions]
    for i, request in enumerate(server.requests):
        assert request["messages"] == request_for_turn(transcript, trajectory, i)
        roles = [m["role"] for m in request["messages"]]
        assert roles[:2] == ["system", "user"]
        assert all(a != b for a, b in itertools.pairwise(roles[1:])), roles
    last = server.requests[-1]["messages"][1]["content"]
    assert last.startswith(transcript[1]["content"]) and "were folded into this summary" in last
    assert "1. $ echo 2 -> exit 0: output of command 0 xxx" in last


def test_the_summary_names_each_folded_command_exit_code_and_output_head():
    messages = [
        {"role": "assistant", "content": "<command>cat a\nb</command>"},
        {"role": "user", "content": "line one\nline two\n[exit code: 1]"},
        {"role": "assistant", "content": "hmm"},
        {"role": "user", "content": "[your reply could not be used: ...]"},
    ]
    summary = summarize(messages)
    assert "1. $ cat a ⏎ b -> exit 1: line one ⏎ line two" in summary
    assert "2. (no command: the reply could not be used) -> exit -:" in summary
    with pytest.raises(ValueError):
        fold([{"role": "system", "content": ""}, {"role": "user", "content": ""}], 1)


def test_a_task_that_cannot_fit_the_context_is_a_context_limit():
    with ScriptedServer(lambda r: Reply("<command>ls</command>")) as server:
        agent = policy(server, context_tokens=300, turn_tokens=200)
        agent.reset(TASK)
        with pytest.raises(ContextExhausted, match="context_tokens - turn_tokens = 100"):
            agent.act(None)
    assert server.requests == []


def test_a_400_for_length_folds_harder_then_gives_up_with_context_limit():
    def responder(request):
        if len(request["messages"]) > 2:
            return Reply(status=400, body={"error": {"message": "maximum context length is 10"}})
        return Reply("<command>ls</command>")

    with ScriptedServer(responder) as server:
        agent = policy(server)
        agent.reset(TASK)
        agent.act(None)
        agent.act(observation(0))
        assert agent.act(observation(1)).folded_turns == 2  # all folded: only 2 messages fit
    # Each refused request is followed by one with at least half of the unfolded turns folded.
    assert [len(r["messages"]) for r in server.requests] == [2, 4, 2, 4, 2]

    too_long = Reply(status=400, body={"error": {"message": "prompt is too long: 9000 tokens"}})
    answers = iter([Reply("<command>ls</command>")])
    with ScriptedServer(lambda r: next(answers, too_long)) as server:
        agent = policy(server)
        agent.reset(TASK)
        agent.act(None)
        with pytest.raises(ContextExhausted, match="too long with every earlier turn folded"):
            agent.act(observation(0))
    assert [len(r["messages"]) for r in server.requests] == [2, 4, 2]


def test_a_refusal_of_the_first_request_is_unavailable_even_for_length():
    # Nothing was folded or done yet: the settings do not fit the model, for every episode.
    too_long = {"error": {"message": "This model's maximum context length is 10 tokens"}}
    with ScriptedServer(lambda r: Reply(status=400, body=too_long)) as server:
        agent = policy(server)
        agent.reset(TASK)
        with pytest.raises(PolicyUnavailable, match="refused the first request"):
            agent.act(None)
    assert len(server.requests) == 1


def test_max_tokens_too_large_is_unavailable_but_vllms_context_wording_folds():
    openai_wording = (
        "max_tokens is too large: 4096. This model supports at most 1024 completion tokens, "
        "whereas you provided 4096."
    )
    vllm_wording = (
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum "
        "context length is 8192 tokens and your request has 5000 input tokens (4096 > 8192 - "
        "5000)."
    )
    for wording, folds in ((openai_wording, False), (vllm_wording, True)):

        def responder(request, wording=wording):
            if len(request["messages"]) > 2:
                return Reply(status=400, body={"error": {"message": wording}})
            return Reply("<command>ls</command>")

        with ScriptedServer(responder) as server:
            agent = policy(server)
            agent.reset(TASK)
            agent.act(None)  # answered: a refusal now is not the first request's
            if folds:
                assert agent.act(observation(0)).folded_turns == 1
            else:
                with pytest.raises(PolicyUnavailable, match="at most 1024 completion tokens"):
                    agent.act(observation(0))
                assert all(len(r["messages"]) > 2 for r in server.requests[1:]), "never folded"


def test_an_endpoint_that_is_down_or_refuses_is_unavailable_not_the_agents_fault():
    with ScriptedServer(lambda r: Reply(status=503)) as server:
        agent = policy(server)
        agent.reset(TASK)
        with pytest.raises(PolicyUnavailable, match="did not answer"):
            agent.act(None)
    bad_parameter = {"error": {"message": "unknown parameter 'foo'"}}
    with ScriptedServer(lambda r: Reply(status=400, body=bad_parameter)) as server:
        agent = policy(server)
        agent.reset(TASK)
        with pytest.raises(PolicyUnavailable, match="unknown parameter"):
            agent.act(None)


def test_the_solver_settings_pick_endpoint_key_and_sampling(monkeypatch):
    echo: list[str] = []

    def responder(request):
        return Reply("<action>done</action>")

    with ScriptedServer(responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "generator-key-123")
        monkeypatch.setenv("ENDLESS_SOLVER_API_KEY", "solver-key-456")
        settings = Settings.resolve(
            solver="chat", solver_model="o3", solver_temperature=0.7, turn_tokens=321
        )
        make = policy_factory(settings)
        agent = make()
        agent.reset(TASK)
        agent.act(None)
        echo.append(server.headers[0]["authorization"])
    assert echo == ["Bearer solver-key-456"]
    sent = server.requests[0]
    assert sent["model"] == "o3" and sent["temperature"] == 0.7 and sent["max_tokens"] == 321
    assert agent.prompt_version == SolverPrompts.load().version
    assert agent.prompt_version.startswith("solver-")


def test_a_key_echoed_by_the_server_never_reaches_the_error(monkeypatch):
    secret = "sk-very-secret-solver-key"
    monkeypatch.setenv("ENDLESS_SOLVER_API_KEY", secret)

    def responder(request):
        return Reply(status=401, body={"error": {"message": f"bad key {secret}"}})

    with ScriptedServer(responder) as server:
        settings = Settings.resolve(
            solver="chat", solver_model="m", solver_base_url=server.base_url
        )
        agent = policy_factory(settings)()
        agent.reset(TASK)
        with pytest.raises(PolicyUnavailable) as caught:
            agent.act(None)
    assert secret not in str(caught.value) and "[api key]" in str(caught.value)


def test_bad_solver_settings_are_refused_up_front():
    with pytest.raises(SettingsError, match="ENDLESS_SOLVER_MODEL"):
        policy_factory(Settings.resolve(solver="chat", solver_model=""))
    with pytest.raises(SettingsError, match="must be larger than turn_tokens"):
        policy_factory(
            Settings.resolve(solver="chat", solver_model="m", context_tokens=100, turn_tokens=100)
        )


def test_a_lone_surrogate_in_a_reply_is_replaced_before_it_is_run_or_kept():
    with ScriptedServer(lambda r: Reply("<command>echo caf\ud800</command>")) as server:
        agent = policy(server)
        agent.reset(TASK)
        action = agent.act(None)
    assert action.command == "echo caf\ufffd" and action.raw == "<command>echo caf\ufffd</command>"
    assert agent.messages()[-1]["content"] == action.raw  # storable: valid UTF-8


def test_a_context_refusal_in_fastapis_detail_still_folds():
    # FastAPI servers put the reason under "detail"; the SDK's exception text drops it.
    def responder(request):
        if len(request["messages"]) > 2:
            return Reply(status=400, body={"detail": "maximum context length is 10 tokens"})
        return Reply("<command>ls</command>")

    with ScriptedServer(responder) as server:
        agent = policy(server)
        agent.reset(TASK)
        agent.act(None)
        assert agent.act(observation(0)).folded_turns == 1
    assert [len(r["messages"]) for r in server.requests] == [2, 4, 2]


def test_the_context_the_endpoint_reports_replaces_context_tokens():
    listed = [{"id": "m", "object": "model", "max_model_len": 6000}]
    with ScriptedServer(lambda r: Reply("<action>done</action>"), listed=listed) as server:
        settings = Settings.resolve(
            solver="chat", solver_model="m", solver_base_url=server.base_url, context_tokens=32768
        )
        agent = policy_factory(settings)()
    assert agent.config.context_tokens == 6000


def test_a_model_the_endpoint_does_not_list_is_a_configuration_error():
    with ScriptedServer(lambda r: Reply("<action>done</action>"), listed=["a", "b"]) as server:
        settings = Settings.resolve(
            solver="chat", solver_model="c", solver_base_url=server.base_url
        )
        with pytest.raises(SettingsError) as caught:
            policy_factory(settings)
    message = str(caught.value)
    assert "'c'" in message and server.base_url in message and "lists a, b" in message
    assert "\n" not in message and server.requests == [], "nothing was asked of the model"
