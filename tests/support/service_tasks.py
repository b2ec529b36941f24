"""Tasks with services, written here for the purpose: each needs what its services hold, so
doing nothing fails and the reference solution, which talks to them by name, passes.

- `fetch`: one service, `kv`, Python's http.server over a directory with a secret (built from
  its own Dockerfile; its port in its environment, which its command reads: a `$` Compose must
  not interpolate); the agent writes the secret to a file.
- `store`: two services, `store` (a small HTTP store of ours, an executable script in its build
  context, an exec-form command, an environment) and `audit` (answers once a file exists: a
  readiness command that waits); the agent PUTs a value into `store`, the completion test reads
  it back from the service itself.
"""

from __future__ import annotations

import base64

from endless_assets.models import Service, Task, task_seed
from endless_assets.sandbox.image.images import EXECUTABLE_PREFIX

SECRET = "tangerine-7731"
FETCH_URL = "http://kv:8000/secret.txt"
STORE_URL = "http://store:9000/answer"

STORE_PY = """\
#!/usr/bin/env python3
import http.server, os

DATA = {}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        value = DATA.get(self.path)
        self.send_response(200 if value is not None else 404)
        self.end_headers()
        self.wfile.write((value or "").encode())

    def do_PUT(self):
        size = int(self.headers.get("Content-Length") or 0)
        DATA[self.path] = self.rfile.read(size).decode()
        self.send_response(204)
        self.end_headers()


http.server.ThreadingHTTPServer(("", int(os.environ["STORE_PORT"])), Handler).serve_forever()
"""

INITIAL = """\
import os


def test_home_exists():
    assert os.path.isdir("/home/user")
"""

FETCH_TEST = f"""\
def test_the_secret_was_fetched():
    with open("/home/user/secret.txt") as f:
        assert f.read().strip() == {SECRET!r}
"""

STORE_TEST = f"""\
import urllib.request


def test_the_store_holds_the_answer():
    with urllib.request.urlopen({STORE_URL!r}, timeout=10) as reply:
        assert reply.read().decode().strip() == "42"
"""


def _executable(text: str) -> str:
    return EXECUTABLE_PREFIX + base64.b64encode(text.encode()).decode()


def _task(base: str, batch: str, index: int, **fields) -> Task:
    return Task(
        batch=batch,
        index=index,
        seed=task_seed(batch, index),
        category="services",
        complexity="easy",
        scenario="a task beside its services",
        truth={},
        dockerfile=f"FROM {base}\n",
        initial_test=INITIAL,
        generator="handwritten",
        **fields,
    )


def fetch_task(base: str, batch: str = "2026-12-07", index: int = 0) -> Task:
    kv = Service(
        name="kv",
        dockerfile=(
            f"FROM {base}\nRUN mkdir -p /srv && echo {SECRET} > /srv/secret.txt\n"
            "CMD cd /srv && exec python3 -m http.server 8000\n"
        ),
        command=["/bin/sh", "-c", "cd /srv && exec python3 -m http.server ${KV_PORT}"],
        environment={"KV_PORT": "8000"},
        ready="python3 -c \"import urllib.request as u; u.urlopen('http://localhost:8000/')\"",
        ready_seconds=60,
    )
    return _task(
        base,
        batch,
        index,
        instruction=(
            f"A web server answers at {FETCH_URL}. Save what it returns to /home/user/secret.txt."
        ),
        completion_test=FETCH_TEST,
        reference_solution=(
            f"python3 -c \"import urllib.request as u; print(u.urlopen('{FETCH_URL}')"
            '.read().decode().strip())" > /home/user/secret.txt\n'
        ),
        services=[kv],
    )


def store_task(base: str, batch: str = "2026-12-07", index: int = 1) -> Task:
    store = Service(
        name="store",
        dockerfile=f"FROM {base}\nCOPY store.py /opt/store.py\n",
        context_files={"store.py": _executable(STORE_PY)},
        command=["/opt/store.py"],
        environment={"STORE_PORT": "9000"},
        ready="python3 -c \"import socket; socket.create_connection(('localhost', 9000))\"",
        ready_seconds=60,
        memory="256m",
    )
    audit = Service(
        name="audit",
        dockerfile=f"FROM {base}\n",
        command=["/bin/sh", "-c", "sleep 2 && touch /tmp/up && exec sleep infinity"],
        ready="test -e /tmp/up",
        ready_seconds=30,
    )
    return _task(
        base,
        batch,
        index,
        instruction=(
            f"A key-value store answers HTTP at {STORE_URL.rsplit('/', 1)[0]}/. Store the value "
            f"42 under the key `answer` (an HTTP PUT of the body `42` to {STORE_URL})."
        ),
        completion_test=STORE_TEST,
        reference_solution=(
            "python3 - <<'EOF'\nimport urllib.request\n"
            f"request = urllib.request.Request({STORE_URL!r}, data=b'42', method='PUT')\n"
            "urllib.request.urlopen(request, timeout=10)\nEOF\n"
        ),
        services=[store, audit],
    )
