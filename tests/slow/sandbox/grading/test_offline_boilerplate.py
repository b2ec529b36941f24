"""Harbor's and Terminal-Bench 2's own verifier boilerplate grades offline as it grades with a
network (real Docker, a root agent graded in a verifier container): its `uvx -p 3.13 -w ...
pytest --ctrf ...` runs the task's tests with the image's python and pytest and writes the CTRF
report, an honest agent scores 1 and a do-nothing one 0; every form of uv, uvx and pip that real
task scripts use gets the same, and a package the image lacks is named as a step that needs the
network (offline_uv.py)."""

from __future__ import annotations

import pytest
from conventions import TB2_TEST_SH

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask, NoopPolicy, OraclePolicy
from endless_assets.sandbox.grading import bundle
from endless_assets.sandbox.grading.grade import run_pytest

OUTPUTS = """import pytest


def test_written():
    assert open('/app/out.txt').read() == 'done\\n'


@pytest.mark.parametrize('n', [1, 2])
def test_numbers(n):
    assert n in (1, 2)
"""
# What the report says, printed by the script after the boilerplate.
SHOW_CTRF = (
    "python3 -c \"import json; r = json.load(open('/logs/verifier/ctrf.json'))['results']; "
    "s = r['summary']; print('CTRF', r['tool']['name'], s['tests'], s['passed'], s['failed'], "
    "sorted(t['name'] for t in r['tests'] if t['status'] == 'failed'))\"\n"
)
LIMITS = EpisodeLimits(command_timeout=60, test_timeout=120)
TASK = EpisodeTask("et-tb2", "write done to /app/out.txt", "echo done > /app/out.txt")


def verifier(script: str, test: str = OUTPUTS, **files: str) -> str:
    files = {"test.sh": script, **{name.replace("_", "."): text for name, text in files.items()}}
    return bundle.pack(bundle.Verifier(test=test, script="test.sh", files=files))


@pytest.mark.parametrize("policy", [OraclePolicy, NoopPolicy])
def test_terminal_bench_2s_verbatim_script_scores_the_reference_1_and_doing_nothing_0(
    sandbox, root_image, policy
):
    with sandbox.container(root_image, labels={"role": "tb2-boilerplate"}) as box:
        assert box.agent.uid == 0
        rollout = run_episode_in(box, TASK, policy(), verifier(TB2_TEST_SH + SHOW_CTRF), LIMITS)
    verdict = rollout.verdict
    assert rollout.termination == "done", rollout.error
    assert not verdict.needs_network, verdict.needs_network
    if policy is OraclePolicy:
        assert (rollout.reward, verdict.status) == (1.0, "passed"), verdict.output
        assert "CTRF pytest 3 3 0 []" in verdict.output
    else:
        assert (rollout.reward, verdict.status) == (0.0, "failed"), verdict.output
        assert "CTRF pytest 3 2 1 ['test_outputs.py::test_written']" in verdict.output
    assert verdict.tests == 3  # pytest ran the test file, not a stray argument


PASSING = "def test_ok():\n    assert True\n"
REWARD = "if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
SETUP = (
    "apt-get update && apt-get install -y --no-install-recommends curl ca-certificates\n"
    "curl -LsSf https://astral.sh/uv/install.sh | sh\nsource $HOME/.local/bin/env\n"
)
T = "/tests/test_outputs.py"
CTRF = "--ctrf /logs/verifier/ctrf.json"

# Forms of real Harbor and Terminal-Bench task scripts, each as its test step.
FORMS = {
    "uvx --with, Harbor's docs": f"uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 "
    f"pytest {CTRF} {T} -rA",
    "uvx --python= --with=": f"uvx --python=3.13 --with=pytest==8.4.1 pytest {CTRF} {T}",
    "uvx -p3.13 -wpytest -w=x": f"uvx -p3.13 -wpytest -w=pytest-json-ctrf pytest {CTRF} {T}",
    "uvx --with a,b and flags": f"uvx -q --no-cache --isolated --with pytest,pytest-json-ctrf "
    f"pytest {CTRF} {T}",
    "uvx with an index": "uvx --index https://example.invalid/simple --index-strategy "
    f"unsafe-best-match -p 3.11 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest {CTRF} {T}",
    "uvx python -m pytest": f"uvx -p 3.13 --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 "
    f"python -m pytest {T} {CTRF} -rA",
    "uvx --from": f"uvx --from pytest==8.4.1 pytest {CTRF} {T}",
    "uv add, uv run": f"uv init && uv add pytest==8.4.1 pytest-json-ctrf==0.3.5 && "
    f"uv run pytest {CTRF} {T} -rA",
    "uv run --with": "uv run --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 "
    f"pytest {CTRF} {T}",
    "uv run -m": f"uv run --no-project -m pytest {CTRF} {T}",
    "uv venv, uv pip install": "uv venv .tbench-testing -p 3.13 && "
    "source .tbench-testing/bin/activate && uv pip install --system pytest==8.4.1 "
    f"pytest-json-ctrf==0.3.5 && uv run pytest {CTRF} {T}",
    "pip install, pytest": "pip install --break-system-packages pytest==8.4.1 "
    f"pytest-json-ctrf==0.3.5 && pytest {CTRF} {T} -rA",
    "python -m pip install": "python3 -m pip install --quiet pytest-json-ctrf==0.3.5 && "
    f"python3 -m pytest {CTRF} {T}",
    "~/.local/bin/uvx by its path": "curl -LsSf https://astral.sh/uv/install.sh -o /tmp/uv.sh "
    "&& sh /tmp/uv.sh && $HOME/.local/bin/uvx -p 3.13 -w pytest==8.4.1 -w "
    f"pytest-json-ctrf==0.3.5 pytest {CTRF} {T} -rA",
    "uv venv, activate, python -m pytest": "uv venv /opt/test-venv --python 3.13 && "
    ". /opt/test-venv/bin/activate && uv pip install -q pytest==8.4.1 pytest-json-ctrf==0.3.5 "
    f"&& python -m pytest {CTRF} {T} -rA",  # (the image has no `python`: the environment does)
    "wget | sh, ~/.local/bin on PATH": "wget -qO- https://astral.sh/uv/install.sh | sh && "
    'export PATH="$HOME/.local/bin:$PATH" && uvx --python 3.12 --with pytest==8.4.1 --with '
    f"pytest-json-ctrf==0.3.5 pytest {CTRF} {T} -rA",
    "UV_INSTALL_DIR, uvx by its path": "curl -LsSf https://astral.sh/uv/install.sh | env "
    f"UV_INSTALL_DIR=/opt/uv sh && /opt/uv/uvx -w pytest-json-ctrf pytest {CTRF} {T}",
    "uv run --python --with": "uv run --python 3.13 --with pytest==8.4.1 --with "
    f"pytest-json-ctrf==0.3.5 pytest {CTRF} {T} -rA",
    "uvx --with-requirements": "uvx --python-preference only-system --with-requirements "
    f"/tests/requirements.txt pytest {CTRF} {T} -rA",
    "pip install -r": "pip install --break-system-packages -r /tests/requirements.txt && "
    f"python3 -m pytest {CTRF} {T} -v",
    "uv tool run pytest@version": "uv tool run --with pytest-json-ctrf==0.3.5 pytest@8.4.1 "
    f"{CTRF} {T}",
    "python3 -m uv": "python3 -m pip install -q uv && python3 -m uv run --with "
    f"pytest-json-ctrf pytest {CTRF} {T}",
    "set -e, apt-get install what is served": "set -euo pipefail; apt-get update -qq && "
    "apt-get install -y -qq curl ca-certificates python3-pip && set +e && uvx -p 3.13 -w "
    f"pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest {CTRF} {T} -rA",
}
REQUIREMENTS = "pytest==8.4.1\npytest-json-ctrf==0.3.5  # the report\n"


@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_of_uv_uvx_and_pip_in_real_scripts_grades_offline(sandbox, root_image, form):
    script = "#!/bin/bash\n" + SETUP + FORMS[form] + "\n" + REWARD + SHOW_CTRF
    with sandbox.container(root_image, labels={"role": "tb2-forms"}) as box:
        test = verifier(script, PASSING, requirements_txt=REQUIREMENTS)
        verdict = run_pytest(box, test, stop_agent=False)
    assert verdict.status == "passed" and verdict.tests == 1, verdict.output
    assert not verdict.needs_network
    assert "CTRF pytest 1 1 0 []" in verdict.output, verdict.output


@pytest.mark.parametrize(
    ("step", "named"),
    [
        (
            "uvx -p 3.11 -w torch==2.5.1 -w pytest==8.4.1 pytest",
            "not installed in the image: torch",
        ),
        (
            "uvx -w git+https://example.invalid/org/repo.git pytest",
            "not installed in the image: git+https://example.invalid/org/repo.git",
        ),
    ],
)
def test_a_package_the_image_lacks_is_a_step_that_needs_the_network(
    sandbox, root_image, step, named
):
    script = f"#!/bin/bash\n{SETUP}{step} {T} -rA\n{REWARD}"
    with sandbox.container(root_image, labels={"role": "tb2-forms"}) as box:
        verdict = run_pytest(box, verifier(script, PASSING), stop_agent=False)
    assert verdict.status == "failed", verdict.output
    assert verdict.needs_network == f"{step} {T} -rA: {named}"


# An agent's environment where the script makes its own (Terminal-Bench 1's .tbench-testing): an
# activate script that puts a pytest first on PATH that always passes.
PLANT = (
    "mkdir -p .tbench-testing/bin && touch .tbench-testing/pyvenv.cfg && "
    "printf '#!/bin/sh\\nexit 0\\n' > .tbench-testing/bin/pytest && "
    "chmod +x .tbench-testing/bin/pytest && "
    "echo 'PATH=/app/.tbench-testing/bin:$PATH' > .tbench-testing/bin/activate"
)


@pytest.mark.parametrize("makes_it", [False, True])
def test_an_environment_the_agent_planted_where_the_script_makes_one_is_replaced(
    sandbox, root_image, makes_it
):
    """Sourced as found (no `uv venv` step), the agent's files pass; `uv venv` replaces them,
    as uv does, and the task's own test fails the agent that did not do it."""
    make = "uv venv .tbench-testing\n" if makes_it else ""
    script = f"#!/bin/bash\n{SETUP}{make}source .tbench-testing/bin/activate\npytest {T} -rA\n"
    task = EpisodeTask("et-venv", "write done to /app/out.txt", PLANT)
    with sandbox.container(root_image, labels={"role": "tb2-venv"}) as box:
        rollout = run_episode_in(box, task, OraclePolicy(), verifier(script + REWARD), LIMITS)
    assert rollout.termination == "done", rollout.error
    if makes_it:
        assert (rollout.reward, rollout.verdict.tests) == (0.0, 3), rollout.verdict.output
    else:
        assert (rollout.reward, rollout.verdict.tests) == (1.0, 0), rollout.verdict.output
