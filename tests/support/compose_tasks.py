"""Multi-service task directories written by hand, in the shapes compose files come in: a Harbor
task with a Redis service from Debian's packages (`build:`, a CMD healthcheck, an environment
list, a named volume), a Harbor task with an `image:` service mapped to our base image (an
entrypoint, an environment map, a CMD-SHELL healthcheck, `depends_on` with a condition), and a
Terminal-Bench 1.x task whose `server` is built beside `client` (no healthcheck), and a Harbor
task whose `web` service takes the task's own files: a bind-mounted directory, an `env_file`, a
build argument (and a published port, which is not published)."""

from __future__ import annotations

from pathlib import Path

IMAGE_MAP = {"ubuntu:22.04": "endless-base", "python:3.12-slim": "endless-base"}

RESP = """\
import socket


def redis(*words):
    command = f"*{len(words)}\\r\\n" + "".join(f"${len(w)}\\r\\n{w}\\r\\n" for w in words)
    with socket.create_connection(("cache", 6379), timeout=10) as s:
        s.sendall(command.encode())
        return s.recv(4096).decode()
"""
AGENT_DOCKERFILE = "FROM ubuntu:22.04\nRUN mkdir -p /home/user && chmod 777 /home/user\n"
AGENT_DOCKERFILE += "WORKDIR /home/user\n"

REDIS_COMPOSE = """\
services:
  main:
    depends_on: [cache]
    environment:
      - CACHE_HOST=cache
  cache:
    build:
      context: ./cache
    command: ["redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"]
    environment:
      - REDIS_PORT=6379
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 1s
      retries: 90
    volumes:
      - cache-data:/data
volumes:
  cache-data: {}
"""
REDIS_SERVICE = """\
FROM ubuntu:22.04
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
    redis-server && rm -rf /var/lib/apt/lists/*
USER redis
"""

HTTP_COMPOSE = """\
services:
  main:
    depends_on:
      files-api:
        condition: service_healthy
  files-api:
    image: python:3.12-slim
    entrypoint: ["python3", "-m", "http.server"]
    command: ["8080", "--directory", "/etc"]
    environment: {PYTHONUNBUFFERED: "1"}
    healthcheck:
      test: ["CMD-SHELL", "python3 -c \\"import urllib.request as u; u.urlopen('http://localhost:8080/hostname')\\""]
      interval: 2s
      retries: 30
"""
FETCH = "import urllib.request as u; print(u.urlopen('http://{host}/hostname').read().decode()"
FETCH += ".strip())"

TB_COMPOSE = """\
services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: ["sh", "-c", "sleep infinity"]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
  server:
    build:
      context: ./server
    image: ${T_BENCH_TASK_DOCKER_NAME_PREFIX}__server
    container_name: ${T_BENCH_TASK_DOCKER_NAME_PREFIX}__server
    environment:
      - MOTD=quartz-5120
"""
TB_SERVER = """\
FROM ubuntu:22.04
COPY serve.sh /serve.sh
CMD ["/serve.sh"]
"""
TB_SERVE = """\
#!/bin/sh
mkdir -p /tmp/www && printf '%s\\n' "$MOTD" > /tmp/www/motd
exec python3 -m http.server 7000 --directory /tmp/www
"""

MOUNTS_COMPOSE = """\
services:
  web:
    build:
      context: ./web
      args: {PORT: "8090"}
    command: ["/start.sh"]
    env_file: web.env
    ports: ["8090:8090"]
    volumes: ["./site:/srv/site:ro"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import socket; socket.create_connection(('web', 8090))"]
      interval: 1s
      retries: 60
"""
MOUNTS_MOTD = "from-the-mount\nfrom-the-env-file"
MOUNTS_START = """\
#!/bin/sh
cp -r /srv/site /tmp/www && printf '%s\\n' "$GREETING" >> /tmp/www/motd.txt
exec python3 -m http.server "$PORT" --directory /tmp/www
"""

TEST_SH = """\
#!/bin/bash
mkdir -p /logs/verifier
if (cd / && python3 -m pytest -rA /tests/test_outputs.py); then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def redis_task(root: Path) -> None:
    write(root, "instruction.md", "Set the Redis key `answer` to `42` on the server `cache`.\n")
    write(root, "environment/Dockerfile", AGENT_DOCKERFILE)
    write(root, "environment/docker-compose.yaml", REDIS_COMPOSE)
    write(root, "environment/cache/Dockerfile", REDIS_SERVICE)
    test = "\n\ndef test_answer_is_set():\n"
    test += "    assert redis('GET', 'answer') == '$2\\r\\n42\\r\\n'\n"
    write(root, "tests/test_outputs.py", RESP + test)
    write(root, "tests/test.sh", TEST_SH, 0o755)
    solve = f"python3 - <<'EOF'\n{RESP}\nredis('SET', 'answer', '42')\nEOF\n"
    write(root, "solution/solve.sh", solve)


def http_task(root: Path) -> None:
    write(
        root,
        "instruction.md",
        "Save what http://files-api:8080/hostname returns to /home/user/host.txt.\n",
    )
    write(root, "environment/Dockerfile", AGENT_DOCKERFILE)
    write(root, "environment/docker-compose.yaml", HTTP_COMPOSE)
    fetch = FETCH.format(host="files-api:8080")
    test = (
        "import urllib.request as u\n\n\ndef test_host_saved():\n"
        "    served = u.urlopen('http://files-api:8080/hostname').read().decode().strip()\n"
        "    assert open('/home/user/host.txt').read().strip() == served\n"
    )
    write(root, "tests/test_outputs.py", test)
    write(root, "tests/test.sh", TEST_SH, 0o755)
    write(root, "solution/solve.sh", f'python3 -c "{fetch}" > /home/user/host.txt\n')


def tb_task(root: Path) -> None:
    write(root, "task.yaml", "instruction: Save http://server:7000/motd to /app/motd.txt.\n")
    write(root, "Dockerfile", "FROM ubuntu:22.04\nRUN mkdir -p /app\nWORKDIR /app\n")
    write(root, "docker-compose.yaml", TB_COMPOSE)
    write(root, "server/Dockerfile", TB_SERVER)
    write(root, "server/serve.sh", TB_SERVE, 0o755)
    write(
        root,
        "run-tests.sh",
        "#!/bin/bash\ncd / && python3 -m pytest -rA $TEST_DIR/test_outputs.py\n",
        0o755,
    )
    test = "def test_motd():\n    assert open('/app/motd.txt').read().strip() == 'quartz-5120'\n"
    write(root, "tests/test_outputs.py", test)
    fetch = FETCH.replace("hostname", "motd").format(host="server:7000")
    solve = f'for i in $(seq 60); do python3 -c "{fetch}" > /app/motd.txt && break; sleep 1; done\n'
    write(root, "solution.sh", "#!/bin/bash\n" + solve, 0o755)


def mounts_task(root: Path) -> None:
    write(root, "instruction.md", "Save http://web:8090/motd.txt to /home/user/motd.txt.\n")
    write(root, "environment/Dockerfile", AGENT_DOCKERFILE)
    write(root, "environment/docker-compose.yaml", MOUNTS_COMPOSE)
    dockerfile = "FROM ubuntu:22.04\nARG PORT=80\nENV PORT=$PORT\nCOPY start.sh /start.sh\n"
    write(root, "environment/web/Dockerfile", dockerfile)
    write(root, "environment/web/start.sh", MOUNTS_START, 0o755)
    write(root, "environment/web.env", "GREETING=from-the-env-file\n")
    write(root, "environment/site/motd.txt", "from-the-mount\n")
    test = "def test_motd():\n    text = open('/home/user/motd.txt').read().strip()\n"
    test += f"    assert text == {MOUNTS_MOTD!r}\n"
    write(root, "tests/test_outputs.py", test)
    write(root, "tests/test.sh", TEST_SH, 0o755)
    fetch = FETCH.replace("hostname", "motd.txt").format(host="web:8090")
    write(root, "solution/solve.sh", f'python3 -c "{fetch}" > /home/user/motd.txt\n')


def source_tasks(root: Path) -> list[str]:
    """The four directories under `root`; their names."""
    redis_task(root / "harbor_redis")
    http_task(root / "harbor_http")
    tb_task(root / "tb_server")
    mounts_task(root / "harbor_mounts")
    return ["harbor_redis", "harbor_http", "tb_server", "harbor_mounts"]
