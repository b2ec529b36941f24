"""A task the LLM generator declared with a service that will not start, through the real build
stage: the service exits, its log goes back to the scripted model over HTTP in the repair prompt,
the model resends the service fixed, and the task builds with its service ready (real Docker)."""

from __future__ import annotations

import json

from endless_assets.generation.llm import LLMGenerator
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.models import OK
from endless_assets.stages.environment import build_environment
from endless_assets.stages.tasks import draft_with_environment
from endless_assets.testing.scripted_model import ScriptedTaskModel
from endless_assets.testing.scripted_server import ScriptedServer

SEED = 43


def test_a_service_that_never_starts_is_repaired_from_its_log(sandbox):
    model = ScriptedTaskModel(sandbox.base.tag, {SEED: {"service_fails_once"}})
    with ScriptedServer(model) as server:
        endpoint = Endpoint(model="scripted", base_url=server.base_url, retries=0)
        gen = LLMGenerator(ChatClient(endpoint), sandbox.base.tag)
        grade = gen.taxonomy.complexities[0].name
        draft, _ = gen.describe_cell("2026-12-07", 0, SEED, "message queues and caches", grade)
        outcome = build_environment(draft, gen, sandbox, build_network=False)
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert outcome.status == OK, outcome.attempt_log
    log = outcome.attempt_log
    assert [e["stage"] for e in log] == ["container", "initial_test"]
    assert "service web exited before it was ready" in log[0]["error"]
    repair = prompts[-1]
    assert "one of the task's services does not run" in repair
    assert "can't open file '/srv/app.py'" in repair
    built = json.loads(outcome.services)
    assert built[0]["command"][:3] == ["python3", "-m", "http.server"]
    # what later stages read back: the fixed service, under the draft's id
    task = draft_with_environment(draft, outcome.columns())
    assert task.task_id == draft.task_id and task.services[0].command == built[0]["command"]
