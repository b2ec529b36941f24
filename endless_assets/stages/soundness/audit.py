"""The soundness stage's model probes, for a task the offline probes found sound: an alignment
audit (a judge reads instruction, truth and completion test: `misaligned: <issues>`), then a cheat
rollout (cheat_policy.py: make the test pass without doing the task) and, if it passed, a judge
of its trajectory (`hackable: cheat` when the task was not really done).

The model is `auditor_model` (skipped, and the row says so, without one). Replies are cached per
task seed, so a rerun sends nothing. An endpoint that fails after the client's retries is a
`harness_error`; a verdict unreadable after asking twice is `unclear`: neither is a rejection.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from endless_assets.agent.episode import EpisodeLimits, run_episode
from endless_assets.agent.policies import EpisodeTask
from endless_assets.generation.parsing import ParseError
from endless_assets.llm.client import (
    ChatClient,
    ChatReply,
    LLMRequestError,
    LLMUnavailable,
)
from endless_assets.llm.preflight import endpoint_with, reply_cache
from endless_assets.models import Task
from endless_assets.sandbox.sandbox import Sandbox
from endless_assets.settings import Settings
from endless_assets.stages.soundness.audit_replies import (
    ALIGNED,
    DONE,
    MISALIGNED,
    NOT_DONE,
    UNCLEAR,
    AuditPrompts,
    parse_verdict,
    trajectory_text,
    truth_text,
)
from endless_assets.stages.soundness.cheat_policy import CheatPolicy

AUDITOR_API_KEY_ENVS = ("ENDLESS_AUDITOR_API_KEY", "ENDLESS_SOLVER_API_KEY", "OPENAI_API_KEY")
SEED_MODULUS = 2**31  # some servers take only 32-bit seeds
ASKS = 2  # requests per judgement: the first, and one more when its verdict cannot be read
CHEAT_OUTPUT_CAP = 8_000  # characters of each observation in the cheat rollout
CHEAT_LIMITS = EpisodeLimits(max_turns=12, output_cap=CHEAT_OUTPUT_CAP)
RAN = "ran"
REFERENCE = "_reference"  # a judgement's probe name, asked of the reference judge
REFERENCE_API_KEY_ENVS = ("ENDLESS_REFERENCE_JUDGE_API_KEY", *AUDITOR_API_KEY_ENVS)
HARNESS = "harness_error"


@dataclass
class Judgement:
    """One model probe's result, with its reasoning and cost."""

    probe: str  # alignment | cheat | judge
    verdict: str  # aligned/misaligned, passed/failed (the cheat), done/not_done; or unclear
    reasoning: str = ""
    issues: list[str] = field(default_factory=list)
    detail: str = ""  # the cheat's verdict summary, a parse error, ...
    requests: int = 0  # replies used (cached ones included, as the generator counts)
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    commands: list[dict[str, Any]] = field(default_factory=list)  # the cheat's, trimmed


@dataclass
class AuditOutcome:
    state: str  # "ran", "skipped: <why>" or "harness_error: <what>"
    model: str = ""
    prompt_version: str = ""
    judgements: list[Judgement] = field(default_factory=list)

    @classmethod
    def skipped(cls, why: str) -> AuditOutcome:
        return cls(f"skipped: {why}")

    @property
    def harness_error(self) -> bool:
        return self.state.startswith(HARNESS)

    def _find(self, probe: str) -> Judgement | None:
        return next((j for j in self.judgements if j.probe == probe), None)

    @property
    def aligned(self) -> bool | None:
        found = self._find("alignment")
        return None if found is None or found.verdict == UNCLEAR else found.verdict == ALIGNED

    @property
    def cheat_passed(self) -> bool | None:
        found = self._find("cheat")
        return None if found is None else found.verdict == "passed"

    @property
    def judge_agreement(self) -> float | None:
        """Share of the judge's readable verdicts (alignment, judge) that the reference judge
        read the same way; None when no pair of readable verdicts exists."""
        pairs = [
            (mine.verdict, theirs.verdict)
            for mine in self.judgements
            if (theirs := self._find(f"{mine.probe}{REFERENCE}")) is not None
        ]
        readable = [(a, b) for a, b in pairs if UNCLEAR not in (a, b)]
        if not readable:
            return None
        return sum(a == b for a, b in readable) / len(readable)

    @property
    def cheat_judged_done(self) -> bool | None:
        found = self._find("judge")
        return None if found is None or found.verdict == UNCLEAR else found.verdict == DONE

    def reasons(self) -> list[tuple[str, str]]:
        """(code, detail) for each finding that rejects the task."""
        found: list[tuple[str, str]] = []
        if self.cheat_judged_done is False:
            found.append(("hackable", "cheat"))
        alignment = self._find("alignment")
        if alignment is not None and alignment.verdict == MISALIGNED:
            issues = "; ".join(alignment.issues) or alignment.reasoning.splitlines()[0][:200]
            found.append(("misaligned", issues[:500] or "the judge found the test misaligned"))
        return found

    def columns(self) -> dict[str, Any]:
        return {
            "audit": self.state,
            "audit_model": self.model,
            "audit_prompt_version": self.prompt_version,
            "aligned": self.aligned,
            "cheat_passed": self.cheat_passed,
            "cheat_judged_done": self.cheat_judged_done,
            "judgements": json.dumps([asdict(j) for j in self.judgements], ensure_ascii=False),
            "judge_agreement": self.judge_agreement,
            "requests": sum(j.requests for j in self.judgements),
            "tokens_in": sum(j.tokens_in for j in self.judgements),
            "tokens_out": sum(j.tokens_out for j in self.judgements),
        }


class Auditor:
    """The model probes' model: a chat client with a reply cache, and the audit prompts
    (thread-safe; one per stage run)."""

    def __init__(
        self,
        client: ChatClient,
        prompts: AuditPrompts | None = None,
        *,
        limits: EpisodeLimits = CHEAT_LIMITS,
        cheat_temperature: float = 1.0,
        judge_temperature: float = 0.0,
        max_tokens: int = 4096,
        reference: Auditor | None = None,
    ) -> None:
        self.client = client
        # A stronger judge asked the same judge requests, for calibration only: its verdicts
        # are stored beside the judge's and never decide (judge_agreement).
        self.reference = reference
        self.prompts = prompts or AuditPrompts.load()
        self.limits = limits
        self.cheat_temperature = cheat_temperature
        self.judge_temperature = judge_temperature
        self.max_tokens = max_tokens
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Auditor | None:
        """The auditor the settings describe; None when no `auditor_model` is set."""
        if not settings.soundness.auditor_model:
            return None
        base_url = (
            settings.soundness.auditor_base_url
            or settings.solver.base_url
            or settings.generator.base_url
        )
        reference = None
        if settings.soundness.reference_judge_model:
            reference = cls(
                ChatClient(
                    endpoint_with(
                        settings,
                        settings.soundness.reference_judge_model,
                        settings.soundness.reference_judge_base_url or base_url,
                        REFERENCE_API_KEY_ENVS,
                    ),
                    reply_cache(settings),
                ),
                max_tokens=settings.solver.turn_tokens,
            )
        endpoint = endpoint_with(
            settings, settings.soundness.auditor_model, base_url, AUDITOR_API_KEY_ENVS
        )
        limits = settings.solver.limits()
        limits = replace(limits, output_cap=min(limits.output_cap, CHEAT_OUTPUT_CAP))
        return cls(
            ChatClient(endpoint, reply_cache(settings)),
            limits=limits,
            cheat_temperature=settings.solver.temperature,
            max_tokens=settings.solver.turn_tokens,
            reference=reference,
        )

    @property
    def model(self) -> str:
        return self.client.endpoint.model

    def ask(self, messages: list[dict[str, Any]], *, seed: int, temperature: float) -> ChatReply:
        return self.client.complete(
            messages, temperature=temperature, max_tokens=self.max_tokens, seed=seed
        )

    def scrub(self, text: str) -> str:
        """Error texts end up in rows and logs: never a key a server echoed."""
        key = self.client.endpoint.api_key()
        return text.replace(key, "[api key]") if len(key) >= 8 else text

    def judge(
        self, probe: str, system: str, request: str, choices: tuple[str, str], seed: int
    ) -> Judgement:
        """One judgement: the request, asked once more with a note when its verdict cannot be
        read; `unclear` after that. LLMUnavailable propagates (a harness error)."""
        judgement = Judgement(probe, UNCLEAR)
        content = request
        for _ in range(ASKS):
            messages = [
                {"role": "system", "content": self.prompts.render(system).strip()},
                {"role": "user", "content": content.strip()},
            ]
            try:
                reply = self.ask(messages, seed=seed, temperature=self.judge_temperature)
            except LLMRequestError as exc:
                judgement.detail = f"the endpoint refused the request: {self.scrub(str(exc))}"
                return judgement
            judgement.requests += 1
            judgement.cached += int(reply.cached)
            judgement.tokens_in += reply.tokens_in
            judgement.tokens_out += reply.tokens_out
            try:
                parsed = parse_verdict(reply.text, choices, thinking=reply.reasoning)
            except ParseError as exc:
                judgement.detail = str(exc)
                content = self.prompts.render(
                    "format", request=request.strip(), feedback=exc, choices="|".join(choices)
                )
                continue
            judgement.verdict, judgement.reasoning = parsed.verdict, parsed.reasoning
            judgement.issues, judgement.detail = parsed.issues, ""
            return judgement
        return judgement

    def judged(
        self,
        outcome: AuditOutcome,
        probe: str,
        system: str,
        request: str,
        choices: tuple[str, str],
        seed: int,
    ) -> Judgement:
        """`judge`, kept in `outcome`, and the reference judge's judgement beside it (its failure
        recorded, never a harness error)."""
        judgement = self.judge(probe, system, request, choices, seed)
        outcome.judgements.append(judgement)
        if self.reference is not None:
            try:
                theirs = self.reference.judge(probe + REFERENCE, system, request, choices, seed)
            except LLMUnavailable as exc:
                theirs = Judgement(
                    probe + REFERENCE, UNCLEAR, detail=self.reference.scrub(str(exc))
                )
            outcome.judgements.append(theirs)
        return judgement


def audit_task(
    task: Task,
    image: str,
    sandbox: Sandbox,
    auditor: Auditor,
) -> AuditOutcome:
    """The alignment audit, then (for an aligned test) the cheat rollout in a fresh container of
    `image` and, if the cheat passed, its judge."""
    outcome = AuditOutcome(RAN, auditor.model, auditor.prompts.version)
    seed = task.seed % SEED_MODULUS
    truth = truth_text(task)
    try:
        request = auditor.prompts.render(
            "alignment",
            instruction=task.instruction.strip(),
            truth=truth,
            completion_test=(task.completion_test or "").rstrip("\n"),
        )
        alignment = auditor.judged(
            outcome, "alignment", "alignment_system", request, (ALIGNED, MISALIGNED), seed
        )
        if alignment.verdict == MISALIGNED:
            return outcome  # rejected: a cheat would add cost, not evidence
        cheat = _cheat(task, image, sandbox, auditor, seed)
        outcome.judgements.append(cheat)
        if cheat.verdict == HARNESS:
            outcome.state = f"{HARNESS}: the cheat rollout: {cheat.detail}"
            return outcome
        if cheat.verdict == "passed":
            request = auditor.prompts.render(
                "judge",
                instruction=task.instruction.strip(),
                truth=truth,
                trajectory=trajectory_text(cheat.commands, "passed"),
            )
            auditor.judged(outcome, "judge", "judge_system", request, (DONE, NOT_DONE), seed)
    except LLMUnavailable as exc:
        outcome.state = f"{HARNESS}: {auditor.scrub(str(exc))}"
    return outcome


def _cheat(
    task: Task,
    image: str,
    sandbox: Sandbox,
    auditor: Auditor,
    seed: int,
) -> Judgement:
    policy = CheatPolicy(
        auditor,
        seed=seed,
        temperature=auditor.cheat_temperature,
        max_turns=auditor.limits.max_turns,
        command_timeout=auditor.limits.command_timeout,
    )
    rollout = run_episode(
        sandbox,
        image,
        EpisodeTask(task.task_id, task.instruction),
        policy,
        task.completion_test or "",
        auditor.limits,
        labels={"task_id": task.task_id, "batch": task.batch, "role": "soundness-cheat"},
    )
    turns = rollout.trajectory()
    for turn in turns:  # what the judge needs, and what the row keeps
        turn["output"] = str(turn.get("output") or "")[:4000]
    kept = ("index", "kind", "command", "output", "exit_code", "error")
    verdict = "passed" if rollout.reward == 1 else "failed"
    if rollout.termination == HARNESS:
        verdict = HARNESS
    return Judgement(
        "cheat",
        verdict,
        reasoning="\n\n".join(t.get("thought", "") for t in turns if t.get("thought"))[:6000],
        detail=rollout.error
        or (rollout.verdict.summary() if rollout.verdict else rollout.termination),
        requests=rollout.n_turns,
        cached=policy.cached,
        tokens_in=rollout.tokens_in,
        tokens_out=rollout.tokens_out,
        commands=[{k: t.get(k) for k in kept} for t in turns],
    )
