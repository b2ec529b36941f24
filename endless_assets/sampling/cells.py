"""Cells, what a task is drawn as: a taxonomy (category, complexity) for LLM-written tasks or a
family (family, level) for procedural ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("taxonomy", "family")
LEVELS = (1, 2, 3, 4, 5, 6)  # the procedural families' complexity levels, simplest first


@dataclass(frozen=True, order=True)
class Cell:
    """What a task is drawn as: `taxonomy` with key (category, complexity) for LLM-written
    tasks, or `family` with key (family, level 1-6) for procedural ones."""

    kind: str
    key: tuple[str, Any]

    def __post_init__(self) -> None:
        if self.kind not in KINDS or len(self.key) != 2 or not self.key[0]:
            raise ValueError(f"a cell is (taxonomy|family, (name, grade)), got {self!r}")
        grade = self.key[1]
        if self.kind == "family" and (type(grade) is not int or grade not in LEVELS):
            raise ValueError(f"a family cell's level is an integer from 1 to 6, got {grade!r}")
        if self.kind == "taxonomy" and (not isinstance(grade, str) or not grade):
            raise ValueError(f"a taxonomy cell's complexity is a name, got {grade!r}")

    @classmethod
    def taxonomy(cls, category: str, complexity: str) -> Cell:
        return cls("taxonomy", (category, complexity))

    @classmethod
    def family(cls, family: str, level: int) -> Cell:
        return cls("family", (family, level))

    @property
    def id(self) -> str:
        """`taxonomy:<category>:<complexity>` or `family:<family>:<level>`."""
        return f"{self.kind}:{self.key[0]}:{self.key[1]}"

    def columns(self) -> dict[str, Any]:
        """The cell as the columns every sampling table shares (store/schemas/draws.py `Cells`)."""
        taxonomy = self.kind == "taxonomy"
        return {
            "cell": self.id,
            "kind": self.kind,
            "category": self.key[0] if taxonomy else None,
            "complexity": self.key[1] if taxonomy else None,
            "family": None if taxonomy else self.key[0],
            "level": None if taxonomy else self.key[1],
        }

    @classmethod
    def from_columns(cls, row: Mapping[str, Any]) -> Cell:
        if row["kind"] == "family":
            return cls.family(row["family"], int(row["level"]))
        return cls.taxonomy(row["category"], row["complexity"])


def family_cells(families: Iterable[str], levels: Iterable[int] = LEVELS) -> list[Cell]:
    return [Cell.family(name, level) for name in families for level in levels]


def taxonomy_cells(categories: Iterable[str], complexities: Sequence[str]) -> list[Cell]:
    return [Cell.taxonomy(category, c) for category in categories for c in complexities]
