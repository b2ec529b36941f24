"""Permissions: apply a mode policy to scripts, secrets, configs and directories of a deployment.

Up the levels: more rules of the policy, then scripts in subfolders and a script that is a link
to a file outside the deployment (the link's target must keep its mode), names with spaces, a
rule for every directory but two, and an audit list of every mode changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level
from endless_assets.generation.procedural.names import PROJECTS, SERVICES
from endless_assets.generation.procedural.render import extras_script, kept, render_test, sha256

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
START_POOL = {
    "script": [0o644, 0o664, 0o600],
    "secret": [0o644, 0o664, 0o666],
    "config": [0o666, 0o600, 0o664],
    "keydir": [0o755, 0o777],
    "tmpdir": [0o755, 0o777],
    "data": [0o644, 0o664, 0o600, 0o444, 0o640],
    "dir": [0o755, 0o775],
}
RULES = ["script", "secret", "config", "keydir", "tmpdir"]


@dataclass
class Plan:
    project: str
    base: str
    files: dict[str, str] = field(default_factory=dict)  # path under base -> text
    kinds: dict[str, str] = field(default_factory=dict)  # path under base -> kind
    rules: list[str] = field(default_factory=list)
    target: dict[str, int] = field(default_factory=dict)  # kind -> mode the policy wants
    initial: dict[str, int] = field(default_factory=dict)  # path -> mode now
    level: int | None = None
    links: dict[str, str] = field(default_factory=dict)  # path under base -> absolute target
    outside: dict[str, str] = field(default_factory=dict)  # link targets: path -> text
    report: str = ""  # where to list the changes

    def add(self, rel: str, kind: str, text: str) -> None:
        self.files[rel] = text
        self.kinds[rel] = kind

    def final(self) -> dict[str, int]:
        return {
            rel: self.target[k] if k in self.rules else self.initial[rel]
            for rel, k in self.kinds.items()
        }


def _layout(rng: random.Random, plan: Plan) -> None:
    """The deployment's files and directories (today's draw, in its order)."""
    svcs = rng.sample(SERVICES, 3)
    for s in rng.sample(svcs, rng.randint(2, 3)):
        verb = rng.choice(["start", "deploy", "rotate"])
        plan.add(f"bin/{s}-{verb}.sh", "script", f"#!/bin/sh\necho {s}\n")
    plan.add("bin/README.md", "data", "Helper scripts for operators.\n")
    plan.add("bin/common.inc", "data", "# sourced by the scripts, not run directly\nLOG=/tmp/x\n")
    for name in rng.sample(
        ["tls.key", "tls.pem", "api.key", "jwt.pem", "db.key"], rng.randint(1, 3)
    ):
        key = f"-----BEGIN PRIVATE KEY-----\n{rng.getrandbits(128):032x}\n"
        plan.add(f"keys/{name}", "secret", key)
    plan.add("keys/README.txt", "data", "Public notes about the key rotation.\n")
    plan.add(".env", "secret", f"DB_PASSWORD={rng.getrandbits(64):016x}\n")
    for s in svcs:
        plan.add(f"config/{s}.conf", "config", f"[{s}]\nport = {rng.randint(2000, 9000)}\n")
    plan.add("config/defaults.ini", "data", "[defaults]\nlog_level = info\n")
    plan.add(f"data/{rng.choice(['users', 'events', 'orders'])}.csv", "data", "id,name\n1,x\n")
    plan.add("README.md", "data", f"# {plan.project}\n")
    plan.kinds.update(keys="keydir", tmp="tmpdir", bin="dir", config="dir")


def _targets(rng: random.Random) -> dict[str, int]:
    return {
        "script": rng.choice([0o755, 0o750, 0o700]),
        "secret": rng.choice([0o600, 0o400]),
        "config": rng.choice([0o640, 0o644]),
        "keydir": rng.choice([0o700, 0o750]),
        "tmpdir": 0o1777,
    }


class PermissionsFix(Family[Plan]):
    name = "permissions_fix"
    category = "complex permissions management"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        plan = Plan(project, f"/home/user/{rng.choice(['deploy', 'apps', 'srv'])}/{project}")
        _layout(rng, plan)
        plan.rules = rng.sample(RULES, rng.randint(3, 5))
        plan.target = _targets(rng)
        plan.initial = {rel: rng.choice(START_POOL[kind]) for rel, kind in plan.kinds.items()}
        return plan

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        top = rng.choice(["deploy", "apps", "srv"])
        plan = Plan(project, f"/home/user/{top}/{project}", level=level)
        _layout(rng, plan)
        if level >= 4:
            plan.add(f"bin/tools/{rng.choice(SERVICES)}-check.sh", "script", "#!/bin/sh\ntrue\n")
            plan.kinds["bin/tools"] = "dir"
            shared = f"/home/user/shared/{project}-run.sh"
            plan.outside[shared] = "#!/bin/sh\n# shared runner, not part of this deployment\n"
            plan.links["bin/current.sh"] = shared
        if level >= 5:
            plan.add("bin/nightly backup.sh", "script", "#!/bin/sh\necho nightly\n")
            plan.kinds["data"] = "subdir"
            plan.kinds["config"] = plan.kinds["bin"] = plan.kinds["bin/tools"] = "subdir"
        count = by_level(level, 1, 2, 3, 4, 5, 5)
        plan.rules = ["script", *rng.sample(RULES[1:], count - 1)]
        plan.target = _targets(rng)
        if level >= 5:
            plan.rules.append("subdir")
            plan.target["subdir"] = 0o750
        pools = {**START_POOL, "subdir": [0o755, 0o775, 0o777]}
        plan.initial = {rel: rng.choice(pools[kind]) for rel, kind in plan.kinds.items()}
        for path in plan.outside:
            plan.initial[path] = 0o644
            plan.kinds[path] = "outside"
        if level == 6:
            plan.report = f"/home/user/reports/{project}-permissions.tsv"
        return plan

    def build(self, plan: Plan) -> FamilyTask:
        rel_base = plan.base.removeprefix("/home/user/")
        modes = {rel: m for rel, m in plan.initial.items() if not rel.startswith("/")}
        setup = SETUP.format(base=plan.base, modes=modes).lstrip()
        if plan.links:
            links = {f"{plan.base}/{rel}": target for rel, target in plan.links.items()}
            outside = {path: m for path, m in plan.initial.items() if path.startswith("/")}
            setup += "\n" + extras_script(links=links, modes=outside, owned=[plan.base])
        truth = {"base": plan.base, "rules": plan.rules, "final_modes": self._octal(plan.final())}
        if plan.report:
            truth["report"] = plan.report
        n = len(plan.rules)
        return self.task(
            plan,
            truth=truth,
            files={
                **{f"{rel_base}/{rel}": text for rel, text in plan.files.items()},
                **{path.removeprefix("/home/user/"): text for path, text in plan.outside.items()},
            },
            setup_script=setup,
            complexity="easy" if n == 3 else "medium" if n == 4 else "hard",
            scenario="security engineer hardening file permissions",
        )

    def _octal(self, modes: dict[str, int]) -> dict[str, str]:
        return {k: f"{v:o}" for k, v in sorted(modes.items())}

    def instruction(self, plan: Plan) -> str:
        target = plan.target
        nested = "bin/ (subfolders included)" if "bin/tools" in plan.kinds else "bin/"
        desc = {
            "script": f"every `*.sh` script in {nested} must be mode {target['script']:o}",
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
            "subdir": "every other directory under it (not itself) must be mode 750",
        }
        policy = "; ".join(desc[r] for r in plan.rules)
        base = plan.base
        text = (
            f"Our security review flagged the permissions in {base}. The policy is: {policy}. "
            "Give those exactly these modes, and leave the permissions of everything else in "
            f"{base} (other files, other directories, the file contents) exactly as they are now."
        )
        if plan.links:
            text += (
                " Some scripts are symbolic links to files shared with other deployments: those "
                "shared files are not ours, leave their modes and the links alone."
            )
        if plan.report:
            text += (
                f" For the audit, write {plan.report}: one line `<path>\\t<old mode>\\t<new mode>` "
                f"(tab-separated, the path relative to {base}, modes in octal like 755) for "
                "every file or directory whose mode you changed."
            )
        return text

    def tests(self, plan: Plan) -> tuple[str, str]:
        final = plan.final()
        consts = {
            "BASE": plan.base,
            "INITIAL": self._octal(plan.initial),
            "FINAL": self._octal(final),
            "CONTENT": {k: sha256(v) for k, v in plan.files.items()},
        }
        if plan.level is not None:
            consts["LINKS"] = plan.links
            consts["REPORT"] = plan.report
        initial = render_test(["os"], consts, MODES_OF, INITIAL)
        parts = [MODES_OF, COMPLETION, kept("test_contents_unchanged", "CONTENT", "BASE")]
        if plan.level is not None:
            parts.append(LEVELED)
        return initial, render_test(["hashlib", "os"], consts, *parts)

    def solution(self, plan: Plan) -> str:
        target, rules = plan.target, plan.rules
        cmds = [f"cd {plan.base}"]
        snapshot = (
            "find . -mindepth 1 ! -type l -printf '%P\\t%m\\n' | LC_ALL=C sort -t$'\\t' -k1,1"
        )
        if plan.report:
            cmds.append(f"{snapshot} > /tmp/modes.before")
        depth = "" if "bin/tools" in plan.kinds else " -maxdepth 1"
        mode = {kind: f"{m:o}" for kind, m in target.items()}
        steps = {  # keys/ late: a 700 keys/ must not stop us from reaching the keys
            "script": [f"find bin{depth} -type f -name '*.sh' -exec chmod {mode['script']} {{}} +"],
            "secret": [
                "find keys -maxdepth 1 -type f \\( -name '*.key' -o -name '*.pem' \\) "
                f"-exec chmod {mode['secret']} {{}} +",
                f"chmod {mode['secret']} .env",
            ],
            "config": [f"chmod {mode['config']} config/*.conf"],
            "subdir": [
                "find . -mindepth 1 -type d ! -path ./tmp ! -path ./keys -exec chmod 750 {} +"
            ],
            "keydir": [f"chmod {mode['keydir']} keys"],
            "tmpdir": ["chmod 1777 tmp"],
        }
        cmds += [cmd for rule, lines in steps.items() if rule in rules for cmd in lines]
        if plan.report:
            cmds.append(f"{snapshot} > /tmp/modes.after")
            cmds.append(f"mkdir -p {plan.report.rsplit('/', 1)[0]}")
            cmds.append(
                "LC_ALL=C join -t$'\\t' /tmp/modes.before /tmp/modes.after "
                f"| awk -F'\\t' -v OFS='\\t' '$2 != $3' > {plan.report}"
            )
        return "\n".join(cmds) + "\n"


MODES_OF = """
    def _modes():
        paths = {rel: os.path.join(BASE, rel) for rel in FINAL}
        return {rel: f"{os.stat(path).st_mode & 0o7777:o}" for rel, path in paths.items()}
"""
INITIAL = """
    def test_initial_modes():
        assert _modes() == INITIAL
"""
COMPLETION = """
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
"""
LEVELED = """
    def test_links_kept():
        for rel, target in LINKS.items():
            path = os.path.join(BASE, rel)
            assert os.path.islink(path) and os.readlink(path) == target, rel


    def test_changes_reported():
        if REPORT:
            with open(REPORT) as fh:
                got = {tuple(line.rsplit(None, 2)) for line in fh if line.strip()}
            changed = {(rel, INITIAL[rel], mode) for rel, mode in FINAL.items()}
            assert got == {c for c in changed if c[1] != c[2] and not c[0].startswith("/")}
"""
