"""Permissions: apply a mode policy to scripts, secrets, configs and directories of a deployment."""

from __future__ import annotations

import random

from endless_assets.generation.procedural.base import PROJECTS, SERVICES, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import render_test, sha256

SETUP = """
import os
import subprocess

BASE = {base!r}
MODES = {modes!r}

os.makedirs(os.path.join(BASE, "tmp"), exist_ok=True)
subprocess.run(["chown", "-R", "user:user", BASE], check=True)
for rel, mode in MODES.items():
    os.chmod(os.path.join(BASE, rel), mode)
"""


class PermissionsFix(Family):
    name = "permissions_fix"
    category = "complex permissions management"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        base = f"/home/user/{rng.choice(['deploy', 'apps', 'srv'])}/{project}"
        svcs = rng.sample(SERVICES, 3)
        files: dict[str, str] = {}
        kinds: dict[str, str] = {}  # relative path -> kind (script, secret, config, data, dir...)

        def add(rel: str, kind: str, text: str) -> None:
            files[rel] = text
            kinds[rel] = kind

        for s in rng.sample(svcs, rng.randint(2, 3)):
            add(
                f"bin/{s}-{rng.choice(['start', 'deploy', 'rotate'])}.sh",
                "script",
                f"#!/bin/sh\necho {s}\n",
            )
        add("bin/README.md", "data", "Helper scripts for operators.\n")
        add("bin/common.inc", "data", "# sourced by the scripts, not run directly\nLOG=/tmp/x\n")
        for name in rng.sample(
            ["tls.key", "tls.pem", "api.key", "jwt.pem", "db.key"], rng.randint(1, 3)
        ):
            add(
                f"keys/{name}",
                "secret",
                f"-----BEGIN PRIVATE KEY-----\n{rng.getrandbits(128):032x}\n",
            )
        add("keys/README.txt", "data", "Public notes about the key rotation.\n")
        add(".env", "secret", f"DB_PASSWORD={rng.getrandbits(64):016x}\n")
        for s in svcs:
            add(f"config/{s}.conf", "config", f"[{s}]\nport = {rng.randint(2000, 9000)}\n")
        add("config/defaults.ini", "data", "[defaults]\nlog_level = info\n")
        add(f"data/{rng.choice(['users', 'events', 'orders'])}.csv", "data", "id,name\n1,x\n")
        add("README.md", "data", f"# {project}\n")
        kinds["keys"] = "keydir"
        kinds["tmp"] = "tmpdir"
        kinds["bin"] = "dir"
        kinds["config"] = "dir"

        rules = rng.sample(["script", "secret", "config", "keydir", "tmpdir"], rng.randint(3, 5))
        target = {
            "script": rng.choice([0o755, 0o750, 0o700]),
            "secret": rng.choice([0o600, 0o400]),
            "config": rng.choice([0o640, 0o644]),
            "keydir": rng.choice([0o700, 0o750]),
            "tmpdir": 0o1777,
        }
        start_pool = {
            "script": [0o644, 0o664, 0o600],
            "secret": [0o644, 0o664, 0o666],
            "config": [0o666, 0o600, 0o664],
            "keydir": [0o755, 0o777],
            "tmpdir": [0o755, 0o777],
            "data": [0o644, 0o664, 0o600, 0o444, 0o640],
            "dir": [0o755, 0o775],
        }
        initial = {rel: rng.choice(start_pool[kind]) for rel, kind in kinds.items()}
        final = {rel: target[k] if k in rules else initial[rel] for rel, k in kinds.items()}

        desc = {
            "script": f"every `*.sh` script in bin/ must be mode {target['script']:o}",
            "secret": (
                f"the private keys (`*.key` and `*.pem` in keys/) and the `.env` file must be "
                f"mode {target['secret']:o}"
            ),
            "config": f"the `*.conf` files in config/ must be mode {target['config']:o}",
            "keydir": f"the keys/ directory itself must be mode {target['keydir']:o}",
            "tmpdir": (
                "tmp/ is a scratch directory shared by several service accounts: it must be "
                "world-writable with the sticky bit set (mode 1777)"
            ),
        }
        policy = "; ".join(desc[r] for r in rules)
        instruction = (
            f"Our security review flagged the permissions in {base}. The policy is: {policy}. "
            "Give those exactly these modes, and leave the permissions of everything else in "
            f"{base} (other files, other directories, the file contents) exactly as they are now."
        )
        cmds = [f"cd {base}"]
        if "script" in rules:
            cmds.append(
                f"find bin -maxdepth 1 -type f -name '*.sh' -exec chmod {target['script']:o} {{}} +"
            )
        if "secret" in rules:
            cmds.append(
                "find keys -maxdepth 1 -type f \\( -name '*.key' -o -name '*.pem' \\) "
                f"-exec chmod {target['secret']:o} {{}} +"
            )
            cmds.append(f"chmod {target['secret']:o} .env")
        if "config" in rules:
            cmds.append(f"chmod {target['config']:o} config/*.conf")
        if "keydir" in rules:  # last: a 700 keys/ must not stop us from reaching the keys
            cmds.append(f"chmod {target['keydir']:o} keys")
        if "tmpdir" in rules:
            cmds.append("chmod 1777 tmp")
        solution = "\n".join(cmds) + "\n"

        consts = {
            "BASE": base,
            "INITIAL": {k: f"{v:o}" for k, v in sorted(initial.items())},
            "FINAL": {k: f"{v:o}" for k, v in sorted(final.items())},
            "CONTENT": {k: sha256(v) for k, v in files.items()},
        }
        check = dedent("""
            def _modes():
                paths = {rel: os.path.join(BASE, rel) for rel in FINAL}
                return {rel: f"{os.stat(path).st_mode & 0o7777:o}" for rel, path in paths.items()}
        """)
        initial_test = render_test(
            ["os"],
            consts,
            check,
            """
            def test_initial_modes():
                assert _modes() == INITIAL
        """,
        )
        completion_test = render_test(
            ["hashlib", "os"],
            consts,
            check,
            """
            def test_policy_applied():
                modes = _modes()
                for rel, mode in FINAL.items():
                    if mode != INITIAL[rel]:
                        assert modes[rel] == mode, rel


            def test_everything_else_unchanged():
                modes = _modes()
                for rel, mode in FINAL.items():
                    if mode == INITIAL[rel]:
                        assert modes[rel] == mode, rel


            def test_contents_unchanged():
                for rel, digest in CONTENT.items():
                    with open(os.path.join(BASE, rel), "rb") as fh:
                        assert hashlib.sha256(fh.read()).hexdigest() == digest, rel
        """,
        )
        rel_base = base.removeprefix("/home/user/")
        return FamilyTask(
            instruction=instruction,
            truth={"base": base, "rules": rules, "final_modes": consts["FINAL"]},
            files={f"{rel_base}/{rel}": text for rel, text in files.items()},
            setup_script=SETUP.format(base=base, modes=initial).lstrip(),
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="easy" if len(rules) == 3 else "medium" if len(rules) == 4 else "hard",
            scenario="security engineer hardening file permissions",
        )
