"""`endless serve` driven by OpenEnv's own client from PyPI (serve_helpers.py): the reference
solution sent as steps earns 1, doing nothing earns 0, the forging routes of the reward-integrity
tests earn 0 through the served environment too (for the agent and for a root agent, whose
verdict is a verifier container's), each step says what the command did, the budgets grade, and
sessions are bounded and leave no container behind.

One server for the module, over a lake whose kept tasks are two procedural tasks and one task per
forging route; their images are built up front so that a reset starts a container and no build.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from red_team import ROUTES as AGENT_ROUTES
from root_routes import ROUTES as ROOT_ROUTES
from root_routes import graded as root_graded
from serve_helpers import Driver, Server, openenv_python, served_containers, wait_removed

from endless_assets.models import Task
from endless_assets.sandbox.containers.identity import identity_dockerfile
from endless_assets.store.lake import Lake
from endless_assets.testing.kept_lake import procedural_tasks, write_kept

BATCH = "2026-07-01"
HOSTILE = "2026-07-02"
MAX_SESSIONS = 3
MAX_TURNS = 8
AGENT_ROUTE_NAMES = [
    "git core.fsmonitor (git status runs it)",
    "the agent's own script, run by the test",
    "a symlink to where the grader keeps the test",
    "a test that skips when a file the agent deleted is gone",
    "pytest-level: conftest that rewrites every outcome to passed",
    "pytest-level: fake python3 and pytest early on the PATH",
]
ROOT_ROUTE_NAMES = [
    "test.sh runs pytest by name: a shim first on the PATH",
    "a pytest.ini and conftest.py at / (pytest looks there above /tests)",
]


def hostile_task(index: int, name: str, dockerfile: str, test: str, root: bool) -> Task:
    return Task(
        batch=HOSTILE,
        index=index,
        seed=0,
        category="hostile",
        complexity="easy",
        scenario=name,
        instruction=f"Do nothing useful ({name}).",
        generator="test",
        dockerfile=dockerfile,
        completion_test=test,
        agent_user="" if root else "user",
        workdir="" if root else "/home/user",
    )


@pytest.fixture(scope="module")
def lake(sandbox, tmp_path_factory) -> dict:
    """The lake, its task ids by role, and every task's image built."""
    data = tmp_path_factory.mktemp("serve") / "data"
    base = sandbox.base.tag
    tasks = procedural_tasks(base, BATCH, 2)
    user_file = f"FROM {base}\n"
    root_file = identity_dockerfile(f"FROM {base}\nWORKDIR /app\n", "", "")
    routes = {}
    for name in AGENT_ROUTE_NAMES:
        routes[name] = hostile_task(len(routes), name, user_file, AGENT_ROUTES[name].test, False)
    for name in ROOT_ROUTE_NAMES:
        test = root_graded(ROOT_ROUTES[name])
        routes[name] = hostile_task(len(routes), name, root_file, test, True)
    stored = write_kept(Lake(data), [*tasks, *routes.values()])
    for task in stored:
        assert sandbox.build(task.dockerfile or "", task.context_files, network=False).ok
    return {"data": data, "tasks": stored[:2], "routes": {k: t.task_id for k, t in routes.items()}}


@pytest.fixture(scope="module")
def server(lake, sandbox):
    running = Server(
        lake["data"],
        f"--max-sessions={MAX_SESSIONS}",
        f"--max-turns={MAX_TURNS}",
        "--command-timeout=3",
    )
    yield running
    assert running.stop() == 0, running.stderr()
    assert not served_containers(sandbox.client, owner=f"{_host()}:{running.pid}")


@pytest.fixture(scope="module")
def client(server, tmp_path_factory):
    with Driver(openenv_python(tmp_path_factory), server.url) as driver:
        driver.ok("open")
        yield driver


def _host() -> str:
    import socket

    return socket.gethostname()


def test_the_reference_solution_sent_as_steps_earns_one(client, lake):
    for task in lake["tasks"]:
        result = client.episode([task.reference_solution], task_id=task.task_id)
        assert result["done"] and result["reward"] == 1.0, result
        observation = result["observation"]
        assert observation["termination"] == "done" and observation["infra_error"] is None
        assert observation["verdict"].startswith("passed")


def test_doing_nothing_earns_zero_scored_not_an_error(client, lake):
    for task in lake["tasks"]:
        result = client.episode([], task_id=task.task_id)
        assert result["done"] and result["reward"] == 0.0, result
        assert result["observation"]["termination"] == "done"
        assert result["observation"]["infra_error"] is None


@pytest.mark.parametrize("name", AGENT_ROUTE_NAMES + ROOT_ROUTE_NAMES)
def test_a_forging_route_earns_zero_through_the_served_environment(client, lake, name):
    route = AGENT_ROUTES.get(name) or ROOT_ROUTES[name]
    commands = route.commands
    result = client.episode(commands, task_id=lake["routes"][name])
    assert result["done"], result
    assert result["observation"]["infra_error"] is None  # scored: a verdict, not an error
    assert result["reward"] == 0.0, result["observation"]["verdict"]


def test_reset_returns_the_instruction_and_steps_say_what_the_command_did(client, lake):
    task = lake["tasks"][0]
    first = client.ok("reset", kwargs={"task_id": task.task_id, "model": "m-under-test"})
    assert first["observation"]["text"] == task.instruction
    assert not first["done"] and first["reward"] is None
    assert first["observation"]["steps_left"] == MAX_TURNS
    step = client.ok("step", action={"command": "cd /tmp && echo hello && (exit 3)"})
    seen = step["observation"]
    assert (seen["output"], seen["exit_code"], seen["timed_out"]) == ("hello\n", 3, False)
    assert "[exit code: 3]" in seen["text"] and not step["done"] and step["reward"] is None
    assert client.ok("step", action={"command": "pwd"})["observation"]["output"] == "/tmp\n"
    big = client.ok("step", action={"command": "head -c 60000 /dev/zero | tr '\\0' x"})
    seen = big["observation"]
    assert seen["truncated"] and seen["original_bytes"] == 60000 and len(seen["output"]) < 60000
    slow = client.ok("step", action={"command": "sleep 30"})["observation"]
    assert slow["timed_out"] and slow["exit_code"] is None and "timed out" in slow["text"]
    who = client.ok("step", action={"command": "id -un; ls /sys/class/net"})["observation"]
    assert who["output"] == "user\nlo\n"  # the solver stage's agent, and no network but loopback
    state = client.ok("state")
    assert state["task_id"] == task.task_id and state["step_count"] == 5
    assert state["status"] == "running" and state["steps_left"] == MAX_TURNS - 5


def test_the_step_budget_grades_the_episode(client, lake):
    client.ok("reset", kwargs={"task_id": lake["tasks"][0].task_id})
    for _ in range(MAX_TURNS - 1):
        assert not client.ok("step", action={"command": "true"})["done"]
    last = client.ok("step", action={"command": "true"})
    assert last["done"] and last["reward"] == 0.0
    assert last["observation"]["termination"] == "turn_limit"
    after = client.call("step", action={"command": "true"})
    assert not after["ok"] and "is over" in after["error"] and "call reset" in after["error"]


def test_bad_requests_are_refused_by_name(client):
    assert "et-nope" in client.call("reset", kwargs={"task_id": "et-nope"})["error"]
    client.ok("reset", kwargs={"seed": 3})
    for action in ({"command": "ls", "done": True}, {"command": " "}, {"cmd": "ls"}):
        refused = client.call("step", action=action)
        assert not refused["ok"] and "VALIDATION_ERROR" in refused["error"], action
    assert not client.ok("step", action={"command": "true"})["done"]  # the episode goes on
    for bad in ({"index": 999}, {"task_id": "et-nope"}, {"split": "test"}, {"index": "1"}):
        refused = client.call("reset", kwargs=bad)
        assert not refused["ok"] and str(next(iter(bad.values()))) in refused["error"], bad
    assert not client.ok("step", action={"command": "true"})["done"]  # it ended no episode


def test_a_seed_draws_the_same_task_every_time(client):
    first = client.ok("reset", kwargs={"seed": 11})["observation"]["task_id"]
    again = client.ok("reset", kwargs={"seed": 11})["observation"]["task_id"]
    assert first == again


def test_sessions_past_the_limit_are_refused_clearly_and_a_closed_one_leaves_no_container(
    server, client, tmp_path_factory, lake, sandbox
):
    task_id = lake["tasks"][0].task_id
    with Driver(openenv_python(tmp_path_factory), server.url) as other:
        names = [f"s{i}" for i in range(MAX_SESSIONS)]  # the module's client holds one more
        for name in names[:-1]:
            other.ok("open", name)
            other.ok("reset", name, kwargs={"task_id": task_id})
        other.ok("open", "extra")
        refused = other.call("reset", "extra", kwargs={"task_id": task_id})
        assert not refused["ok"] and "CAPACITY_REACHED" in refused["error"], refused
        status, body = http(server, "POST", "/reset", {"task_id": task_id})  # (a slot each)
        assert status == 503 and "--max-sessions" in body["detail"], body
        session = other.ok("state", names[0])["session_id"]
        assert served_containers(sandbox.client, session=session)
        since = time.time() - 1
        other.ok("close", names[0])
        wait_removed(sandbox.client, since, session=session)
        other.ok("open", "later")
        assert not other.ok("reset", "later", kwargs={"task_id": task_id})["done"]


def http(server: Server, method: str, path: str, body: object = None) -> tuple[int, Any]:
    """The status and the JSON body of one HTTP request."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(server.url + path, data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_the_schema_metadata_and_task_api_show_no_test_or_solution(server, lake):
    def get(path: str, body: dict | None = None) -> Any:
        status, answer = http(server, "GET" if body is None else "POST", path, body)
        assert status == 200, answer
        return answer

    schema = get("/schema")
    assert {"command", "done"} <= set(schema["action"]["properties"])
    assert "infra_error" in schema["observation"]["properties"]
    assert get("/metadata")["name"] == "endless"
    total = 2 + len(lake["routes"])
    assert get("/endless/num_tasks", {"split": "train"}) == {"num_tasks": total}
    tasks = get("/endless/tasks", {"split": "train"})["tasks"]
    assert len(tasks) == total
    text = json.dumps(tasks)
    for task in lake["tasks"]:
        assert task.instruction in text
        assert task.completion_test not in text and task.reference_solution not in text


# (method, path, body, what the answer's detail must name)
BAD_HTTP_REQUESTS = [
    ("POST", "/reset", {"task_id": "et-nope"}, "'et-nope'"),
    ("POST", "/reset", {"index": 999}, "index 999"),
    ("POST", "/reset", {"index": -1}, "index -1"),
    ("POST", "/reset", {"index": "first"}, "'first'"),
    ("POST", "/reset", {"task_id": ["et-a", "et-b"]}, "task_id"),
    ("POST", "/reset", {"split": "test"}, "'test'"),
    ("POST", "/reset", {"model": {"name": "m"}}, "model"),
    ("POST", "/step", {"action": {"command": "ls"}}, "/ws"),
    ("POST", "/endless/tasks", {"split": "test"}, "'test'"),
    ("POST", "/endless/num_tasks", {"split": "validation"}, "'validation'"),
    ("POST", "/endless/task", {"split": "train", "index": 999}, "index 999"),
    ("POST", "/endless/task", {"split": "test", "index": 0}, "'test'"),
    ("POST", "/endless/task_range", {"split": "test"}, "'test'"),
    ("POST", "/nope/tasks", {"split": "train"}, "'nope'"),
]


def test_http_requests_for_what_is_not_served_are_refused_by_name_and_the_server_goes_on(
    server, lake
):
    for method, path, body, named in BAD_HTTP_REQUESTS:
        status, answer = http(server, method, path, body)
        assert 400 <= status < 500 and named in answer["detail"], (path, body, status, answer)
    task = lake["tasks"][0]
    status, answer = http(server, "POST", "/reset", {"task_id": task.task_id})
    assert status == 200 and answer["observation"]["text"] == task.instruction, answer
    status, answer = http(server, "POST", "/endless/task", {"split": "train", "index": 0})
    assert status == 200 and answer["task"]["index"] == 0
    assert "Traceback" not in server.stderr()
