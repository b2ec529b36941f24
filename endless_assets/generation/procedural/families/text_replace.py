"""Text processing: rename a host across some config files only, leaving everything else intact.

Up the levels: more files and folders, then backups and notes that must not change, a host whose
name contains the old one, commented-out lines and look-alike `.conf.example` files to leave,
two migrations at once in a file with CRLF endings, a link that must stay a link, a mode that
must survive the edit, and a list of the files that changed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from endless_assets.generation.procedural.base import Family, FamilyTask, by_level, dedent
from endless_assets.generation.procedural.names import PROJECTS, SERVICES
from endless_assets.generation.procedural.render import extras_script, kept, render_test, sha256

DOMAINS = ["corp.internal", "prod.lan", "dc1.example.net", "infra.local", "svc.cluster.local"]
ROLES = ["db", "cache", "mq", "search", "ldap", "vault", "redis", "pg"]
TRAP_PREFIXES = ["ro-", "replica-", "stage-", "old-"]
FILLER = [
    "timeout = {n}",
    "log_level = {level}",
    "max_connections = {n}",
    "retries = {d}",
    "enabled = true",
    "pool_size = {d}",
]
USES = [
    "host = {h}",
    "url = postgres://app@{h}:5432/{svc}",
    "endpoint = https://{h}/api/v{d}",
    "upstream = {h}:{port}",
    "servers = {h}:{port},{other}:{port}",
    "health_check = http://{h}:{port}/healthz",
]
COMMENTS = ["# previously served by {h}", "# host = {h}", "# TODO: drop {h} after migration"]


def _sub(line: str, old: str, new: str, skip_comments: bool) -> str:
    if skip_comments and line.lstrip().startswith("#"):
        return line
    return re.sub(
        r"(^|[^A-Za-z0-9.-])" + re.escape(old) + r"([^A-Za-z0-9.-]|$)",
        r"\g<1>" + new + r"\g<2>",
        line,
    )


@dataclass
class Plan:
    project: str
    role: str
    base: str
    renames: list[tuple[str, str]]  # (old, new) hostnames
    trap: str  # a different host whose name contains the first old one ("" for none)
    skip_comments: bool
    files: dict[str, str] = field(default_factory=dict)  # path under base -> text
    targets: list[str] = field(default_factory=list)  # the .conf files
    level: int | None = None
    crlf: str = ""  # a target with CRLF line endings
    link: tuple[str, str] = ("", "")  # a .conf link under base -> its target (relative)
    modes: dict[str, int] = field(default_factory=dict)  # path under base -> mode to keep
    report: str = ""  # where to list the changed files

    @property
    def old(self) -> str:
        return self.renames[0][0]

    @property
    def new(self) -> str:
        return self.renames[0][1]

    def expected(self) -> dict[str, str]:
        """Every file's text once the task is done."""
        found = {}
        for rel, text in self.files.items():
            if rel in self.targets:
                for old, new in self.renames:
                    text = "\n".join(
                        _sub(ln, old, new, self.skip_comments) for ln in text.split("\n")
                    )
            found[rel] = text
        return found

    def changed(self) -> dict[str, str]:
        expected = self.expected()
        return {rel: expected[rel] for rel in self.targets if expected[rel] != self.files[rel]}


def _host(rng: random.Random, role: str, domain: str) -> tuple[str, str]:
    n_old = rng.randint(1, 8)
    old = f"{role}{n_old}.{domain}"
    new = rng.choice([f"{role}{n_old + 1}.{domain}", f"{role}{n_old}.{rng.choice(DOMAINS)}"])
    return old, new if new != old else f"{role}-new.{domain}"


class TextReplace(Family[Plan]):
    name = "text_replace"
    category = "awk and sed text processing"

    def sample(self, rng: random.Random) -> Plan:
        project = rng.choice(PROJECTS)
        role = rng.choice(ROLES)
        domain = rng.choice(DOMAINS)
        old, new = _host(rng, role, domain)
        n_old = int(old.split(".")[0].removeprefix(role))  # roles hold no digits
        trap = rng.choice(TRAP_PREFIXES) + old if rng.random() < 0.7 else ""
        skip_comments = rng.random() < 0.5
        base = f"/home/user/{rng.choice(['configs', 'etc', 'deploy'])}/{project}"

        def line(host: str | None = None) -> str:
            fill = _fill(rng)
            if host is None:
                return rng.choice(FILLER).format(**fill)
            other = trap or f"{rng.choice(ROLES)}{rng.randint(1, 9)}.{domain}"
            if other in (old, new):
                other = f"{role}{n_old + 3}.{domain}"
            return rng.choice(USES).format(h=host, other=other, **fill)

        def conf(hits: int) -> str:
            out = [f"[{rng.choice(SERVICES)}]"]
            for _ in range(rng.randint(2, 5)):
                out.append(line())
            for _ in range(hits):
                out.insert(rng.randint(1, len(out)), line(old))
            if trap:
                out.insert(rng.randint(1, len(out)), line(trap))
            if skip_comments or rng.random() < 0.3:
                out.insert(rng.randint(1, len(out)), rng.choice(COMMENTS).format(h=old))
            return "\n".join(out) + "\n"

        plan = Plan(project, role, base, [(old, new)], trap, skip_comments)
        services = rng.sample(SERVICES, rng.randint(3, 5))
        for i, svc in enumerate(services):
            rel = f"{svc}.conf" if i % 2 == 0 else f"services/{svc}.conf"
            plan.files[rel] = conf(rng.randint(1, 3) if i < len(services) - 1 else 0)
            plan.targets.append(rel)
        self._extras(rng, plan)
        return plan

    def _extras(self, rng: random.Random, plan: Plan) -> None:
        """The backup copy, the README and the notes: they name the old host and must not change."""
        backup = rng.choice(plan.targets[:-1])
        plan.files[backup + ".bak"] = plan.files[backup]
        plan.files["README.md"] = (
            f"# {plan.project} configuration\n\nThe {plan.role} backend lives on {plan.old} "
            "(see *.conf).\n"
        )
        notes = "".join(f"{old} -> {new}\n" for old, new in plan.renames)
        plan.files[f"notes/{plan.role}-migration.txt"] = notes + "scheduled for next sprint\n"

    def sample_level(self, rng: random.Random, level: int) -> Plan:
        project = rng.choice(PROJECTS)
        roles = rng.sample(ROLES, 2)
        domain = rng.choice(DOMAINS)
        renames = [_host(rng, roles[0], domain)]
        if level >= 5:
            renames.append(_host(rng, roles[1], domain))
        trap = rng.choice(TRAP_PREFIXES) + renames[0][0] if level >= 3 else ""
        base = f"/home/user/{rng.choice(['configs', 'etc', 'deploy'])}/{project}"
        plan = Plan(project, roles[0], base, renames, trap, level >= 4, level=level)
        services = rng.sample(SERVICES, by_level(level, 2, 3, 3, 4, 5, 6))
        for i, svc in enumerate(services):
            rel = f"{svc}.conf" if i % 2 == 0 else f"services/{svc}.conf"
            if level >= 5 and i == len(services) - 1:
                rel = f"services/legacy/{svc}.conf"
            plan.files[rel] = self._conf(rng, plan, domain, 1 if level == 1 else rng.randint(1, 3))
            plan.targets.append(rel)
        if level >= 2:
            self._extras(rng, plan)
        if level >= 4:
            rel = f"services/{services[0]}.conf.example"
            plan.files[rel] = self._conf(rng, plan, domain, 1)
        if level >= 5:
            plan.crlf = plan.targets[1]
            plan.files[plan.crlf] = plan.files[plan.crlf].replace("\n", "\r\n")
        if level == 6:
            plan.link = ("current.conf", plan.targets[1])
            plan.modes[plan.targets[0]] = 0o640
            plan.report = f"/home/user/reports/{project}-renamed.txt"
        return plan

    def _conf(self, rng: random.Random, plan: Plan, domain: str, hits: int) -> str:
        out = [f"[{rng.choice(SERVICES)}]"]
        out += [rng.choice(FILLER).format(**_fill(rng)) for _ in range(rng.randint(2, 5))]
        hosts = [old for old, _ in plan.renames]
        hosts = [h for h in hosts for _ in range(hits)] + ([plan.trap] if plan.trap else [])
        for host in hosts:
            other = f"{rng.choice(ROLES)}{rng.randint(10, 19)}.{domain}"
            line = rng.choice(USES).format(h=host, other=other, **_fill(rng))
            out.insert(rng.randint(1, len(out)), line)
        if plan.skip_comments:
            out.insert(rng.randint(1, len(out)), rng.choice(COMMENTS).format(h=plan.old))
        return "\n".join(out) + "\n"

    def build(self, plan: Plan) -> FamilyTask:
        rel_base = plan.base.removeprefix("/home/user/")
        truth = {"base": plan.base, "old": plan.old, "new": plan.new, "trap": plan.trap}
        truth["changed"] = sorted(plan.changed())
        setup = ""
        if plan.level is not None:
            truth["renames"] = [list(r) for r in plan.renames]
            links = {f"{plan.base}/{plan.link[0]}": plan.link[1]} if plan.link[0] else {}
            modes = {f"{plan.base}/{rel}": mode for rel, mode in plan.modes.items()}
            owned = ["/home/user/" + rel_base.split("/")[0]]
            setup = extras_script(links=links, modes=modes, owned=owned) if links else ""
        return self.task(
            plan,
            truth=truth,
            files={f"{rel_base}/{rel}": text for rel, text in plan.files.items()},
            setup_script=setup,
            complexity=("easy", "medium", "hard")[bool(plan.trap) * (1 + plan.skip_comments)],
            scenario="sysadmin migrating a backend host",
        )

    def instruction(self, plan: Plan) -> str:
        old, new, trap, base = plan.old, plan.new, plan.trap, plan.base
        rules = [
            f"In every `.conf` file under {base} (subfolders included), replace the hostname "
            f"`{old}` with `{new}`."
        ]
        if len(plan.renames) > 1:
            old2, new2 = plan.renames[1]
            rules.append(f"The same move happens for another backend: `{old2}` becomes `{new2}`.")
        if trap:
            rules.append(
                f"Only that exact hostname: `{trap}` is a different machine and must keep its name."
            )
        if plan.skip_comments:
            rules.append("Leave commented-out lines (starting with `#`) exactly as they are.")
        if plan.level is None:
            rules.append(
                "Nothing else may change: the backup copies (`*.bak`), the README and the notes "
                "must stay byte-for-byte identical, and so must every other line."
            )
        else:
            rules += self._leveled_rules(plan)
        whose = f"the {plan.project}" if plan.level is None else f"{plan.project}'s"
        return f"We're moving {whose} {plan.role} backend from {old} to {new}. " + " ".join(rules)

    def _leveled_rules(self, plan: Plan) -> list[str]:
        base, rules = plan.base, []
        rules.append(
            "Nothing else may change: every other file (backups, examples, notes) and every other "
            "line must stay byte-for-byte identical, line endings included."
        )
        if plan.link[0]:
            rules.append(
                f"{base}/{plan.link[0]} is a symbolic link and must stay one, and every file "
                "must keep its permissions."
            )
        if plan.report:
            rules.append(
                f"When you're done, list the files you changed in {plan.report}, one path "
                f"(relative to {base}) per line."
            )
        return rules

    def tests(self, plan: Plan) -> tuple[str, str]:
        changed = plan.changed()
        untouched = {rel: sha256(t) for rel, t in plan.files.items() if rel not in changed}
        consts = {"BASE": plan.base, "EXPECTED": changed, "UNTOUCHED": untouched, "OLD": plan.old}
        if plan.level is None:
            return (
                render_test(["os"], consts, PRESENT, LEGACY_INITIAL),
                render_test(["hashlib", "os"], consts, LEGACY_COMPLETION, KEPT),
            )
        del consts["OLD"]
        consts["OLDS"] = [old for old, _ in plan.renames]
        consts["LINKS"] = {plan.link[0]: plan.link[1]} if plan.link[0] else {}
        consts["MODES"] = {rel: f"{m:o}" for rel, m in plan.modes.items()}
        consts["REPORT"] = plan.report
        return (
            render_test(["os"], consts, PRESENT, INITIAL),
            render_test(["hashlib", "os"], consts, RENAMED, KEPT, COMPLETION),
        )

    def solution(self, plan: Plan) -> str:
        cond = r"/^[[:space:]]*#/!" if plan.skip_comments else ""
        edits = []
        for old, new in plan.renames:
            old_re = re.escape(old).replace("\\-", "-")
            edits.append(f"{cond}s/(^|[^A-Za-z0-9.-]){old_re}([^A-Za-z0-9.-]|$)/\\1{new}\\2/g")
        if plan.level is None:
            return dedent(f"""
                find {plan.base} -type f -name '*.conf' -exec sed -i -E \\
                  '{edits[0]}' {{}} +
            """)
        script = " ".join(f"-e '{e}'" for e in edits)
        if not plan.report:
            return f"find {plan.base} -type f -name '*.conf' -exec sed -i -E {script} {{}} +\n"
        lines = [f"cd {plan.base}"]
        lines.append("find . -type f -name '*.conf' -exec sha256sum {} + > /tmp/before.sum")
        lines.append(f"find . -type f -name '*.conf' -exec sed -i -E {script} {{}} +")
        lines.append(f"mkdir -p {plan.report.rsplit('/', 1)[0]}")
        lines.append(
            "sha256sum -c /tmp/before.sum 2>/dev/null | grep ': FAILED$' "
            f"| sed -e 's/: FAILED$//' -e 's|^\\./||' | LC_ALL=C sort > {plan.report}"
        )
        return "\n".join(lines) + "\n"


def _fill(rng: random.Random) -> dict[str, object]:
    return {
        "n": rng.randint(5, 500),
        "d": rng.randint(1, 9),
        "level": rng.choice(["info", "warn", "debug"]),
        "port": rng.choice([5432, 6379, 8080, 9200, 5672]),
        "svc": rng.choice(SERVICES),
    }


PRESENT = """
    def test_configs_present():
        for rel in list(EXPECTED) + list(UNTOUCHED):
            assert os.path.isfile(os.path.join(BASE, rel)), rel
"""
LEGACY_INITIAL = """
    def test_old_host_still_in_use():
        for rel in EXPECTED:
            with open(os.path.join(BASE, rel)) as fh:
                assert OLD in fh.read()
"""
LEGACY_COMPLETION = """
    def test_renamed_files():
        for rel, text in EXPECTED.items():
            with open(os.path.join(BASE, rel)) as fh:
                got = fh.read()
            assert got.rstrip("\\n").split("\\n") == text.rstrip("\\n").split("\\n"), rel
"""
KEPT = kept("test_other_files_byte_identical", "UNTOUCHED", "BASE")
INITIAL = """
    def test_old_hosts_still_in_use():
        for rel in EXPECTED:
            with open(os.path.join(BASE, rel)) as fh:
                assert any(old in fh.read() for old in OLDS), rel
"""
RENAMED = """
    def test_renamed_files():
        for rel, text in EXPECTED.items():
            with open(os.path.join(BASE, rel), newline="") as fh:
                got = fh.read()
            assert got.rstrip("\\r\\n") == text.rstrip("\\r\\n"), rel
"""
COMPLETION = """
    def test_links_and_modes_kept():
        for rel, target in LINKS.items():
            path = os.path.join(BASE, rel)
            assert os.path.islink(path) and os.readlink(path) == target, rel
        for rel, mode in MODES.items():
            assert f"{os.stat(os.path.join(BASE, rel)).st_mode & 0o7777:o}" == mode, rel


    def test_changes_listed():
        if REPORT:
            with open(REPORT) as fh:
                listed = [line.strip() for line in fh if line.strip()]
            assert sorted(listed) == sorted(EXPECTED)
"""
