"""docs/serving.md's TRL recipe, run as it stands in the page against a real `endless serve`: the
code block is read from the page, and only the server's address, the model and the trainer's
settings are put in (two GRPO steps on CPU). Nothing else of the recipe is the test's: if TRL or
the page drifts, this fails.

The model is a tiny Qwen3 built here (random weights, Qwen3's special tokens, the Qwen3 chat
template TRL knows how to parse tool calls from), loaded from its directory; a sequence bias in
its generation settings makes it call `bash` with one fixed command each turn, so the episodes
run real steps. Its first generation is held (a forward pre-hook) until the server has reaped
every episode for idleness (`--idle-seconds`), as a trainer's slow generation round would be:
those episodes come back `None` (masked), and the second step's resets of the same environments
start new episodes that are graded.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest
from project import ROOT
from serve_helpers import Server

from endless_assets.store.catalog import query
from endless_assets.store.lake import Lake
from endless_assets.testing.kept_lake import procedural_tasks, write_kept
from endless_assets.testing.tiny_model import build_qwen3

trl = pytest.importorskip("trl", reason="TRL is in the `serve` extra")
pytest.importorskip("datasets", reason="TRL's datasets")

BATCH = "2026-07-09"
# Far above a tiny model's generation round (a few seconds; ~20 s on this 2-core machine under
# a load of 15), which must not be reaped in the second step; it is what the first step is held.
IDLE_SECONDS = 45
COMMAND = "ls /home/user"

# The test's own lines, before the recipe: the model, its held first generation, the settings.
PRELUDE = r"""
import json, sys, time

import docker
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

MODEL_DIR, OWNER, OUT, TOOL_CALL = sys.argv[1:5]
tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
MODEL = AutoModelForCausalLM.from_pretrained(MODEL_DIR)
calls = tokenizer(TOOL_CALL, add_special_tokens=False)["input_ids"]
# each token of the tool call, after the ones before it: the longer the match, the stronger
BIAS = {tuple(calls[: k + 1]): 20.0 * (k + 1) for k in range(len(calls))}
seen = {"prompts": [], "held_seconds": None}


def hold_first_generation(module, args, kwargs):
    # a slow generation round: the first forward waits until the server has reaped the episodes
    if seen["prompts"]:
        return
    ids = kwargs["input_ids"] if kwargs.get("input_ids") is not None else args[0]
    seen["prompts"] = tokenizer.batch_decode(ids, skip_special_tokens=False)
    engine, start = docker.from_env(), time.monotonic()
    label = {"label": ["endless.role=serve", f"endless.owner={OWNER}"]}
    while engine.containers.list(all=True, filters=label, ignore_removed=True):
        if time.monotonic() - start > 600:
            raise RuntimeError("the server never reaped the idle episodes")
        time.sleep(0.2)
    seen["held_seconds"] = time.monotonic() - start


MODEL.register_forward_pre_hook(hold_first_generation, with_kwargs=True)
ARGS = GRPOConfig(
    output_dir=OUT + "/trainer",
    use_cpu=True,
    bf16=False,
    max_steps=2,
    per_device_train_batch_size=2,
    num_generations=2,
    max_completion_length=128,
    max_tool_calling_iterations=1,
    generation_kwargs={"sequence_bias": BIAS},
    logging_steps=1,
    report_to="none",
    save_strategy="no",
    seed=0,
)
"""

EPILOGUE = r"""
state = {"global_step": trainer.state.global_step, "log_history": trainer.state.log_history}
with open(OUT + "/result.json", "w") as handle:
    json.dump({**seen, **state}, handle, default=str)
"""


def recipe() -> str:
    """The TRL code block of docs/serving.md, as it stands."""
    page = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    (block,) = [b for b in blocks if "GRPOTrainer(" in b]
    return block


def put_in(code: str, old: str, new: str) -> str:
    """`code` with the one line that starts with `old` replaced by `new`."""
    lines = [i for i, line in enumerate(code.splitlines()) if line.strip().startswith(old)]
    assert len(lines) == 1, f"the recipe has {len(lines)} line(s) starting with {old!r}"
    rows = code.splitlines()
    indent = rows[lines[0]][: len(rows[lines[0]]) - len(rows[lines[0]].lstrip())]
    rows[lines[0]] = indent + new
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def lake(sandbox, tmp_path_factory) -> tuple[Lake, list]:
    lake = Lake(tmp_path_factory.mktemp("trl") / "data")
    tasks = write_kept(lake, procedural_tasks(sandbox.base.tag, BATCH, 2))
    for task in tasks:
        assert sandbox.build(task.dockerfile or "", task.context_files, network=False).ok
    return lake, tasks


def test_the_trl_recipe_trains_through_an_idle_reaping(lake, tmp_path):
    lake, tasks = lake
    model = build_qwen3(tmp_path / "qwen3", trl.chat_template_utils.qwen3_chat_template)
    server = Server(lake.data_dir, f"--idle-seconds={IDLE_SECONDS}")
    out = tmp_path / "out"
    out.mkdir()
    code = recipe()
    code = put_in(code, "URL = ", f"URL = {server.url!r}")
    code = put_in(code, "model=", "model=MODEL,")
    code = put_in(code, "args=GRPOConfig(", "args=ARGS,")
    script = tmp_path / "recipe.py"
    script.write_text(PRELUDE + code + EPILOGUE, encoding="utf-8")
    call = {"name": "bash", "arguments": {"command": COMMAND}}
    tool_call = f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(out)}
    env["OMP_NUM_THREADS"] = "1"  # (a tiny model: threads only contend with the engine's work)
    owner = f"{socket.gethostname()}:{server.pid}"
    try:
        run = subprocess.run(
            [sys.executable, str(script), str(model), owner, str(out), tool_call],
            capture_output=True,
            text=True,
            env=env,
            timeout=1800,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-5000:]
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()
    result = json.loads((out / "result.json").read_text())
    assert result["global_step"] == 2, result  # training went on past the reaping
    assert result["held_seconds"] is not None
    for prompt in result["prompts"]:  # the instruction reaches the model once
        assert sum(prompt.count(t.instruction) for t in tasks) == 1, prompt

    rows = query(
        lake,
        "select session_id, termination, reward, steps, trajectory from served_episodes "
        "order by started_at",
    ).to_dicts()
    held, trained = rows[:2], rows[2:]
    assert [(r["termination"], r["reward"], r["steps"]) for r in held] == [
        ("abandoned", None, 0)
    ] * 2
    assert [(r["termination"], r["reward"]) for r in trained] == [("done", 0)] * 2
    assert all(r["steps"] == 1 and COMMAND in r["trajectory"] for r in trained), trained
    # the same two environments (sessions) ran both steps' episodes: the reaping killed none
    assert {r["session_id"] for r in held} == {r["session_id"] for r in trained}
    assert len({r["session_id"] for r in rows}) == 2
    assert "4 episode(s): 2 graded, 0 infra error(s), 2 abandoned" in server.stderr()
    rewards = [entry["reward"] for entry in result["log_history"] if "reward" in entry]
    assert rewards == [None, 0.0], result["log_history"]  # the held step's masked: no fake 0
