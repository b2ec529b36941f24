"""Compose files in imports and exports (no Docker): a Harbor task's
`environment/docker-compose.yaml` and a Terminal-Bench task's services beside `client` become the
task's services, anything that reaches the host is refused naming the key and the service, and
a task with services exports to Harbor and Terminal-Bench and reads back with the same ones."""

from __future__ import annotations

import base64
import os

import pytest
import yaml

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.interop.compose import readiness
from endless_assets.interop.harbor import export_harbor
from endless_assets.interop.imports import import_tasks
from endless_assets.interop.terminal_bench import export_terminal_bench
from endless_assets.models import Service
from endless_assets.sandbox.image.base_image import base_image_tag
from endless_assets.sandbox.image.images import EXECUTABLE_PREFIX, decode_context

BASE = "endless-base:test"
MAP = {"ubuntu:22.04": BASE, "redis:7": "endless-redis:local"}

COMPOSE = """\
services:
  main:
    depends_on: [db, cache]
    environment:
      DB_HOST: db
  db:
    build:
      context: ./db
    environment:
      - POSTGRES_PASSWORD=secret
      - PASS_THROUGH
    healthcheck:
      test: ["CMD", "pg_isready", "-h", "localhost"]
      interval: 2s
      retries: 10
      start_period: 5s
    volumes:
      - pgdata:/var/lib/postgresql/data
      - /var/cache/anonymous
      - {type: tmpfs, target: /run/db}
    restart: unless-stopped
  cache:
    image: redis:7
    command: redis-server --save "" --port 6380
    healthcheck:
      test: ["CMD-SHELL", "redis-cli -p 6380 ping | grep -q PONG && test $$HOME"]
    environment: {LEVEL: 3, DEBUG: true}
  web-api:
    image: redis:7
    entrypoint: ["/bin/sh", "-c"]
    command: ["exec python3 -m http.server 8000"]
    depends_on:
      db:
        condition: service_healthy
    mem_limit: 256m
    x-note: anything
volumes:
  pgdata: {}
"""


def write(root, rel: str, text: str | bytes, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.chmod(path, mode)


def harbor_task(root, compose: str = COMPOSE) -> None:
    write(root, "instruction.md", "Fix the app.\n")
    write(root, "environment/Dockerfile", "FROM ubuntu:22.04\nCOPY app.py /app/app.py\n")
    write(root, "environment/app.py", "print('app')\n")
    write(root, "environment/docker-compose.yaml", compose)
    write(root, "environment/db/Dockerfile", 'FROM ubuntu:22.04\nCMD ["/start.sh"]\n')
    write(root, "environment/db/start.sh", "#!/bin/sh\nexec postgres\n", 0o755)
    write(root, "environment/db/seed.bin", b"\x00\x01\x02")
    write(root, "tests/test_outputs.py", "def test_ok():\n    assert True\n")
    write(root, "solution/solve.sh", "#!/bin/bash\ntrue\n")


def imported(root, fmt: str = "harbor", image_map=MAP):
    (outcome,) = import_tasks(root, "b", fmt=fmt, base_image_map=image_map, base_image=BASE)
    return outcome


def test_a_harbor_compose_task_imports_with_its_services_beside_the_agents_container(tmp_path):
    harbor_task(tmp_path / "t")
    outcome = imported(tmp_path / "t")
    task = outcome.draft
    assert task is not None, outcome.reason
    assert "services: db, cache, web-api" in outcome.notes
    assert set(task.context_files) == {"app.py"}  # not the compose file, not db/
    assert task.dockerfile.endswith('ENV DB_HOST="db"\n')  # what Harbor gives `main`
    db, cache, web = task.services
    assert db.dockerfile == f'FROM {BASE}\nCMD ["/start.sh"]\n'
    assert db.command == ["/start.sh"]  # the Dockerfile's CMD
    assert db.context_files["start.sh"].startswith(EXECUTABLE_PREFIX)
    assert base64.b64decode(db.context_files["seed.bin"].split(":", 1)[1]) == b"\x00\x01\x02"
    assert db.environment == {"POSTGRES_PASSWORD": "secret"}  # this host's PASS_THROUGH: never
    assert (db.ready, db.ready_seconds) == ("pg_isready -h localhost", 60.0)  # 25 s: at least 60
    assert cache.dockerfile == "FROM endless-redis:local\n"
    assert cache.command == ["redis-server", "--save", "", "--port", "6380"]
    assert cache.ready == "redis-cli -p 6380 ping | grep -q PONG && test $HOME"
    assert cache.ready_seconds == 90.0  # Compose's defaults: 3 x 30 s
    assert cache.environment == {"LEVEL": "3", "DEBUG": "true"}
    assert web.dockerfile == "FROM endless-redis:local\nENTRYPOINT []\n"
    assert web.command == ["/bin/sh", "-c", "exec python3 -m http.server 8000"]
    assert (web.ready, web.memory) == ("true", "256m")  # no healthcheck: ready once started
    assert (db.after, cache.after, web.after) == ([], [], ["db"])  # main's depends_on: dropped


@pytest.mark.parametrize(
    ("service", "reason"),
    [
        ("privileged: true", "service extra: `privileged` is refused"),
        ("network_mode: host", "service extra: `network_mode` is refused"),
        ("cap_add: [NET_ADMIN]", "service extra: `cap_add` is refused"),
        ("volumes: ['/etc:/host']", "service extra: volume /etc is not a path inside the task"),
        ("volumes: ['../../x:/data']", "service extra: volume ../../x is not a path inside the"),
        ("volumes: ['$HOME:/h']", "service extra: volume $HOME is not a path inside the task"),
        ("volumes: ['./nothing:/data']", "service extra: volume ./nothing:/data: ./nothing does"),
        ("volumes: [{type: bind, source: /, target: /h}]", "service extra: volume / is not a"),
        ("env_file: /etc/passwd", "service extra: env_file /etc/passwd is not a path inside"),
        ("env_file: [missing.env]", "service extra: env_file missing.env does not exist"),
        ("stdin_only: 1", "service extra: `stdin_only` is not supported"),
        ("build: ../../elsewhere", "service extra: build context ../../elsewhere is not in"),
        ("build: {context: ./db, target: x}", "service extra: build `target` is not supported"),
    ],
)
def test_a_compose_key_that_reaches_the_host_or_is_unknown_is_refused_naming_it(
    tmp_path, service, reason
):
    extra = f"  extra:\n    image: redis:7\n    command: [x]\n    {service}\n"
    harbor_task(tmp_path / "t", COMPOSE.replace("volumes:\n  pgdata", extra + "volumes:\n  pgdata"))
    outcome = imported(tmp_path / "t")
    assert outcome.draft is None and outcome.reason.startswith(reason), outcome.reason


MOUNTS = """\
services:
  main:
    network_mode: none
    volumes: ["${HOST_VERIFIER_LOGS_PATH}:${ENV_VERIFIER_LOGS_PATH}"]
  db:
    deploy: {resources: {limits: {cpus: "1.5", memory: 768M}}}
    build: {context: ./db, args: {VERSION: "15", GREETING: a b}}
    env_file: [db.env, {path: optional.env, required: false}]
    environment: {PGPORT: "5433"}
    ports: ["5432:5432"]
    volumes:
      - ./init.sql:/docker-entrypoint-initdb.d/init.sql:ro
      - ./conf:/etc/db/conf.d
      - {type: bind, source: ./db/start.sh, target: /usr/local/bin/start}
      - pgdata:/var/lib/postgresql/data
"""


def test_task_files_mounted_into_a_service_env_files_and_build_args_become_its_image(tmp_path):
    """(and the agent's service's harness log mounts are dropped, deploy limits are kept)"""
    harbor_task(tmp_path / "t", MOUNTS)
    write(tmp_path / "t", "environment/db/Dockerfile", 'FROM ubuntu:22.04\nARG VERSION=14\n'
          'ARG GREETING="hi there"\nARG OTHER\nCMD ["/start.sh"]\n')  # fmt: skip
    write(tmp_path / "t", "environment/init.sql", "CREATE TABLE t (x int);\n")
    write(tmp_path / "t", "environment/conf/a.conf", "port 5433\n")
    write(tmp_path / "t", "environment/conf/sub/b.bin", b"\x00\xff")
    write(tmp_path / "t", "environment/db.env", "# comment\nexport USER_A='ann'\nPGPORT=1\n\n")
    outcome = imported(tmp_path / "t")
    assert outcome.draft is not None, outcome.reason
    (db,) = outcome.draft.services
    assert db.dockerfile == (
        f'FROM {BASE}\nARG VERSION="15"\nARG GREETING="a b"\nARG OTHER\nCMD ["/start.sh"]\n'
        'COPY [".compose-mounts/0/init.sql", "/docker-entrypoint-initdb.d/init.sql"]\n'
        'COPY [".compose-mounts/1/", "/etc/db/conf.d"]\n'
        'COPY [".compose-mounts/2/start.sh", "/usr/local/bin/start"]\n'
    )
    files = db.context_files
    assert files[".compose-mounts/0/init.sql"] == "CREATE TABLE t (x int);\n"
    assert files[".compose-mounts/1/a.conf"] == "port 5433\n"
    assert decode_context(files[".compose-mounts/1/sub/b.bin"]) == (b"\x00\xff", False)
    assert files[".compose-mounts/2/start.sh"].startswith(EXECUTABLE_PREFIX)
    assert db.environment == {"USER_A": "ann", "PGPORT": "5433"}  # its environment wins
    assert (db.cpus, db.memory) == (1.5, "768M")


IMAGE_DEFAULTS = """\
services:
  entry: {build: ./entry}
  both: {build: ./both}
"""


def test_without_a_command_or_healthcheck_the_dockerfiles_entrypoint_cmd_and_healthcheck_serve(
    tmp_path,
):
    harbor_task(tmp_path / "t", IMAGE_DEFAULTS)
    entry = 'FROM ubuntu:22.04\nHEALTHCHECK --interval=2s CMD ["redis-cli", "ping"]\n'
    entry += 'ENTRYPOINT ["redis-server", "--port", "6380"]\n'
    both = 'FROM ubuntu:22.04\nENTRYPOINT ["/init"]\nCMD exec serve --now\n'
    both += "HEALTHCHECK CMD test -e /tmp/up || exit 1\n"
    write(tmp_path / "t", "environment/entry/Dockerfile", entry)
    write(tmp_path / "t", "environment/both/Dockerfile", both)
    outcome = imported(tmp_path / "t")
    assert outcome.draft is not None, outcome.reason
    first, second = outcome.draft.services
    assert first.command == ["redis-server", "--port", "6380"]
    assert first.dockerfile.endswith("ENTRYPOINT []\n")  # the argv says it all
    assert (first.ready, first.ready_seconds) == ("redis-cli ping", 90.0)  # Docker's 3 x 30 s
    assert second.command == ["/bin/sh", "-c", "exec serve --now"]  # after the image's /init
    assert "ENTRYPOINT []" not in second.dockerfile
    assert second.ready == "test -e /tmp/up || exit 1"


def test_the_agents_own_service_may_not_reach_the_host_either(tmp_path):
    harbor_task(tmp_path / "t", "services:\n  main:\n    privileged: true\n")
    assert imported(tmp_path / "t").reason.startswith("service main: `privileged` is refused")


def test_an_image_with_no_mapping_or_no_known_command_is_refused_naming_the_service(tmp_path):
    harbor_task(tmp_path / "t")
    assert imported(tmp_path / "t", image_map={"ubuntu:22.04": BASE}).reason.startswith(
        "service cache: image redis:7 is not mapped (add --base-image-map redis:7=IMAGE"
    )
    harbor_task(tmp_path / "u", "services:\n  kv:\n    image: redis:7\n")
    assert imported(tmp_path / "u").reason == (
        "service kv: no command: the default command of image redis:7 is not known here; add "
        "`command:` (what the image runs, e.g. its CMD) to the compose service"
    )


def test_a_compose_name_that_is_no_dns_label_becomes_one_and_stays_an_alias(tmp_path):
    compose = (
        "services:\n  main:\n    depends_on: [my_db]\n  my_db:\n    image: redis:7\n"
        "    command: [x]\n  Web.App:\n    image: redis:7\n    command: [y]\n"
        "    depends_on: {my_db: {condition: service_healthy}}\n"
    )
    harbor_task(tmp_path / "t", compose)
    task = imported(tmp_path / "t").draft
    db, web = task.services
    assert (db.name, db.aliases, web.name, web.aliases) == (
        "my-db",
        ["my_db"],
        "web-app",
        ["Web.App"],
    )
    assert web.after == ["my-db"]
    (directory,) = export_harbor([task], tmp_path / "h", base_image="reg/base:1")
    compose = yaml.safe_load((directory / "environment/docker-compose.yaml").read_text())
    assert compose["services"]["Web.App"]["depends_on"] == {
        "my_db": {"condition": "service_healthy"}
    }
    back = imported(directory, image_map={})
    assert back.draft is not None, back.reason
    assert [(s.name, s.aliases, s.after) for s in back.draft.services] == [
        ("my-db", ["my_db"], []),
        ("web-app", ["Web.App"], ["my-db"]),
    ]


@pytest.mark.parametrize(
    ("services", "reason"),
    [
        (
            "  a:\n    image: redis:7\n    command: [x]\n    depends_on: [ghost]\n",
            "depends_on: service a starts after ghost: no such service",
        ),
        (
            "  a:\n    image: redis:7\n    command: [x]\n    depends_on: [b]\n"
            "  b:\n    image: redis:7\n    command: [x]\n    depends_on: [a]\n",
            "depends_on: services a, b wait on each other (a cycle in after)",
        ),
    ],
)
def test_depends_on_an_unknown_service_or_in_a_cycle_is_refused_in_one_line(
    tmp_path, services, reason
):
    harbor_task(tmp_path / "t", "services:\n" + services)
    assert imported(tmp_path / "t").reason == reason


def test_healthcheck_forms_give_the_readiness_command():
    assert readiness("s", {"test": "pg_isready"}) == ("pg_isready", 90.0)
    assert readiness("s", {"test": ["CMD", "a b", "c"], "interval": "1m30s", "retries": 2}) == (
        "'a b' c",
        180.0,
    )
    assert readiness("s", {"test": ["NONE"]}) == ("true", 60.0)
    assert readiness("s", None) == ("true", 60.0)


TB_COMPOSE = """\
services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    command: [ "sh", "-c", "sleep infinity" ]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
  server:
    build:
      context: ./server
    image: ${T_BENCH_TASK_DOCKER_NAME_PREFIX}__server
    container_name: ${T_BENCH_TASK_DOCKER_NAME_PREFIX}__server
    command: ["python3", "-m", "http.server", "8080"]
"""


def test_a_terminal_bench_task_with_services_keeps_client_as_the_agents(tmp_path):
    root = tmp_path / "t"
    write(root, "task.yaml", "instruction: Query the server.\n")
    write(root, "Dockerfile", "FROM ubuntu:22.04\n")
    write(root, "docker-compose.yaml", TB_COMPOSE)
    write(root, "server/Dockerfile", "FROM ubuntu:22.04\nCOPY index.html /srv/\n")
    write(root, "server/index.html", "hi\n")
    write(root, "run-tests.sh", "#!/bin/bash\npytest $TEST_DIR/test_outputs.py\n")
    write(root, "tests/test_outputs.py", "def test_ok():\n    assert True\n")
    outcome = imported(root, fmt="terminal-bench")
    assert outcome.draft is not None, outcome.reason
    (server,) = outcome.draft.services
    assert (server.name, server.context_files) == ("server", {"index.html": "hi\n"})
    assert server.dockerfile.startswith(f"FROM {BASE}\n")
    assert outcome.draft.context_files == {}  # server/ is the server's
    write(root, "docker-compose.yaml", TB_COMPOSE.replace("client", "agent"))
    assert "none is `client`" in imported(root, fmt="terminal-bench").reason
    write(
        root,
        "docker-compose.yaml",
        TB_COMPOSE.replace("    command: [ ", "    pid: host\n    command: [ "),
    )
    assert imported(root, fmt="terminal-bench").reason.startswith(
        "service client: `pid` is refused"
    )


def task_with_services():
    ours = base_image_tag()
    task, _ = ProceduralGenerator(ours).describe("2026-12-07", 0, seed=11)
    db = Service(
        name="db",
        dockerfile=f"FROM {ours}\nCOPY run.sh /run.sh\n",
        context_files={"run.sh": EXECUTABLE_PREFIX + base64.b64encode(b"#!/bin/sh\n").decode()},
        command=["/run.sh", "$HOME"],
        environment={"PGDATA": "/var/$lib"},
        ready="test -e /tmp/up && echo $PGDATA",
        ready_seconds=30.5,
        memory="256m",
    )
    web = Service(name="web", dockerfile=f"FROM {ours}\n", command=["sleep", "9"], ready="true")
    return task.model_copy(update={"services": [db, web]})


def test_a_task_with_services_exports_to_harbor_as_a_compose_task_and_reads_back(tmp_path):
    task = task_with_services()
    (directory,) = export_harbor([task], tmp_path / "h", base_image="reg/base:1")
    compose = yaml.safe_load((directory / "environment/docker-compose.yaml").read_text())
    main, db = compose["services"]["main"], compose["services"]["db"]
    assert main == {"depends_on": {n: {"condition": "service_healthy"} for n in ("db", "web")}}
    assert db["build"] == {"context": "./services/db"} and db["command"] == ["/run.sh", "$$HOME"]
    assert db["healthcheck"]["test"] == ["CMD-SHELL", "test -e /tmp/up && echo $$PGDATA"]
    assert (
        (directory / "environment/services/db/Dockerfile")
        .read_text()
        .startswith("FROM reg/base:1\n")
    )
    assert os.access(directory / "environment/services/db/run.sh", os.X_OK)
    back = imported(directory, image_map={}).draft
    assert [s.name for s in back.services] == ["db", "web"]
    assert back.services[0].ready_seconds == 60.0 and back.services[0].command[1] == "$HOME"
    assert back.context_files == task.context_files  # services/ is not the agent's


def test_a_task_with_services_exports_to_terminal_bench_beside_client_and_reads_back(tmp_path):
    task = task_with_services()
    (directory,) = export_terminal_bench([task], tmp_path / "tb", base_image=base_image_tag())
    compose = yaml.safe_load((directory / "docker-compose.yaml").read_text())
    assert list(compose["services"]) == ["client", "db", "web"]
    assert compose["services"]["client"]["command"] == ["sh", "-c", "sleep infinity"]
    back = imported(directory, fmt="terminal-bench", image_map={}).draft
    assert back.services == [
        s.model_copy(update={"ready_seconds": 60.0})  # 30.5 s: at least 60 on import
        for s in task.services
    ]
