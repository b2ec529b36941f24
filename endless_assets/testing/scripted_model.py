"""A stand-in for a language model, for tests and benchmarks: answers the LLM generator's
prompts (served by `testing/scripted_server.py` over real HTTP) with small, valid terminal tasks, or
with the faults a test asks for.

Every request of a task carries the task's seed, so the script knows which task it is
answering and can hold per-task behaviour across stages and rounds:

    model = ScriptedTaskModel(base_image, behaviours={seed: {"build_fails_once"}})
    with ScriptedServer(model) as server: ...

Behaviours: `think` (a reasoning block and prose around the answer), `truncated` (a describe stage
reply cut off inside its last section, finish_reason "length"), `no_task` (no <task> section),
`duplicate_of:<seed>` (the instruction of another task with one word changed), `rate_limited` (the
first the describe stage request gets a 429, the second a 500), `bad_from_once` (the first
Dockerfile names another base image), `build_fails_once` / `build_always_fails`,
`completion_passes_once` / `completion_always_passes` (a completion test that already passes on the
initial state), `reference_fails` (a reference solution that writes the wrong output),
`completion_exists_only` (a completion test that only checks that the output file exists and is not
empty: hackable), `completion_flaky` (a completion test that fails every other time it runs in a
container: a deterministic stand-in for one that fails at random half the time), `fetch_input:<url>`
(the Dockerfile downloads input.txt from `url` at build time instead of copying it: a dependency
that can drift), `service` (the task declares a service `web`, a small HTTP server),
`service_fails_once` (that service's first command exits at once; the build stage's repair resends
its block fixed). `every` gives flags to every task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from endless_assets.generation.llm.prompts import PromptSet
from endless_assets.testing.scripted_server import Reply, ScriptedResponder

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "fi", "do", "gu"]
ACTIONS = {
    "upper": ("upper-cased", "tr a-z A-Z < {src} > {dst}"),
    "sort": ("sorted alphabetically", "LC_ALL=C sort {src} > {dst}"),
    "reverse": ("in reverse order", "tac {src} > {dst}"),
    "first": ("reduced to its first line", "head -n 1 {src} > {dst}"),
    "last": ("reduced to its last line", "tail -n 1 {src} > {dst}"),
}


def _word(rng: random.Random, syllables: int = 3) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables))


@dataclass(frozen=True)
class ScriptedTask:
    seed: int
    project: str
    word: str
    action: str
    lines: tuple[str, ...]
    filler: str

    @classmethod
    def from_seed(cls, seed: int) -> ScriptedTask:
        rng = random.Random(seed)
        return cls(
            seed=seed,
            project=_word(rng) + str(rng.randint(10, 99)),
            word=_word(rng, 4),
            action=rng.choice(sorted(ACTIONS)),
            lines=tuple(_word(rng) for _ in range(5)),
            filler=" ".join(_word(rng, 2) for _ in range(30)),
        )

    @property
    def directory(self) -> str:
        return f"/home/user/{self.project}"

    @property
    def expected(self) -> list[str]:
        lines = list(self.lines)
        return {
            "upper": [line.upper() for line in lines],
            "sort": sorted(lines),
            "reverse": lines[::-1],
            "first": lines[:1],
            "last": lines[-1:],
        }[self.action]

    def instruction(self, word: str | None = None) -> str:
        how = ACTIONS[self.action][0]
        return (
            f"The file {self.directory}/input.txt lists the {word or self.word} entries. I need "
            f"a copy of it at {self.directory}/output.txt with its lines {how}. Background for "
            f"the record: {self.filler}."
        )

    def solution(self, wrong: bool = False) -> str:
        if wrong:
            return f"echo nothing-useful > {self.directory}/output.txt\n"
        src, dst = f"{self.directory}/input.txt", f"{self.directory}/output.txt"
        return ACTIONS[self.action][1].format(src=src, dst=dst) + "\n"

    def truth(self) -> str:
        listing = "\n".join(f"    {line}" for line in self.lines)
        expected = "\n".join(f"    {line}" for line in self.expected)
        return (
            f"Initial state: {self.directory}/input.txt owned by user, with the lines:\n"
            f"{listing}\n"
            f"Expected end state: {self.directory}/output.txt holds exactly the lines:\n"
            f"{expected}\n"
            "Invariants: input.txt is unchanged."
        )

    def initial_test(self) -> str:
        return (
            "import os\n\n\n"
            "def test_input_is_there():\n"
            f"    path = '{self.directory}/input.txt'\n"
            "    assert os.path.isfile(path), f'{path} is missing'\n"
            "    with open(path) as fh:\n"
            f"        assert fh.read().split() == {list(self.lines)!r}\n"
        )

    def completion_test(
        self, passes_on_initial: bool = False, flags: frozenset = frozenset()
    ) -> str:
        if passes_on_initial:
            return (
                f"import os\n\n\ndef test_output():\n    assert os.path.isdir('{self.directory}')\n"
            )
        path = f"    path = '{self.directory}/output.txt'\n"
        if "completion_exists_only" in flags:
            return (
                "import os\n\n\ndef test_output():\n" + path + "    assert os.path.isfile(path), "
                "f'{path} was not written'\n    assert os.path.getsize(path) > 0, 'it is empty'\n"
            )
        test = (
            "import os\n\n\n"
            "def test_output():\n"
            + path
            + "    assert os.path.isfile(path), f'{path} was not written'\n"
            "    with open(path) as fh:\n"
            f"        assert fh.read().split() == {self.expected!r}, 'wrong lines'\n"
        )
        if "completion_flaky" in flags:  # a counter the grader may write, outside /home/user
            test += (
                "\n\ndef test_luck():\n"
                "    path = '/etc/endless-test-verdicts'\n"
                "    count = int(open(path).read()) + 1 if os.path.exists(path) else 1\n"
                "    with open(path, 'w') as fh:\n"
                "        fh.write(str(count))\n"
                "    assert count % 2 == 1, 'unlucky'\n"
            )
        return test

    def dockerfile(self, base_image: str, fail: bool = False, fetch_from: str = "") -> str:
        target = f"{self.directory}/input.txt"
        get = f"COPY --chown=user:user seed/input.txt {target}"
        if fetch_from:
            get = (
                'RUN python3 -c "import urllib.request; '
                f"urllib.request.urlretrieve('{fetch_from}', '{target}')\""
            )
        lines = [
            f"FROM {base_image}",
            f"RUN mkdir -p {self.directory}",
            get,
            f"RUN chown -R user:user {self.directory}",
        ]
        if fail:
            lines.append(f"RUN echo 'preparing {self.project}' && exit 3")
        return "\n".join(lines) + "\n"

    def service(self, base_image: str, broken: bool = False) -> str:
        """A `<service>` block: an HTTP server named web serving a page that names the task
        (`broken`: its command runs a script the image does not have, so it exits at once)."""
        command = "python3 /srv/app.py" if broken else "python3 -m http.server 8080 -d /srv/www"
        probe = "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/', timeout=2)"
        return (
            f'<service name="web">\ncommand: {command}\nready: python3 -c "{probe}"\n'
            f"ready_seconds: 20\nenv: PAGE_OWNER={self.project}\n```dockerfile\n"
            f"FROM {base_image}\nRUN mkdir -p /srv/www && echo {self.word} > /srv/www/index.html\n"
            "```\n</service>\n"
        )


class ScriptedTaskModel(ScriptedResponder):
    """A responder for `ScriptedServer`: see the module docstring."""

    def __init__(
        self,
        base_image: str,
        behaviours: dict[int, set[str]] | None = None,
        *,
        every: set[str] | None = None,
        latency: float = 0.0,
        prompts: PromptSet | None = None,
    ) -> None:
        super().__init__(behaviours, every)
        self.base_image = base_image
        self.latency = latency
        self.prompts = prompts or PromptSet.load()

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        stage = self.prompts.stage_of(messages)
        seed, call, flags = self.count(request, stage or "?")
        task = ScriptedTask.from_seed(seed)
        repair = any(m.get("role") == "assistant" for m in messages)
        retry = "(Note: " in str(messages[-1].get("content", "")) if messages else False
        if stage == "task":
            if "rate_limited" in flags and call <= 2:
                return Reply(status=429 if call == 1 else 500)
            return self._task(task, flags)
        if stage == "initial_test":
            return self._reply(f"```python\n{task.initial_test()}```\n")
        if stage == "environment":
            return self._environment(task, flags, repair=repair, retry=retry)
        if stage == "completion_test":
            passes = "completion_always_passes" in flags or (
                "completion_passes_once" in flags and not repair
            )
            # No language on the fence: real models do that too.
            test = task.completion_test(passes, frozenset(flags))
            return self._reply(f"Here it is.\n\n```\n{test}```\n")
        return self.unknown()

    def _reply(self, text: str, finish_reason: str = "stop") -> Reply:
        return Reply(text, delay=self.latency, finish_reason=finish_reason)

    def _task(self, task: ScriptedTask, flags: set[str]) -> Reply:
        instruction = task.instruction()
        for flag in flags:
            if flag.startswith("duplicate_of:"):
                original = ScriptedTask.from_seed(int(flag.split(":", 1)[1]))
                instruction = original.instruction(word="renamed")
        solution = task.solution(wrong="reference_fails" in flags)
        parts = []
        if "think" in flags:
            parts.append(
                "<think>\nThe user wants a file task. I will write <task> and <truth> sections."
                "\n</think>\n\nSure! Here is a task that fits.\n"
            )
        if "no_task" not in flags:
            parts.append(f"<task>\n  {instruction}\n</task>\n")
        parts.append(f"<truth>\n{task.truth()}\n</truth>\n")
        if "truncated" in flags:
            parts.append(f"<solution>\n```bash\n{solution}")
            return self._reply("".join(parts), finish_reason="length")
        parts.append(f"<solution>\n```bash\n{solution}```\n</solution>\n")
        if flags & {"service", "service_fails_once"}:
            parts.append(task.service(self.base_image, broken="service_fails_once" in flags))
        if "think" in flags:
            parts.append("\nLet me know if you want a harder variant.\n")
        return self._reply("".join(parts))

    def _environment(
        self, task: ScriptedTask, flags: set[str], *, repair: bool, retry: bool
    ) -> Reply:
        files = '<file path="seed/input.txt">\n' + "\n".join(task.lines) + "\n</file>\n"
        if "bad_from_once" in flags and not retry and not repair:
            dockerfile = task.dockerfile("ubuntu:22.04")
            return self._reply(f"```dockerfile\n{dockerfile}```\n{files}")
        if repair and "service_fails_once" in flags:  # resend only the service, fixed
            return self._reply(f"The server script was missing.\n\n{task.service(self.base_image)}")
        fail = "build_always_fails" in flags or ("build_fails_once" in flags and not repair)
        fetch = next((f.split(":", 1)[1] for f in flags if f.startswith("fetch_input:")), "")
        dockerfile = task.dockerfile(self.base_image, fail=fail, fetch_from=fetch)
        if repair:  # send only the fixed Dockerfile: the files stay as they were
            return self._reply(f"Fixed the build.\n\n```dockerfile\n{dockerfile}```\n")
        return self._reply(f"Here is the Dockerfile.\n\n```dockerfile\n{dockerfile}```\n\n{files}")
