"""A completion test that is more than one pytest file: an imported task's own verifier.

A Harbor or Terminal-Bench task is graded by its own script (`tests/test.sh`, `run-tests.sh`),
which gets the whole tests directory. Its `completion_test` is its pytest file (if any), then
one comment line carrying the rest of the directory and how to run it:

    <tests/test_outputs.py, as it is>
    # endless-verifier v1: {"script": "test.sh", "files": {...}, ...}

still valid Python, passed along unchanged by every stage; the grader (verdict.py) unpacks it,
exports unpack it back into a tests directory."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field

MARK = "# endless-verifier v1: "
TESTS_DIR = "/tests"
LOGS_DIR = "/logs/verifier"


@dataclass(frozen=True)
class Verifier:
    test: str = ""  # the pytest file ("" when the directory has none)
    test_name: str = "test_outputs.py"  # its name in the tests directory
    script: str = ""  # the program that grades, relative to the tests directory ("": pytest)
    files: dict[str, str] = field(default_factory=dict)  # the other text files of the directory
    binary: dict[str, str] = field(default_factory=dict)  # its other files: path -> base64
    user: str = ""  # who runs the script ("": the image's USER, root when unset)
    env: dict[str, str] = field(default_factory=dict)  # added to the image's environment
    timeout: float = 0.0  # seconds the script may take (0: the caller's default)
    # What the reference solution changes in the system locations (system_paths.py): path ->
    # sha256 where grading loads it, else "". A root agent may change these and nothing else.
    allowed: dict[str, str] = field(default_factory=dict)

    def all_files(self) -> dict[str, str]:
        """The text files of the tests directory, the pytest file included."""
        files = dict(self.files)
        if self.test_name and self.test:
            files[self.test_name] = self.test
        return files


def pack(verifier: Verifier) -> str:
    """The completion-test text of `verifier` (see the module docstring)."""
    payload = {k: v for k, v in asdict(verifier).items() if k != "test" and v}
    body = (
        verifier.test if not verifier.test or verifier.test.endswith("\n") else verifier.test + "\n"
    )
    return body + MARK + json.dumps(payload, sort_keys=True, ensure_ascii=False) + "\n"


def allow(text: str, changes: dict[str, str]) -> str:
    """`text` carrying `changes` (the reference solution's in the system locations) as what an
    agent may change there."""
    verifier = unpack(text)
    if verifier is None:
        if not changes:
            return text
        verifier = Verifier(test=text)
    if verifier.allowed == changes:
        return text
    return pack(dataclasses.replace(verifier, allowed=dict(changes)))


def portable(text: str | None) -> str:
    """The completion test as an export carries it: without what this lake learned of the
    reference solution's changes (`allow`), which a task read back learns again."""
    verifier = unpack(text)
    if verifier is None or not verifier.allowed:
        return text or ""
    if not verifier.script:  # a pytest file that carried nothing else
        return verifier.test
    return pack(dataclasses.replace(verifier, allowed={}))


def unpack(text: str | None) -> Verifier | None:
    """The verifier a completion-test text carries; None for a plain pytest file."""
    if not text:
        return None
    at = text.rfind(MARK)
    if at < 0 or (at > 0 and text[at - 1] != "\n") or text[at:].count("\n") > 1:
        return None
    try:
        payload = json.loads(text[at + len(MARK) :])
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    known = {k: payload[k] for k in Verifier.__dataclass_fields__ if k in payload}
    return Verifier(test=text[:at], **known)


def pytest_source(text: str | None) -> str:
    """The pytest file of a completion test (the text itself unless it carries a verifier)."""
    verifier = unpack(text)
    return (text or "") if verifier is None else verifier.test
