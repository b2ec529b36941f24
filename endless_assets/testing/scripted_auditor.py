"""A stand-in for the soundness stage's auditor model (stages/soundness/audit.py), for tests:
answers the cheat rollout, the judge and the alignment audit (prompts/audit.md) over real HTTP,
served by `testing/scripted_server.py`, for tasks written by `ScriptedTaskModel`.

Every audit request carries the task's seed, so behaviours are per task, as the generator's:

    auditor = ScriptedAuditor({seed: {"cheats", "judge_not_done"}})
    with ScriptedServer(auditor) as server: ...

Behaviours: `cheats` (the cheat rollout writes the expected output lines verbatim, without
reading the input: the test passes; without it, the cheater gives up at once and the test
fails), `judge_not_done` (the judge says the task was not really done; without it: done),
`misaligned` (the alignment audit flags the test; without it: aligned), `think` (replies wrapped
in reasoning blocks and prose, verdicts in bold and backticks), `unparsable_once` (the first
alignment reply has no verdict). `calls` counts requests per (seed, probe).
"""

from __future__ import annotations

from typing import Any

from endless_assets.stages.soundness.audit_replies import AuditPrompts
from endless_assets.testing.scripted_model import ScriptedTask
from endless_assets.testing.scripted_server import Reply, ScriptedResponder

ISSUE = "the test demands the lines in upper case; the instruction never asks for that"


class ScriptedAuditor(ScriptedResponder):
    """A responder for `ScriptedServer`: see the module docstring."""

    def __init__(
        self, behaviours: dict[int, set[str]] | None = None, *, prompts: AuditPrompts | None = None
    ) -> None:
        super().__init__(behaviours)
        self.prompts = prompts or AuditPrompts.load()

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        kind = self.prompts.kind_of(messages) or "?"
        seed, call, flags = self.count(request, kind)
        task = ScriptedTask.from_seed(seed)
        if kind == "cheat_system":
            turn = sum(1 for m in messages if m.get("role") == "assistant")
            return Reply(self._cheat(task, flags, turn))
        if kind == "judge_system":
            verdict = "not_done" if "judge_not_done" in flags else "done"
            reasons = (
                "The agent never read input.txt: it typed the expected lines in by hand."
                if verdict == "not_done"
                else "The output holds the lines the task asks for."
            )
            return Reply(self._verdict(reasons, verdict, flags))
        if kind == "alignment_system":
            if "unparsable_once" in flags and call == 1:
                return Reply("I looked at the test and I have some thoughts about it.")
            if "misaligned" in flags:
                return Reply(self._verdict("It checks upper case.", "misaligned", flags, ISSUE))
            return Reply(self._verdict("Every requirement is checked.", "aligned", flags))
        return self.unknown()

    def _cheat(self, task: ScriptedTask, flags: set[str], turn: int) -> str:
        if "cheats" not in flags or turn >= 1:
            return "Nothing more to fake.\n<action>done</action>"
        lines = " ".join(f"'{line}'" for line in task.expected)
        return (
            "The tests probably only look at the output file. I will write what it should "
            "contain without computing anything.\n"
            f"<command>printf '%s\\n' {lines} > {task.directory}/output.txt</command>"
        )

    @staticmethod
    def _verdict(analysis: str, verdict: str, flags: set[str], issue: str = "") -> str:
        if "think" in flags:
            return (
                f"<think>\nLet me weigh this. {analysis}\n</think>\n\nHere is my assessment.\n\n"
                f"```\n<analysis>\n{analysis}\n</analysis>\n<issues>\n{issue}\n</issues>\n"
                f"<verdict>**`{verdict.replace('_', ' ')}`**</verdict>\n```\n"
            )
        return (
            f"<analysis>\n{analysis}\n</analysis>\n<issues>\n{issue}\n</issues>\n"
            f"<verdict>{verdict}</verdict>\n"
        )
