"""The task taxonomy: categories x complexity levels x scenario personas, kept as data.

`prompts/taxonomy.yaml` holds the paper's three axes (62 categories and 3 of ours, 6 complexity
levels, 54 personas) with optional weights; a category marked `services: true` needs a service
beside the agent's container, and its prompt shows how to declare one. The complexity levels are
ranked, simplest first, and each carries guidance for the model. The describe stage draws one
entry per axis for every task, seeded by the task's seed, so a batch always draws the same mix.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
TAXONOMY_FILE = PROMPTS_DIR / "taxonomy.yaml"
AXES = ("categories", "complexities", "scenarios")


class TaxonomyError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    name: str
    weight: float = 1.0
    hint: str = ""
    services: bool = False  # a category whose tasks need a service (a database, a server)


@dataclass(frozen=True)
class Draw:
    """One task's place in the taxonomy; `level` is the complexity's rank, 1 the simplest."""

    category: str
    complexity: str
    complexity_hint: str
    scenario: str
    level: int = 0
    levels: int = 0  # how many complexity levels there are
    services: bool = False  # the category's tasks need a service: the prompt shows the format


@dataclass(frozen=True)
class Taxonomy:
    categories: tuple[Entry, ...]
    complexities: tuple[Entry, ...]
    scenarios: tuple[Entry, ...]
    digest: str = ""  # hash of the file's text: part of the prompt version

    @classmethod
    def load(cls, path: str | Path = TAXONOMY_FILE) -> Taxonomy:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TaxonomyError(f"cannot read the taxonomy {path}: {exc}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TaxonomyError(f"{path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise TaxonomyError(f"{path} must be a mapping with keys {', '.join(AXES)}")
        unknown = set(data) - set(AXES)
        if unknown:
            raise TaxonomyError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
        axes = {axis: _entries(path, axis, data.get(axis)) for axis in AXES}
        return cls(**axes, digest=hashlib.sha256(text.encode()).hexdigest()[:16])

    def draw(self, seed: int) -> Draw:
        """The (category, complexity, scenario) of the task with this seed."""
        rng = random.Random(f"taxonomy:{seed}")
        category = _pick(rng, self.categories)
        complexity = _pick(rng, self.complexities)
        scenario = _pick(rng, self.scenarios)
        level = self.complexities.index(complexity) + 1
        return Draw(
            category.name,
            complexity.name,
            complexity.hint,
            scenario.name,
            level,
            len(self.complexities),
            category.services,
        )

    def draw_cell(self, seed: int, category: str, complexity: str) -> Draw:
        """The task with this seed placed in (`category`, `complexity`), as the describe stage's
        draw chose them; its scenario is the one `draw(seed)` gives. TaxonomyError for a name not
        listed."""
        categories = {e.name: e for e in self.categories}
        levels = {e.name: (i + 1, e) for i, e in enumerate(self.complexities)}
        if category not in categories or complexity not in levels:
            raise TaxonomyError(f"no taxonomy cell ({category!r}, {complexity!r})")
        level, entry = levels[complexity]
        drawn = self.draw(seed)
        served = categories[category].services
        return Draw(category, complexity, entry.hint, drawn.scenario, level, len(levels), served)

    def level_of(self, complexity: str) -> int | None:
        """The rank (1 = simplest) of the complexity with this name, None for a name that is
        not one of them (e.g. an unleveled procedural task's easy, medium or hard)."""
        names = [e.name for e in self.complexities]
        return names.index(complexity) + 1 if complexity in names else None


def _entries(path: Path, axis: str, raw: Any) -> tuple[Entry, ...]:
    if not isinstance(raw, list) or not raw:
        raise TaxonomyError(f"{path}: `{axis}` must be a non-empty list")
    entries: list[Entry] = []
    for i, item in enumerate(raw):
        where = f"{path}: {axis}[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise TaxonomyError(f"{where} must be a name or a mapping with `name`, got {item!r}")
        extra = set(item) - {"name", "weight", "hint", "services"}
        if extra:
            raise TaxonomyError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        name = str(item.get("name") or "").strip()
        if not name:
            raise TaxonomyError(f"{where} has no name")
        try:
            weight = float(item.get("weight", 1.0))
        except (TypeError, ValueError):
            raise TaxonomyError(f"{where} ({name}): weight must be a number") from None
        if weight < 0:
            raise TaxonomyError(f"{where} ({name}): weight must be 0 or more, got {weight}")
        services = item.get("services", False)
        if not isinstance(services, bool):
            raise TaxonomyError(f"{where} ({name}): services must be true or false")
        entries.append(Entry(name, weight, str(item.get("hint") or "").strip(), services))
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TaxonomyError(f"{path}: `{axis}` lists {', '.join(duplicates)} more than once")
    if not any(e.weight > 0 for e in entries):
        raise TaxonomyError(f"{path}: every entry of `{axis}` has weight 0")
    return tuple(entries)


def _pick(rng: random.Random, entries: tuple[Entry, ...]) -> Entry:
    return rng.choices(entries, weights=[e.weight for e in entries], k=1)[0]
