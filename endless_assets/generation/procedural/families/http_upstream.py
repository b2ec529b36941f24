"""An HTTP application in a service of its own, behind the agent's nginx, which answers 502:
fix the proxy's configuration.

The application (service `app`) answers GET PREFIX...?n=NONCE with an HMAC of the nonce under a
secret only it holds, so only a proxy that reaches it can answer; the test starts nginx with the
agent's configuration (as the agent's uid, as every test runs) and asks through it with a nonce
of its own. Up the
levels, more is wrong: the upstream's port; its host; the path the application expects; the
header it requires (the key in a file beside the configuration); several of them at once.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from dataclasses import dataclass

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level
from endless_assets.generation.procedural.families.service_kit import (
    AGENT_PACKAGES,
    http_app,
    secret,
)
from endless_assets.generation.procedural.names import SERVICES
from endless_assets.generation.procedural.render import render_test

DIR = "/home/user/proxy"
DEFECTS = ("port", "host", "prefix", "key")


@dataclass
class Plan:
    name: str
    listen: int
    port: int  # the application's
    prefix: str  # the path the application serves under ("/": any)
    key: str  # the X-Upstream-Key it requires ("": none)
    secret: str
    defects: tuple[str, ...]

    def config(self, fixed: bool) -> str:
        wrong = set() if fixed else set(self.defects)
        host = "127.0.0.1" if "host" in wrong else "app"
        port = self.port + 1 if "port" in wrong else self.port
        path = "/" if "prefix" in wrong else self.prefix
        header = "" if "key" in wrong or not self.key else KEY_LINE.format(key=self.key)
        return CONFIG.format(listen=self.listen, host=host, port=port, path=path, header=header)


CONFIG = """\
# nginx for the {{name}} API: run as the user with
#   nginx -p /home/user/proxy -c nginx.conf -e error.log
pid nginx.pid;
worker_processes 1;
events {{ worker_connections 64; }}
http {{
    access_log access.log;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {{
        listen 127.0.0.1:{listen};
        location /api/ {{
            proxy_pass http://{host}:{port}{path};
{header}        }}
    }}
}}
"""
KEY_LINE = "            proxy_set_header X-Upstream-Key {key};\n"


class HttpUpstream(Family[Plan]):
    name = "http_upstream"
    category = "service configuration"

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        count = by_level(level, 1, 1, 2, 2, 3, 4)
        pool = by_level(level, DEFECTS[:1], DEFECTS[:2], DEFECTS[:3], DEFECTS, DEFECTS, DEFECTS)
        defects = tuple(sorted(rng.sample(list(pool), count), key=DEFECTS.index))
        needs_prefix = "prefix" in defects
        return Plan(
            name=rng.choice(SERVICES),
            listen=rng.choice([8080, 8081, 8088, 8090]),
            port=rng.choice([5000, 7000, 8000, 9000]),
            prefix="/api/" if needs_prefix else "/",
            key=secret(rng)[:16] if "key" in defects else "",
            secret=secret(rng),
            defects=defects,
        )

    def build(self, plan: Plan) -> FamilyTask:
        files = {"proxy/nginx.conf": plan.config(False).replace("{name}", plan.name)}
        files |= {"proxy/tmp/.keep": ""}
        if plan.key:
            files["proxy/upstream.key"] = plan.key + "\n"
        environment = {"APP_SECRET": plan.secret, "APP_PREFIX": plan.prefix, "APP_KEY": plan.key}
        return self.task(
            plan,
            truth={"defects": list(plan.defects), "listen": plan.listen, "port": plan.port},
            complexity="easy" if len(plan.defects) == 1 else "medium",
            scenario="site reliability engineer paged because the API answers 502",
            files=files,
            services=[http_app(plan.port, environment)],
            packages=AGENT_PACKAGES,
        )

    def instruction(self, plan: Plan) -> str:
        key = (
            " It only serves requests carrying the header `X-Upstream-Key` with the key in "
            f"{DIR}/upstream.key."
            if plan.key
            else ""
        )
        prefix = (
            " It expects the full request path, `/api/...` included." if plan.prefix != "/" else ""
        )
        return (
            f"Our {plan.name} API is served by nginx with the configuration {DIR}/nginx.conf "
            f"(run it as yourself: `nginx -p {DIR} -c nginx.conf -e error.log`), listening on "
            f"127.0.0.1:{plan.listen}. Requests to /api/ answer 502 Bad Gateway. The "
            f"application behind it runs on the host `app`, port {plan.port}.{prefix}{key} "
            f"Fix {DIR}/nginx.conf so that http://127.0.0.1:{plan.listen}/api/... reaches the "
            "application; keep the listen address as it is."
        )

    def solution(self, plan: Plan) -> str:
        config = plan.config(True).replace("{name}", plan.name)
        return f"cat > {DIR}/nginx.conf <<'CONF'\n{config}CONF\n"

    def tests(self, plan: Plan) -> tuple[str, str]:
        nonce = hashlib.sha256(plan.secret.encode()).hexdigest()[:12]
        consts = {
            "DIR": DIR,
            "LISTEN": plan.listen,
            "APP": f"http://app:{plan.port}/health",
            "NONCE": nonce,
            "ANSWER": hmac.new(plan.secret.encode(), nonce.encode(), hashlib.sha256).hexdigest(),
        }
        modules = ["os", "subprocess", "time", "urllib.error", "urllib.request"]
        initial = render_test(modules, consts, PROXY, INITIAL)
        return initial, render_test(modules, consts, PROXY, THROUGH)


PROXY = """
    def _through_proxy(path):
        nginx = subprocess.Popen(
            ["nginx", "-p", DIR, "-c", "nginx.conf", "-e", "error.log", "-g", "daemon off;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 30
            url = f"http://127.0.0.1:{LISTEN}{path}"
            while True:
                try:
                    with urllib.request.urlopen(url, timeout=10) as reply:
                        return reply.status, reply.read().decode()
                except urllib.error.HTTPError as exc:
                    return exc.code, ""
                except OSError:
                    if nginx.poll() is not None or time.monotonic() > deadline:
                        return None, "nginx did not answer"
                    time.sleep(0.2)
        finally:
            nginx.kill()
            nginx.wait()
"""
INITIAL = """
    def test_the_application_is_up():
        with urllib.request.urlopen(APP, timeout=10) as reply:
            assert reply.status == 200


    def test_the_proxy_does_not_reach_it_yet():
        status, _ = _through_proxy(f"/api/echo?n={NONCE}")
        assert status != 200
"""
THROUGH = """
    def test_the_proxy_reaches_the_application():
        status, body = _through_proxy(f"/api/echo?n={NONCE}")
        assert (status, body) == (200, ANSWER)
"""
