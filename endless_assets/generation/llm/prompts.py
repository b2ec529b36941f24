"""The prompt templates of the LLM generator, loaded from `prompts/`.

A template file holds named sections (`=== system ===`, `=== user ===`, ...) with `{{name}}`
placeholders. Rendering demands a value for every placeholder of the section and refuses
values it does not use, so a template and the code that fills it cannot drift apart silently.
The prompt version is a hash of every template file and the taxonomy: it changes whenever the
text the model is shown can change.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from endless_assets.taxonomy import PROMPTS_DIR, TAXONOMY_FILE

TEMPLATE_NAMES = ("task", "initial_test", "environment", "completion_test", "repair")
_SECTION = re.compile(r"^=== (\w+) ===[ \t]*$", re.M)
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Template:
    name: str
    path: Path
    sections: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> Template:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PromptError(f"cannot read the prompt template {path}: {exc}") from exc
        parts = _SECTION.split(text)
        if parts[0].strip():
            raise PromptError(f"{path}: text before the first `=== section ===` line")
        sections = {parts[i]: parts[i + 1].strip("\n") + "\n" for i in range(1, len(parts) - 1, 2)}
        if not sections:
            raise PromptError(f"{path}: no `=== section ===` lines")
        return cls(path.stem, path, sections)

    def placeholders(self, section: str) -> set[str]:
        return set(_PLACEHOLDER.findall(self.section(section)))

    def section(self, section: str) -> str:
        try:
            return self.sections[section]
        except KeyError:
            raise PromptError(
                f"{self.path}: no `=== {section} ===` section (has: {', '.join(self.sections)})"
            ) from None

    def render(self, section: str, **values: str) -> str:
        text = self.section(section)
        wanted = self.placeholders(section)
        missing, unused = wanted - set(values), set(values) - wanted
        if missing or unused:
            problems = [f"no value for {', '.join(sorted(missing))}"] if missing else []
            problems += [f"no placeholder for {', '.join(sorted(unused))}"] if unused else []
            raise PromptError(f"{self.path} [{section}]: " + "; ".join(problems))
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text).strip() + "\n"


@dataclass(frozen=True)
class PromptSet:
    templates: dict[str, Template]
    version: str

    @classmethod
    def load(cls, directory: Path = PROMPTS_DIR, taxonomy: Path = TAXONOMY_FILE) -> PromptSet:
        templates = {name: Template.load(directory / f"{name}.md") for name in TEMPLATE_NAMES}
        digest = hashlib.sha256()
        for name in TEMPLATE_NAMES:
            digest.update(templates[name].path.read_bytes())
        try:
            digest.update(taxonomy.read_bytes())
        except OSError as exc:
            raise PromptError(f"cannot read the taxonomy {taxonomy}: {exc}") from exc
        return cls(templates, "llm-" + digest.hexdigest()[:12])

    def __getitem__(self, name: str) -> Template:
        return self.templates[name]

    def stage_of(self, messages: list[dict[str, str]]) -> str | None:
        """Which template's system prompt opens a conversation (for scripted models)."""
        if not messages or messages[0].get("role") != "system":
            return None
        content = messages[0].get("content", "")
        for name in TEMPLATE_NAMES:
            sections = self.templates[name].sections
            if "system" in sections and content.startswith(sections["system"].splitlines()[0]):
                return name
        return None
