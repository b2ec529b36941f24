"""The LLM generator declares services: the taxonomy's service categories show the `<service>`
format, the reply's blocks become `Task.services`, and a build-stage repair reply that resends a
service replaces it (no Docker here: the real `openai` client over HTTP to the scripted model)."""

from __future__ import annotations

import pytest

from endless_assets.generation import Environment
from endless_assets.generation.dockerfile_checks import ParseError
from endless_assets.generation.llm import LLMGenerator
from endless_assets.generation.service_blocks import parse_services, render_services
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.testing.scripted_model import ScriptedTaskModel
from endless_assets.testing.scripted_server import ScriptedServer

BASE = "endless-base:test"
SERVED = "database administration on a server"
SEED = 41


def generator(server: ScriptedServer) -> LLMGenerator:
    endpoint = Endpoint(model="scripted", base_url=server.base_url, retries=0)
    return LLMGenerator(ChatClient(endpoint), BASE)


def level(gen: LLMGenerator) -> str:
    return gen.taxonomy.complexities[0].name


def test_a_service_category_shows_the_format_and_the_reply_becomes_the_tasks_services():
    model = ScriptedTaskModel(BASE, {SEED: {"service"}})
    with ScriptedServer(model) as server:
        gen = generator(server)
        task, _ = gen.describe_cell("2026-12-07", 0, SEED, SERVED, level(gen))
        plain, _ = gen.describe_cell("2026-12-07", 1, SEED + 1, "log analysis", level(gen))
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert '<service name="cache">' in prompts[0] and f"FROM {BASE}" in prompts[0]
    [example] = parse_services(prompts[0], BASE)  # the format shown is the one read
    assert (example.name, example.command[0], example.environment) == (
        "cache",
        "redis-server",
        {"LANG": "C.UTF-8"},
    )
    assert "<service" not in prompts[1]
    [web] = task.services
    assert (web.name, web.command) == (
        "web",
        ["python3", "-m", "http.server", "8080", "-d", "/srv/www"],
    )
    assert web.ready_seconds == 20 and web.environment == {
        "PAGE_OWNER": web.environment["PAGE_OWNER"]
    }
    assert web.dockerfile.startswith(f"FROM {BASE}\n")
    assert "<service" not in task.reference_solution and plain.services == []


def test_a_repair_reply_that_resends_a_service_replaces_it_and_sees_its_log():
    model = ScriptedTaskModel(BASE, {SEED: {"service_fails_once"}})
    log = "service web exited before it was ready; its log:\npython3: can't open file '/srv/app.py'"
    with ScriptedServer(model) as server:
        gen = generator(server)
        draft, _ = gen.describe_cell("2026-12-07", 0, SEED, SERVED, level(gen))
        first = Environment(f"FROM {BASE}\n", {"seed/a.txt": "a\n"}, "def test_x(): pass\n")
        fixed, usage = gen.write_environment(draft, log, first)
        repair_prompt = server.requests[-1]["messages"]
    assert draft.services[0].command == ["python3", "/srv/app.py"]
    assert "can't open file '/srv/app.py'" in repair_prompt[-1]["content"]
    assert '<service name="web">' in repair_prompt[1]["content"]  # the request shows them
    assert usage.requests == 1
    assert fixed.services is not None and fixed.services[0].command[:3] == [
        "python3",
        "-m",
        "http.server",
    ]
    assert (fixed.dockerfile, fixed.context_files) == (first.dockerfile, first.context_files)
    assert fixed.services[0].name == draft.services[0].name  # so the task id stays


def block(body: str, name: str = "db") -> str:
    return f'<service name="{name}">\n{body}\n</service>'


DOCKER = f"```dockerfile\nFROM {BASE}\nRUN true\n```"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (block("command: run\nready: true"), "service db: no ```dockerfile block"),
        (
            block(f"command: run\nready: true\nport: 5\n{DOCKER}"),
            "service db: unexpected line 'port: 5'",
        ),
        (block(f"ready: true\n{DOCKER}"), "service db: command: Field required"),
        (
            block(f"command: run\nready: true\n{DOCKER}", "My_DB"),
            "service My_DB: name: String should match",
        ),
        (
            block(f"command: run\nready: true\nenv: JUSTKEY\n{DOCKER}"),
            "env line 'JUSTKEY' is not KEY=VALUE",
        ),
        (
            block(f"command: 'run\nready: true\n{DOCKER}"),
            "service db: command: No closing quotation",
        ),
        (block("command: a\nready: b\n```dockerfile\nFROM ubuntu:22.04\n```"), "ubuntu:22.04"),
        (
            block(f"command: a\nready: b\nafter: cache\n{DOCKER}"),
            "starts after cache: no such service",
        ),
        (block(f"command: a\nready: b\n{DOCKER}") * 2, "service db is declared more than once"),
    ],
)
def test_a_bad_service_block_is_one_line_naming_the_service_and_what_is_wrong(reply, message):
    with pytest.raises(ParseError) as caught:
        parse_services(reply, BASE)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_bullets_backquoted_keys_synonyms_and_prose_around_the_keys_are_read_through():
    reply = block(
        "Redis, as the queue the worker drains.\n- `command`: redis-server --port 6379\n"
        "* healthcheck: redis-cli ping\nenvironment: A=1\ndepends_on: \n"
        f"It keeps nothing on disk.\n{DOCKER}"
    )
    (service,) = parse_services(reply, BASE)
    assert service.command == ["redis-server", "--port", "6379"]
    assert (service.ready, service.environment) == ("redis-cli ping", {"A": "1"})


def test_rendered_services_parse_back_to_the_same_services():
    reply = block(
        "command: sh -c 'exec x --flag \"a b\"'\nready: nc -z 127.0.0.1 5\n"
        f"ready_seconds: 9\nafter: \nenv: A=1=2\n{DOCKER}"
    )
    services = parse_services(reply, BASE)
    assert services[0].command == ["sh", "-c", 'exec x --flag "a b"']
    assert parse_services(render_services(services), BASE) == services


def test_the_completion_test_prompt_shows_the_services_it_may_query():
    model = ScriptedTaskModel(BASE, {SEED: {"service"}})
    with ScriptedServer(model) as server:
        gen = generator(server)
        draft, _ = gen.describe_cell("2026-12-07", 0, SEED, SERVED, level(gen))
        built = draft.model_copy(update={"dockerfile": f"FROM {BASE}\n", "initial_test": ""})
        test, _ = gen.write_completion_test(built, None, None)
        request = server.requests[-1]["messages"][-1]["content"]
    assert "def test_" in test
    assert "the test may query them" in request and '<service name="web">' in request
