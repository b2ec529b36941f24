"""The LLM generator: any OpenAI-compatible chat endpoint writes the describe, build and validation
stages of a task.

Requests per task (what a batch of N tasks costs):

- the describe stage: 1 (the task, its truth and a reference solution);
- the build stage: 2 in the first round (the initial-state test, then the Dockerfile written to pass
  it), 1 per repair round (the model sends back whichever of the two it fixed);
- the validation stage: 1, plus 1 per repair round.

So 4 requests for a task that needs no repair and at most 1 + 4 + 3 = 8 with the default 3
rounds per stage; an unusable reply counts as a round. Every reply is cached by a hash of
(model, messages, sampling parameters, seed), so re-materializing a batch with unchanged prompts
sends no request at all.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from endless_assets.generation import Environment, GenerationError, Usage, new_task
from endless_assets.generation.llm.feedback import stable_feedback
from endless_assets.generation.llm.prompts import PromptSet
from endless_assets.generation.parsing import (
    ParseError,
    parse_environment,
    parse_task,
    parse_test,
)
from endless_assets.generation.service_blocks import (
    parse_services,
    read_repair,
    render_environment,
    render_services,
    without_services,
)
from endless_assets.llm.client import ChatClient, ChatReply, LLMRequestError
from endless_assets.llm.preflight import reply_cache, require_model
from endless_assets.models import Task
from endless_assets.sandbox.image.base_image import PACKAGES
from endless_assets.settings import Settings
from endless_assets.taxonomy import Draw, Taxonomy

Messages = list[dict[str, str]]
SEED_MODULUS = 2**31  # some servers take only 32-bit seeds


def base_image_tools() -> str:
    names = {"python3-pytest": "pytest", "xz-utils": "xz"}
    return ", ".join(names.get(p, p) for p in PACKAGES if p != "ca-certificates")


class LLMGenerator:
    """Writes tasks with a chat model. Thread-safe: the stage assets call it from many threads."""

    name = "llm"
    reference_required = False  # a failing reference solution is recorded; the solver stage decides
    needs_build_network = True  # its Dockerfiles may apt-get or pip install
    cell_kind = "taxonomy"

    def __init__(
        self,
        client: ChatClient,
        base_image: str,
        *,
        prompts: PromptSet | None = None,
        taxonomy: Taxonomy | None = None,
        task_temperature: float = 1.0,
        test_temperature: float = 0.6,
        max_tokens: int = 4096,
        repair_rounds: int = 3,
        concurrency: int = 32,
        dedupe_threshold: float = 0.4,
    ) -> None:
        self.client = client
        self.base_image = base_image
        self.prompts = prompts or PromptSet.load()
        self.taxonomy = taxonomy or Taxonomy.load()
        self.task_temperature = task_temperature
        self.test_temperature = test_temperature
        self.max_tokens = max_tokens
        self.repair_rounds = repair_rounds
        self.concurrency = concurrency
        self.dedupe_threshold = dedupe_threshold
        self.version = self.prompts.version
        self._guard = threading.Lock()
        self.cache_hits = 0
        self.replies = 0

    @classmethod
    def from_settings(cls, settings: Settings, base_image: str) -> LLMGenerator:
        endpoint, _ = require_model(settings, "generator")  # named, and served there
        return cls(
            ChatClient(endpoint, reply_cache(settings)),
            base_image,
            task_temperature=settings.generator.task_temperature,
            test_temperature=settings.generator.test_temperature,
            max_tokens=settings.generator.max_tokens,
            repair_rounds=settings.generator.repair_rounds,
            concurrency=settings.llm.concurrency,
            dedupe_threshold=settings.generator.dedupe_threshold,
        )

    @property
    def model(self) -> str:
        return self.client.endpoint.model

    def parallelism(self, settings: Settings) -> int:
        """Tasks in flight per stage: enough to keep every allowed request busy. The stage
        bounds its Docker work separately (settings.workers)."""
        return max(settings.run.workers, self.concurrency)

    def run_metadata(self) -> dict[str, Any]:
        """What this step asked of the endpoint (for the asset's metadata)."""
        return {
            "llm_model": self.model,
            "llm_replies_used": self.replies,
            "llm_cache_hits": self.cache_hits,
            **self.client.report(),  # requests, timeouts, retries, the concurrency it settled on
            "prompt_version": self.version,
        }

    # --- the describe stage -----------------------------------------------------------------------

    def cells(self) -> list[tuple[str, str]]:
        """Every (category, complexity) of the taxonomy, category by category."""
        return [
            (c.name, x.name) for c in self.taxonomy.categories for x in self.taxonomy.complexities
        ]

    def describe(self, batch: str, index: int, seed: int) -> tuple[Task, Usage]:
        """The task at `index` of `batch`, its place in the taxonomy drawn by its seed."""
        return self._describe(batch, index, seed, self.taxonomy.draw(seed))

    def describe_cell(
        self, batch: str, index: int, seed: int, name: str, grade: str
    ) -> tuple[Task, Usage]:
        """The task at `index` of `batch` in category `name` at complexity `grade` (its
        scenario still drawn by its seed)."""
        return self._describe(batch, index, seed, self.taxonomy.draw_cell(seed, name, grade))

    def describe_variant(
        self, batch: str, index: int, seed: int, name: str, grade: str, parent: Task
    ) -> tuple[Task, Usage]:
        """A variant of `parent` in category `name` at complexity `grade`: the model is shown
        the parent's request and truth and asked for the same kind of work a level harder (or
        easier), still checkable from files on disk. It records `parent_task_id`."""
        draw = self.taxonomy.draw_cell(seed, name, grade)
        harder = draw.level > (self.taxonomy.level_of(parent.complexity) or 0)
        variant = self.prompts["task"].render(
            "variant",
            direction="harder" if harder else "easier",
            record="solved in every attempt" if harder else "never solved",
            how="more steps, more files, edge cases or traps in the data, as its guidance asks"
            if harder
            else "fewer steps and files, and only the traps its guidance asks for",
            parent_category=parent.category,
            parent_complexity=parent.complexity,
            parent_instruction=parent.instruction.strip(),
            parent_truth=_truth_text(parent).strip(),
            **self._placement(draw),
        )
        draft, usage = self._describe(batch, index, seed, draw, variant)
        return draft.model_copy(update={"parent_task_id": parent.task_id}), usage

    def _placement(self, draw: Draw) -> dict[str, str]:
        return {
            "category": draw.category,
            "complexity": draw.complexity,
            "complexity_hint": draw.complexity_hint or draw.complexity,
            "level": str(draw.level),
            "levels": str(draw.levels),
            "scenario": draw.scenario,
            "services": "\n" + self.prompts["task"].render("services", base_image=self.base_image)
            if draw.services
            else "",
        }

    def _describe(
        self, batch: str, index: int, seed: int, draw: Draw, request: str | None = None
    ) -> tuple[Task, Usage]:
        usage = Usage()
        if request is None:
            request = self.prompts["task"].render("user", **self._placement(draw))
        messages = [self._system("task"), {"role": "user", "content": request}]
        reply = self._ask(messages, self.task_temperature, seed, usage, code="request_refused")
        with self._unusable(reply, usage, code="unusable_task"):
            services = parse_services(reply.text, self.base_image)
            parsed = parse_task(without_services(reply.text))
        try:
            task = new_task(
                self,
                batch,
                index,
                seed,
                category=draw.category,
                complexity=draw.complexity,
                scenario=draw.scenario,
                instruction=parsed.instruction,
                truth={"text": parsed.truth},
                reference_solution=parsed.solution,
                services=services,
            )
        except ValidationError as exc:
            raise _error(f"unusable_task: {exc.errors()[0]['msg']}", usage) from exc
        return task, usage

    # --- the build stage --------------------------------------------------------------------------

    def write_environment(
        self, draft: Task, feedback: str | None, previous: Environment | None
    ) -> tuple[Environment, Usage]:
        """Round 1: the initial-state test, then the Dockerfile that passes it. A later round
        repairs what failed: an unusable reply is asked again with the reason; a failed build or
        initial test goes back to the model with the log, and it resends what it fixed."""
        usage = Usage()
        test = previous.initial_test if previous else ""
        dockerfile = previous.dockerfile if previous else ""
        if not test:
            test = self._initial_test(draft, feedback, usage)
            feedback = None
        if not dockerfile:
            dockerfile, files = self._dockerfile(draft, test, feedback, usage)
            return Environment(dockerfile, files, test), usage
        assert previous is not None
        if feedback is None:
            return previous, usage
        return self._repair_environment(draft, previous, feedback, usage), usage

    def _initial_test(self, draft: Task, feedback: str | None, usage: Usage) -> str:
        request = self.prompts["initial_test"].render(
            "user", instruction=draft.instruction, truth=_truth_text(draft)
        )
        messages = [self._system("initial_test"), self._user(request, feedback)]
        reply = self._ask(messages, self.test_temperature, draft.seed, usage)
        with self._unusable(reply, usage):
            return parse_test(reply.text, "initial-state test")

    def _dockerfile(
        self, draft: Task, test: str, feedback: str | None, usage: Usage
    ) -> tuple[str, dict[str, str]]:
        request = self._environment_request(draft, test)
        messages = [self._system("environment"), self._user(request, feedback)]
        reply = self._ask(messages, self.test_temperature, draft.seed, usage)
        partial = Environment("", {}, test)
        with self._unusable(reply, usage, partial=partial):
            parsed = parse_environment(reply.text, self.base_image)
        assert parsed.dockerfile is not None
        return parsed.dockerfile, parsed.files

    def _repair_environment(
        self, draft: Task, previous: Environment, feedback: str, usage: Usage
    ) -> Environment:
        messages = [
            self._system("environment"),
            {"role": "user", "content": self._environment_request(draft, previous.initial_test)},
            {"role": "assistant", "content": render_environment(previous)},
            {
                "role": "user",
                "content": self.prompts["repair"].render(
                    "environment", feedback=stable_feedback(feedback)
                ),
            },
        ]
        reply = self._ask(messages, self.test_temperature, draft.seed, usage)
        with self._unusable(reply, usage, partial=previous):
            return read_repair(reply.text, self.base_image, previous, draft.services)

    def _environment_request(self, draft: Task, test: str) -> str:
        return self.prompts["environment"].render(
            "user",
            instruction=draft.instruction,
            truth=_truth_text(draft),
            initial_test=test.rstrip("\n"),
            services=self._services("environment", draft),
        )

    def _services(self, template: str, draft: Task) -> str:
        """The template's `services` section showing the task's services ("" without any)."""
        if not draft.services:
            return ""
        return "\n" + self.prompts[template].render(
            "services", services=render_services(draft.services)
        )

    # --- the validation stage ---------------------------------------------------------------------

    def write_completion_test(
        self, draft: Task, feedback: str | None, previous: str | None
    ) -> tuple[str, Usage]:
        usage = Usage()
        request = self.prompts["completion_test"].render(
            "user",
            instruction=draft.instruction,
            truth=_truth_text(draft),
            dockerfile=(draft.dockerfile or "").rstrip("\n"),
            initial_test=(draft.initial_test or "").rstrip("\n"),
            services=self._services("completion_test", draft),
        )
        messages = [self._system("completion_test")]
        if previous and feedback:
            messages += [
                {"role": "user", "content": request},
                {"role": "assistant", "content": f"```python\n{previous.rstrip()}\n```\n"},
                {
                    "role": "user",
                    "content": self.prompts["repair"].render(
                        "completion_test", feedback=stable_feedback(feedback)
                    ),
                },
            ]
        else:
            messages.append(self._user(request, feedback))
        reply = self._ask(messages, self.test_temperature, draft.seed, usage)
        with self._unusable(reply, usage):
            return parse_test(reply.text, "completion test"), usage

    # --- plumbing ---------------------------------------------------------------------------

    def _system(self, template: str) -> dict[str, str]:
        values = {}
        wanted = self.prompts[template].placeholders("system")
        if "base_image" in wanted:
            values["base_image"] = self.base_image
        if "tools" in wanted:
            values["tools"] = base_image_tools()
        return {"role": "system", "content": self.prompts[template].render("system", **values)}

    def _user(self, request: str, feedback: str | None) -> dict[str, str]:
        """The request, with the reason the previous reply was unusable folded in (one user
        message: some chat templates refuse two user turns in a row)."""
        if not feedback:
            return {"role": "user", "content": request}
        content = self.prompts["repair"].render(
            "format",
            request=request.rstrip("\n"),
            feedback=stable_feedback(feedback).rstrip(". \n"),
        )
        return {"role": "user", "content": content}

    def _ask(
        self, messages: Messages, temperature: float, seed: int, usage: Usage, code: str = ""
    ) -> ChatReply:
        """One reply, its cost added to `usage`. A request the endpoint refuses (400, e.g. a
        context too long) is the task's problem, not the harness's: a GenerationError."""
        try:
            reply = self.client.complete(
                messages,
                temperature=temperature,
                max_tokens=self.max_tokens,
                seed=seed % SEED_MODULUS,
            )
        except LLMRequestError as exc:
            raise _error(_coded(code, f"the endpoint refused the request: {exc}"), usage) from exc
        usage.add(Usage(1, reply.tokens_in, reply.tokens_out, int(reply.cached)))
        with self._guard:
            self.replies += 1
            self.cache_hits += int(reply.cached)
        return reply

    @contextlib.contextmanager
    def _unusable(
        self,
        reply: ChatReply,
        usage: Usage,
        *,
        code: str = "",
        partial: Environment | None = None,
    ) -> Iterator[None]:
        """Turn a parse failure into a GenerationError saying why (the describe stage rows carry a
        reason code; the build and validation stages add their own). `partial` is what the stage may
        keep."""
        try:
            yield
        except ParseError as exc:
            note = ""
            if reply.finish_reason == "length":
                note = f" (the reply was cut off at max_tokens={self.max_tokens})"
            raise _error(_coded(code, f"{exc}{note}"), usage, partial) from exc


def _error(message: str, usage: Usage, partial: Environment | None = None) -> GenerationError:
    return GenerationError(message, usage=usage, partial=partial)


def _coded(code: str, message: str) -> str:
    return f"{code}: {message}" if code else message


def _truth_text(draft: Task) -> str:
    text = draft.truth.get("text")
    return str(text) if text else draft.truth_json()
