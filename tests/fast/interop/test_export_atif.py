"""`endless export --format atif`: every solver attempt and every served episode as one ATIF
document, validated by Harbor's own trajectory models (harbor from PyPI, in a Python 3.12
virtualenv of its own: Harbor needs 3.12).

The attempts are real episodes on a real task: the oracle's, the do-nothing policy's, a chat
model's (a scripted OpenAI-compatible server over HTTP: a command, an unusable reply, a command,
done), one that never started (an image that does not exist: a harness error), and a served
episode run through the served environment in this process.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from broken_families import Good

from endless_assets.agent.chat import ChatConfig, ChatPolicy
from endless_assets.agent.episode import EpisodeLimits, run_episode
from endless_assets.agent.policies import EpisodeTask, NoopPolicy, OraclePolicy
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.interop import ExportError, export_dataset
from endless_assets.llm.client import ChatClient, Endpoint
from endless_assets.serve.environment import TerminalEnvironment
from endless_assets.serve.hub import Hub
from endless_assets.serve.models import TerminalAction
from endless_assets.serve.record import EpisodeLog
from endless_assets.serve.tasks import TaskSet
from endless_assets.stages.rollouts import Attempt
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake
from endless_assets.testing.kept_lake import write_kept
from endless_assets.testing.scripted_server import ScriptedServer

BATCH = "2026-07-04"
PYTHON312 = Path.home() / ".pyenv/versions/3.12.1/bin/python3.12"
SOLVE = "tr a-z A-Z < /home/user/in.txt > /home/user/out.txt"
CHAT = [
    f"I will convert it.\n<command>{SOLVE}</command>",
    "nothing usable",
    "<command>ls</command>",
    "<action>done</action>",
]
VALIDATE = r"""
import json, pathlib, sys
from harbor.models.trajectories import Trajectory

root, errors, documents = pathlib.Path(sys.argv[1]), [], 0
for line in (root / "index.jsonl").read_text().splitlines():
    path = json.loads(line)["path"]
    documents += 1
    try:
        Trajectory.model_validate_json((root / path).read_text())
    except Exception as exc:
        errors.append(f"{path}: {exc}")
print(json.dumps({"documents": documents, "errors": errors}))
"""


@pytest.fixture(scope="module")
def lake(sandbox, tmp_path_factory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("atif") / "data")
    draft, _ = ProceduralGenerator(sandbox.base.tag, families=[Good]).describe(BATCH, 0, 3)
    (task,) = write_kept(lake, [draft])
    image = sandbox.build(task.dockerfile or "", task.context_files).tag
    episode = EpisodeTask(task.task_id, task.instruction, task.reference_solution)
    limits = EpisodeLimits(max_turns=6, command_timeout=10.0)
    replies = iter(CHAT)
    with ScriptedServer(lambda request: next(replies)) as server:
        endpoint = Endpoint(model="scripted", base_url=server.base_url, retries=0)
        chat = ChatPolicy(ChatClient(endpoint), ChatConfig(model="scripted", max_turns=6))
        rollouts = [
            run_episode(sandbox, image, episode, policy, task.completion_test or "", limits)
            for policy in (OraclePolicy(), NoopPolicy(), chat)
        ]
    gone = run_episode(sandbox, "endless-task:no-such-image", episode, OraclePolicy(), "", limits)
    rows = [Attempt(BATCH, i, r).row() for i, r in enumerate([*rollouts, gone])]
    assert [r["reward"] for r in rows] == [1, 0, 1, None]
    lake.write("solver_rollouts", BATCH, frame("solver_rollouts", rows))
    hub = Hub(sandbox, TaskSet([task]), limits, max_sessions=1, episodes=EpisodeLog(lake))
    served = TerminalEnvironment(hub)
    served.reset(task_id=task.task_id, model="trainer-model")
    served.step(TerminalAction(command=SOLVE))
    assert served.step(TerminalAction(done=True)).reward == 1.0
    served.close()
    hub.close()  # (writes the episode)
    return lake


@pytest.fixture(scope="module")
def exported(lake, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("atif-out") / "trajectories"
    summary = export_dataset(lake, "atif", out)
    assert summary.rows == {"solver_rollouts": 4, "served_episodes": 1} and summary.tasks == 1
    return out


def documents(out: Path) -> dict[str, dict]:
    """Each document by its policy ('served' for the served episode)."""
    found = {}
    for line in (out / "index.jsonl").read_text().splitlines():
        entry = json.loads(line)
        key = entry["policy"] if entry["reward"] is not None else "error"
        found[key] = json.loads((out / entry["path"]).read_text())
    return found


@pytest.fixture(scope="module")
def harbor_python(tmp_path_factory) -> Path:
    """Python 3.12 with harbor from PyPI. Only its trajectory models are used, which need
    pydantic alone: harbor goes in without its other dependencies (litellm, supabase, ...:
    half a gigabyte), pydantic as harbor's own metadata requires it."""
    if not PYTHON312.exists():
        pytest.skip(f"no Python 3.12 at {PYTHON312} (Harbor needs 3.12)")
    venv = tmp_path_factory.mktemp("harbor") / "venv"
    subprocess.run([str(PYTHON312), "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    install = subprocess.run([*pip, "--no-deps", "harbor"], capture_output=True, text=True)
    if install.returncode != 0:
        pytest.skip(f"harbor could not be installed from PyPI: {install.stderr.strip()[-300:]}")
    pydantic = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m; print(next(r.split(';')[0] for r in "
            "m.requires('harbor') if r.startswith('pydantic')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run([*pip, pydantic], check=True, capture_output=True)
    return python


def test_every_attempt_and_served_episode_is_a_document_harbors_models_accept(
    exported, harbor_python, tmp_path
):
    script = tmp_path / "validate.py"
    script.write_text(VALIDATE)
    checked = subprocess.run(
        [str(harbor_python), str(script), str(exported)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == {"documents": 5, "errors": []}


def test_a_chat_attempt_keeps_its_messages_tool_calls_verdict_and_token_usage(exported, lake):
    chat = documents(exported)["chat"]
    row = lake.read("solver_rollouts", BATCH).filter(policy="chat").to_dicts()[0]
    messages = json.loads(row["messages"])
    steps = chat["steps"]
    assert [s["source"] for s in steps] == ["system", "user", "agent", "agent", "agent", "agent"]
    assert steps[0]["message"] == messages[0]["content"]
    assert steps[1]["message"] == messages[1]["content"]
    solve, invalid, listing, done = steps[2:]
    assert solve["message"] == CHAT[0]
    assert solve["tool_calls"][0]["arguments"] == {"command": SOLVE}
    result = solve["observation"]["results"][0]
    assert result["source_call_id"] == solve["tool_calls"][0]["tool_call_id"]
    assert result["content"] == messages[3]["content"] and result["extra"]["exit_code"] == 0
    assert "tool_calls" not in invalid
    assert "could not be used" in invalid["observation"]["results"][0]["content"]
    assert listing["tool_calls"][0]["arguments"] == {"command": "ls"}
    assert "observation" not in done
    assert all(s["llm_call_count"] == 1 and s["metrics"]["prompt_tokens"] > 0 for s in steps[2:])
    totals = chat["final_metrics"]
    assert (totals["total_prompt_tokens"], totals["total_completion_tokens"]) == (
        row["tokens_in"],
        row["tokens_out"],
    )
    assert chat["extra"]["reward"] == 1 and chat["extra"]["verdict"].startswith("passed")
    assert chat["agent"]["model_name"] == "scripted" and chat["schema_version"] == "ATIF-v1.7"


def test_policies_that_ask_no_model_count_no_model_calls(exported):
    found = documents(exported)
    oracle, noop = found["oracle"], found["noop"]
    assert oracle["steps"][0]["source"] == "user" and oracle["extra"]["reward"] == 1
    assert all(s["llm_call_count"] == 0 and "metrics" not in s for s in oracle["steps"][1:])
    assert [s["source"] for s in noop["steps"]] == ["user", "agent"]
    assert noop["extra"]["reward"] == 0


def test_an_attempt_without_a_reward_says_so_and_is_no_zero(exported):
    error = documents(exported)["error"]
    assert error["extra"]["reward"] is None and error["extra"]["termination"] == "harness_error"
    assert "not a 0" in error["notes"] and error["extra"]["error"]


def test_a_served_episode_is_a_document_of_its_session(exported):
    served = documents(exported)["served"]
    extra = served["extra"]
    assert served["session_id"] == f"served:{extra['session_id']}"
    assert served["trajectory_id"] == f"served:{extra['episode_id']}"
    assert served["agent"]["model_name"] == "trainer-model" and extra["reward"] == 1
    assert [s.get("tool_calls", [{}])[0].get("arguments") for s in served["steps"][1:]] == [
        {"command": SOLVE},
        None,
    ]
    assert all("llm_call_count" not in s for s in served["steps"])


def test_an_unknown_batch_is_refused_by_name_and_nothing_is_written(lake, tmp_path):
    with pytest.raises(ExportError, match="1999-01-01"):
        export_dataset(lake, "atif", tmp_path / "out", batches=["1999-01-01"])
    assert not (tmp_path / "out").exists()
