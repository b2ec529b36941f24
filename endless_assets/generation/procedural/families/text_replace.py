"""Text processing: rename a host across some config files only, leaving everything else intact."""

from __future__ import annotations

import random
import re

from endless_assets.generation.procedural.base import PROJECTS, SERVICES, Family, FamilyTask, dedent
from endless_assets.generation.procedural.render import render_test, sha256

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


class TextReplace(Family):
    name = "text_replace"
    category = "awk and sed text processing"

    def make(self, rng: random.Random) -> FamilyTask:
        project = rng.choice(PROJECTS)
        role = rng.choice(ROLES)
        domain = rng.choice(DOMAINS)
        n_old = rng.randint(1, 8)
        old = f"{role}{n_old}.{domain}"
        new = rng.choice([f"{role}{n_old + 1}.{domain}", f"{role}{n_old}.{rng.choice(DOMAINS)}"])
        if new == old:
            new = f"{role}-new.{domain}"
        trap = rng.choice(TRAP_PREFIXES) + old if rng.random() < 0.7 else ""
        skip_comments = rng.random() < 0.5
        base = f"/home/user/{rng.choice(['configs', 'etc', 'deploy'])}/{project}"

        def line(host: str | None = None) -> str:
            fill = {
                "n": rng.randint(5, 500),
                "d": rng.randint(1, 9),
                "level": rng.choice(["info", "warn", "debug"]),
                "port": rng.choice([5432, 6379, 8080, 9200, 5672]),
                "svc": rng.choice(SERVICES),
            }
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

        services = rng.sample(SERVICES, rng.randint(3, 5))
        files: dict[str, str] = {}
        targets = []
        for i, svc in enumerate(services):
            rel = f"{svc}.conf" if i % 2 == 0 else f"services/{svc}.conf"
            files[rel] = conf(rng.randint(1, 3) if i < len(services) - 1 else 0)
            targets.append(rel)
        backup = rng.choice(targets[:-1])
        files[backup + ".bak"] = files[backup]
        files["README.md"] = (
            f"# {project} configuration\n\nThe {role} backend lives on {old} (see *.conf).\n"
        )
        files[f"notes/{role}-migration.txt"] = f"{old} -> {new}\nscheduled for next sprint\n"

        expected: dict[str, str] = {}
        for rel, text in files.items():
            if rel in targets:
                lines = text.split("\n")
                text = "\n".join(_sub(ln, old, new, skip_comments) for ln in lines)
            expected[rel] = text
        changed = {rel: expected[rel] for rel in targets if expected[rel] != files[rel]}
        untouched = {rel: sha256(text) for rel, text in files.items() if rel not in changed}

        rules = [
            f"In every `.conf` file under {base} (subfolders included), replace the hostname "
            f"`{old}` with `{new}`."
        ]
        if trap:
            rules.append(
                f"Only that exact hostname: `{trap}` is a different machine and must keep its name."
            )
        if skip_comments:
            rules.append("Leave commented-out lines (starting with `#`) exactly as they are.")
        rules.append(
            "Nothing else may change: the backup copies (`*.bak`), the README and the notes must "
            "stay byte-for-byte identical, and so must every other line."
        )
        instruction = f"We're moving the {project} {role} backend from {old} to {new}. " + " ".join(
            rules
        )

        old_re = re.escape(old).replace("\\-", "-")
        cond = r"/^[[:space:]]*#/!" if skip_comments else ""
        solution = dedent(f"""
            find {base} -type f -name '*.conf' -exec sed -i -E \\
              '{cond}s/(^|[^A-Za-z0-9.-]){old_re}([^A-Za-z0-9.-]|$)/\\1{new}\\2/g' {{}} +
        """)
        consts = {
            "BASE": base,
            "EXPECTED": changed,
            "UNTOUCHED": untouched,
            "OLD": old,
        }
        initial_test = render_test(
            ["os"],
            consts,
            """
            def test_configs_present():
                for rel in list(EXPECTED) + list(UNTOUCHED):
                    assert os.path.isfile(os.path.join(BASE, rel)), rel


            def test_old_host_still_in_use():
                for rel in EXPECTED:
                    with open(os.path.join(BASE, rel)) as fh:
                        assert OLD in fh.read()
        """,
        )
        completion_test = render_test(
            ["hashlib", "os"],
            consts,
            """
            def test_renamed_files():
                for rel, text in EXPECTED.items():
                    with open(os.path.join(BASE, rel)) as fh:
                        got = fh.read()
                    assert got.rstrip("\\n").split("\\n") == text.rstrip("\\n").split("\\n"), rel


            def test_other_files_byte_identical():
                for rel, digest in UNTOUCHED.items():
                    with open(os.path.join(BASE, rel), "rb") as fh:
                        assert hashlib.sha256(fh.read()).hexdigest() == digest, rel
        """,
        )
        return FamilyTask(
            instruction=instruction,
            truth={"base": base, "old": old, "new": new, "trap": trap, "changed": sorted(changed)},
            files={
                f"{base.removeprefix('/home/user/')}/{rel}": text for rel, text in files.items()
            },
            initial_test=initial_test,
            completion_test=completion_test,
            solution=solution,
            complexity="hard" if skip_comments and trap else "medium" if trap else "easy",
            scenario="sysadmin migrating a backend host",
        )
