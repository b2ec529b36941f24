"""The parts of a task compared with a benchmark's, and the words they are compared as: text
normalised (case, spacing, identifiers that always differ), split into words, each word hashed."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from endless_assets.sandbox.grading.bundle import unpack

FIELDS = ("instruction", "completion_test", "reference_solution", "dockerfile", "context_files")
# The normalised text of a field is kept (for the fuzzy ratio) up to this many words.
KEPT_TEXT_WORDS = 200
HOME = "HOME"  # placeholders: upper case, which normalised text never holds otherwise
HEX = "HEX"

# A home directory at the start of a path: /home/<anyone>, /root, ~, $HOME (each branch starts
# with its character, then looks behind it: much faster than one look-behind at every position).
_HOME = re.compile(
    r"(?:/(?<![\w.~/$-]/)(?:home/[\w.-]+|root)|~(?<![\w.~/$-]~)"
    r"|\$(?<![\w.~/$-]\$)(?:home|\{home\}))(?![\w.-])"
)
# A uuid, or a hex token of 8+ characters (`_hex` keeps those without a digit or a letter).
_HEX = re.compile(r"(?<!\w)[0-9a-f]{8}(?:(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]*)(?!\w)")
_LETTERS = re.compile(r"[a-f]")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")
_HASHES: dict[str, int] = {}  # word -> its hash, for this process
_MAX_REMEMBERED = 1 << 21


class TaskFields(Protocol):
    """What is compared of a task: our `Task` and an imported `HarborTask` both have it."""

    @property
    def instruction(self) -> str: ...

    @property
    def completion_test(self) -> str | None: ...

    @property
    def reference_solution(self) -> str: ...

    @property
    def dockerfile(self) -> str | None: ...

    @property
    def context_files(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Words:
    """A task's words, field by field: for each file of the field, the hashes of its normalised
    words (uint64, in order); and the normalised text of each field of at most KEPT_TEXT_WORDS
    words (its files joined, in name order)."""

    files: dict[str, tuple[np.ndarray, ...]]
    texts: dict[str, str]

    def count(self, field: str) -> int:
        return sum(len(words) for words in self.files.get(field, ()))


def field_texts(task: TaskFields) -> dict[str, list[str]]:
    """The texts of each field, one per file, in name order; empty texts left out. The
    completion test is its pytest file, or every text file of its tests directory (the script
    that grades included) when it carries its own verifier."""
    test = task.completion_test or ""
    verifier = unpack(test)
    tests = [t for _, t in sorted(verifier.all_files().items())] if verifier else [test]
    texts = {
        "instruction": [task.instruction],
        "completion_test": tests,
        "reference_solution": [task.reference_solution],
        "dockerfile": [task.dockerfile or ""],
        "context_files": [t for _, t in sorted(task.context_files.items())],
    }
    return {field: [t for t in found if t.strip()] for field, found in texts.items()}


def normalise(text: str) -> list[str]:
    """The words of `text`: lower case, punctuation and spacing dropped; a home directory at the
    start of a path is `HOME`, a uuid or a hex token of 8+ characters is `HEX`, and every run
    of digits is `0` (paths under /app and other workdirs are kept as they are)."""
    text = _HOME.sub(f" {HOME} ", text.lower())
    text = _DIGITS.sub("0", _HEX.sub(_hex, text))
    return _WORD.findall(text)


def _hex(match: re.Match[str]) -> str:
    token = match[0]
    return f" {HEX} " if "-" in token or (_LETTERS.search(token) and not token.isalpha()) else token


def _hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")


def word_hashes(words: list[str]) -> np.ndarray:
    """Each word's 64-bit hash, the same in every process (what the fingerprint cache keeps)."""
    if len(_HASHES) > _MAX_REMEMBERED:
        _HASHES.clear()
    values = list(map(_HASHES.get, words))
    if None in values:
        for i, value in enumerate(values):
            if value is None:
                values[i] = _HASHES[words[i]] = _hash(words[i])
    return np.array(values, dtype=np.uint64)


def task_words(task: TaskFields) -> Words:
    """`task`'s words, every field."""
    files: dict[str, tuple[np.ndarray, ...]] = {}
    texts: dict[str, str] = {}
    for field, found in field_texts(task).items():
        words = [normalise(text) for text in found]
        files[field] = tuple(word_hashes(w) for w in words if w)
        if 0 < sum(map(len, words)) <= KEPT_TEXT_WORDS:
            texts[field] = " ".join(" ".join(w) for w in words if w)
    return Words(files, texts)
