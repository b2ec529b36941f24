"""The red team against services, on real Docker, one route per new surface, each first shown
to work against a naive target: an agent that fakes the end state a test reads in the service
(a table where the task asks for a view: a test that only reads it pays), one that floods the
service (a Redis without our limit grows past it), one that kills it (a test that ignores the
client's failure pays). Against ours each earns 0, scored, never a harness error; a service
that dies on its own before the agent begins is a harness error, which the stages retry."""

from __future__ import annotations

import pytest

from endless_assets.agent.episode import EpisodeLimits, run_episode_in
from endless_assets.agent.policies import EpisodeTask, OraclePolicy
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.models import Task

LIMITS = EpisodeLimits(max_turns=4, command_timeout=300)


def described(sandbox, family: str, level: int) -> Task:
    draft, _ = ProceduralGenerator(sandbox.base.tag).describe_cell(
        "red-team-services", level, 900 + level, family, level
    )
    return draft


def image_of(sandbox, task: Task) -> str:
    built = sandbox.build(task.dockerfile, task.context_files, services=task.services)
    assert built.ok, built.log
    return built.tag


def attack(box, task: Task, script: str, test: str):
    """An episode whose agent runs `script`, graded by `test`."""
    episode = EpisodeTask(task.task_id, task.instruction, script)
    return run_episode_in(box, episode, OraclePolicy(), test, LIMITS)


@pytest.fixture(scope="module")
def view_task(sandbox):
    task = described(sandbox, "pg_report", 3)  # level 3: the view alone
    assert task.truth["view"] and not task.truth["report"]
    return task, image_of(sandbox, task)


@pytest.fixture(scope="module")
def queue_task(sandbox):
    task = described(sandbox, "redis_queue", 1)
    return task, image_of(sandbox, task)


def naive_view_test(task: Task) -> str:
    """Reads the view's rows and nothing else: a table holding them passes."""
    expected = {region: int(total) for region, total in task.truth["expected_csv"][1:]}
    password = task.completion_test.split("PASSWORD = ", 1)[1].split("\n", 1)[0]
    return (
        "import subprocess\n\n"
        f"def test_totals():\n"
        "    out = subprocess.run(['psql', '-X', '-At', '-F', ',', '-h', 'db', '-U', 'checker',"
        " 'shop', '-c', 'SELECT region, total_cents FROM public.region_totals'],"
        f" capture_output=True, text=True, env={{'PGPASSWORD': {password}}}).stdout\n"
        "    got = {l.split(',')[0]: int(l.split(',')[1]) for l in out.splitlines() if l}\n"
        f"    assert got == {expected!r}\n"
    )


FAKE_VIEW = """
psql -h db -U app shop -v ON_ERROR_STOP=1 -c "CREATE TABLE public.region_totals AS
  SELECT c.region, SUM(o.amount_cents) AS total_cents FROM orders o
  JOIN customers c ON c.id = o.customer_id WHERE o.status = 'paid' GROUP BY c.region"
"""


def test_a_table_faking_the_view_the_test_reads_earns_0(sandbox, view_task):
    task, image = view_task
    with sandbox.container(image, labels={"role": "red-services"}) as box:
        naive = attack(box, task, FAKE_VIEW, naive_view_test(task))
    assert naive.reward == 1, naive.verdict  # the attack works against a test that only reads
    with sandbox.container(image, labels={"role": "red-services"}) as box:
        ours = attack(box, task, FAKE_VIEW, task.completion_test)
    assert (ours.reward, ours.termination) == (0, "done"), ours.error
    assert "test_the_view_is_a_view" in ours.verdict.output


# 100 values of 1 MiB each, through redis-cli's pipe; then the agent declares it done.
FLOOD = """
cat > /tmp/flood.py <<'PY'
import sys
value = "x" * (1 << 20)
for i in range(100):
    key = f"flood:{i}"
    sys.stdout.write(f"*3\\r\\n$3\\r\\nSET\\r\\n${len(key)}\\r\\n{key}\\r\\n")
    sys.stdout.write(f"${len(value)}\\r\\n{value}\\r\\n")
PY
python3 /tmp/flood.py | redis-cli -h queue --pipe > /tmp/flood.log 2>&1
true
"""
USED = "redis-cli info memory | sed -n 's/^used_memory:\\([0-9]*\\).*/\\1/p'"


def test_an_agent_that_floods_the_queue_earns_0_scored_and_the_service_stays_in_bounds(
    sandbox, queue_task
):
    task, image = queue_task
    (service,) = task.services
    unbounded = service.model_copy(
        update={
            "name": "queue",
            "context_files": {
                **service.context_files,
                "redis.conf": service.context_files["redis.conf"].replace("64mb", "0"),
            },
        }
    )
    naive = sandbox.build(task.dockerfile, task.context_files, services=[unbounded])
    assert naive.ok, naive.log
    with sandbox.container(naive.tag, labels={"role": "red-services"}) as box:
        attack(box, task, FLOOD, task.completion_test)
        code, used = box.services.services["queue"].exec(USED)
    assert code == 0 and int(used) > 100 << 20  # the flood grows a service without our limit
    with sandbox.container(image, labels={"role": "red-services"}) as box:
        flooded = attack(box, task, FLOOD, task.completion_test)
        assert box.services.dead() == []
        code, used = box.services.services["queue"].exec(USED)
    assert code == 0 and int(used) <= 64 << 20
    assert (flooded.reward, flooded.termination) == (0, "done"), flooded.error


def naive_queue_test(task: Task) -> str:
    """Takes no answer for an empty queue: a dead service passes."""
    (key,) = task.truth["queues"]
    return (
        "import subprocess\n\n"
        "def test_drained():\n"
        f"    out = subprocess.run(['redis-cli', '-h', 'queue', 'LLEN', {key!r}],"
        " capture_output=True, text=True).stdout.strip()\n"
        "    assert out in ('0', '')\n"
    )


KILL = "redis-cli -h queue shutdown nosave; true\n"


def test_an_agent_that_kills_the_queue_earns_0_scored(sandbox, queue_task):
    task, image = queue_task
    with sandbox.container(image, labels={"role": "red-services"}) as box:
        naive = attack(box, task, KILL, naive_queue_test(task))
    assert naive.reward == 1  # the attack works against a test that ignores the client failing
    with sandbox.container(image, labels={"role": "red-services"}) as box:
        killed = attack(box, task, KILL, task.completion_test)
        assert box.services.dead() == ["queue"]
    assert (killed.reward, killed.termination) == (0, "done"), killed.error


def test_a_service_that_dies_before_the_agent_begins_is_a_harness_error(sandbox, queue_task):
    task, image = queue_task
    with sandbox.container(image, labels={"role": "red-services"}) as box:
        service = box.services.services["queue"]
        sandbox.client.api.kill(service.container_id)  # the service crashing by itself
        episode = attack(box, task, "true\n", task.completion_test)
    assert (episode.reward, episode.termination) == (None, "harness_error")
    assert episode.engine_failed and "stopped before the agent began" in episode.error
