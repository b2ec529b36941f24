"""Reading what real models send: tolerant where the intent is clear, strict everywhere else.

Tolerated: reasoning blocks (`<think>…</think>`, also one whose opening tag was part of the
prompt, so only `</think>` appears), prose around the answer, code fences with or without a
language (``` or ~~~, indented or not), a whole reply wrapped in a fence, tag names in any case
and with attributes, the same section sent twice (the last one counts), and a section left open
at the end of a reply cut off by the token limit (it runs to the next section or the end).

Rejected, with a reason naming what is wrong: a missing or empty section, code that is not
valid Python, a test file without tests or importing beyond the standard library and pytest,
and Dockerfiles that cannot build on our base image (another FROM image, several stages,
heredocs, ENTRYPOINT, COPY of a file the reply did not provide).

Nothing here runs what it reads: Python is only compiled to a syntax tree.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from endless_assets.generation.dockerfile_checks import (
    ParseError,
    check_dockerfile,
    first_instruction,
)
from endless_assets.models import is_context_path

MAX_INSTRUCTION_CHARS = 8000
MIN_INSTRUCTION_CHARS = 20
MAX_CONTEXT_BYTES = 2_000_000
ALLOWED_TEST_MODULES = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest"}

# Tags of reasoning blocks, for every reply parser (task generator and solver alike).
REASONING_TAGS = ("think", "thinking", "reasoning", "reflection")
_REASONING_BLOCK = re.compile(
    r"<(?P<tag>" + "|".join(REASONING_TAGS) + r")\b[^>]*>.*?</(?P=tag)\s*>", re.S | re.I
)
_REASONING_CLOSE = re.compile(r"</(?:" + "|".join(REASONING_TAGS) + r")\s*>", re.I)
_REASONING_OPEN = re.compile(r"<(?:" + "|".join(REASONING_TAGS) + r")\b[^>]*>", re.I)
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*?)[ \t]*$")
_FILE_TAG = re.compile(
    r"<file\s+path\s*=\s*(?P<q>['\"])(?P<path>[^'\"]+)(?P=q)\s*>(?P<body>.*?)(?:</file\s*>|\Z)",
    re.S | re.I,
)

PYTHON_LANGS = {"python", "py", "python3", "pytest"}
DOCKER_LANGS = {"dockerfile", "docker"}


# --- generic pieces -----------------------------------------------------------------------------


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning: whole blocks, a block whose opening tag was in the prompt
    (only the closing tag appears), and a block left open by a cut-off reply."""
    text = _REASONING_BLOCK.sub("", text)
    closes = list(_REASONING_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _REASONING_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


@dataclass(frozen=True)
class CodeBlock:
    lang: str
    code: str
    closed: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """Fenced blocks in order; a block left open at the end runs to the end of the text."""
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group("fence")
        lang = (opening.group("info").split() or [""])[0].lower().strip("{}.")
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if (
                closing
                and closing.group("fence")[0] == fence[0]
                and len(closing.group("fence")) >= len(fence)
                and not closing.group("info")
            ):
                closed = True
                i += 1
                break
            body.append(lines[i])
            i += 1
        blocks.append(CodeBlock(lang, textwrap.dedent("\n".join(body)).strip("\n"), closed))
    return blocks


def unfence(text: str) -> str:
    """The code of the text's first fenced block, or the text itself, dedented and stripped."""
    blocks = code_blocks(text)
    if blocks:
        return blocks[0].code.strip("\n")
    return textwrap.dedent(text.strip("\n")).strip()


def sections(text: str, names: tuple[str, ...]) -> dict[str, str]:
    """The content of each `<name>…</name>` section; for a name sent more than once, the last
    non-empty one. A section with no closing tag ends at the next known section or at the end."""
    opening = re.compile(r"<(?P<name>" + "|".join(map(re.escape, names)) + r")\b[^>/]*>", re.I)
    starts = list(opening.finditer(text))
    found: dict[str, str] = {}
    for n, match in enumerate(starts):
        name = match.group("name").lower()
        following = starts[n + 1].start() if n + 1 < len(starts) else len(text)
        closing = re.compile(rf"</{re.escape(name)}\s*>", re.I).search(text, match.end(), following)
        content = text[match.end() : closing.start() if closing else following]
        if content.strip():
            found[name] = content
    return found


def _truncated_note(closed: bool) -> str:
    return "" if closed else " (its code block is not closed: the reply looks cut off)"


# --- the describe stage: the task -----------------------------------------------------------------


@dataclass(frozen=True)
class TaskReply:
    instruction: str
    truth: str
    solution: str


def parse_task(text: str) -> TaskReply:
    """A describe stage reply: a public <task>, a privileged <truth> and a reference <solution>."""
    body = _answer(text)
    found = sections(body, ("task", "truth", "solution"))
    if "task" not in found:
        raise ParseError("no <task> section in the reply")
    instruction = _prose(found["task"])
    if len(instruction) < MIN_INSTRUCTION_CHARS:
        raise ParseError(
            f"the <task> section is too short to be a task ({len(instruction)} characters)"
        )
    if len(instruction) > MAX_INSTRUCTION_CHARS:
        raise ParseError(
            f"the <task> section has {len(instruction)} characters; at most "
            f"{MAX_INSTRUCTION_CHARS} are allowed"
        )
    if "truth" not in found:
        raise ParseError("no <truth> section in the reply (the privileged ground truth)")
    truth = _prose(found["truth"])
    # The paper's own format has no solution section: a reply without one (or with an empty one) is
    # a task without a reference solution, not an unusable reply. The validation stage then records
    # that there was nothing to check, and the solver stage's solver decides whether the task is
    # solvable.
    solution = unfence(found.get("solution", "")).strip()
    return TaskReply(instruction, truth, solution + "\n" if solution else "")


def _answer(text: str) -> str:
    body = strip_reasoning(text)
    if not body:
        if text.strip():
            raise ParseError("the reply holds only reasoning, no answer after it")
        raise ParseError("the reply is empty")
    return body


def _prose(content: str) -> str:
    """Section text: unwrapped from a fence if it is one whole block, dedented, stripped."""
    stripped = content.strip()
    if stripped.startswith(("```", "~~~")):
        return unfence(stripped)
    return textwrap.dedent(content.strip("\n")).strip()


# --- the build and validation stages: tests -------------------------------------------------------


def parse_test(text: str, what: str) -> str:
    """The one pytest file in a reply (`what` names it in errors, e.g. "completion test")."""
    return pick_test(_answer(text), what)


def pick_test(body: str, what: str) -> str:
    blocks = [b for b in code_blocks(body) if b.lang in PYTHON_LANGS or not b.lang]
    if not blocks and not code_blocks(body) and _looks_like_python(body):
        blocks = [CodeBlock("python", textwrap.dedent(body).strip("\n"), True)]
    if not blocks:
        raise ParseError(f"no Python code block with the {what} in the reply")
    errors: list[str] = []
    valid: list[tuple[bool, int, str]] = []
    for block in blocks:
        try:
            code = check_test(block.code, what)
        except ParseError as exc:
            errors.append(str(exc) + _truncated_note(block.closed))
            continue
        valid.append((block.lang in PYTHON_LANGS, len(code), code))
    if not valid:
        raise ParseError(errors[-1])
    return max(valid)[2]


def _looks_like_python(text: str) -> bool:
    return bool(re.search(r"^\s*(?:import \w|from \w+ import|def test_)", text, re.M))


# CPython 3.11 counts the depth of an AST it converts in one counter for every thread: two
# threads parsing at once may raise SystemError("AST constructor recursion depth mismatch").
_AST_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """`ast.parse`, one thread at a time (SyntaxError as ast.parse raises it)."""
    with _AST_LOCK:
        return ast.parse(source)


def check_test(code: str, what: str) -> str:
    """A pytest file we can run: valid Python, at least one test, stdlib and pytest only."""
    code = code.strip("\n") + "\n"
    try:
        tree = parse_python(code)
    except SyntaxError as exc:
        raise ParseError(f"the {what} is not valid Python: line {exc.lineno}: {exc.msg}") from None
    if not _has_tests(tree):
        raise ParseError(f"the {what} defines no test functions (def test_...)")
    foreign = sorted(_imported(tree) - ALLOWED_TEST_MODULES)
    if foreign:
        raise ParseError(
            f"the {what} imports {', '.join(foreign)}: only the Python standard library and "
            "pytest are available"
        )
    return code


def _has_tests(tree: ast.Module) -> bool:
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    for node in tree.body:
        if isinstance(node, functions) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
            if any(m.name.startswith("test") for m in methods):
                return True
    return False


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


# --- the build stage: the environment -------------------------------------------------------------


@dataclass(frozen=True)
class EnvironmentReply:
    dockerfile: str | None
    files: dict[str, str] = field(default_factory=dict)
    initial_test: str | None = None


def parse_environment(
    text: str,
    base_image: str,
    *,
    allow_test: bool = False,
    known_files: dict[str, str] | None = None,
) -> EnvironmentReply:
    """A Dockerfile (fenced or in <dockerfile>), its build-context files (<file path="…">), and,
    in a repair reply (`allow_test`), possibly a corrected initial-state test. A repair reply may
    send only the part it changed; a first reply must send the Dockerfile. `known_files` are
    files sent in earlier rounds, which the Dockerfile may still COPY; the reply's own files
    are returned, not merged."""
    body = _answer(text)
    files = context_files(body)
    rest = _FILE_TAG.sub("", body)
    dockerfile = _pick_dockerfile(rest)
    test = None
    if allow_test:
        blocks = [b for b in code_blocks(rest) if b.lang in PYTHON_LANGS]
        if blocks:
            test = pick_test(rest, "initial-state test")
    if dockerfile is None and test is None:
        if allow_test:
            raise ParseError("no Dockerfile (```dockerfile) and no initial-state test in the reply")
        raise ParseError("no Dockerfile in the reply (a ```dockerfile block starting with FROM)")
    if dockerfile is not None:
        dockerfile = check_dockerfile(dockerfile, base_image, {**(known_files or {}), **files})
    return EnvironmentReply(dockerfile, files, test)


def context_files(body: str) -> dict[str, str]:
    """`<file path="relative/path">content</file>` blocks: the build context of the Dockerfile."""
    files: dict[str, str] = {}
    for match in _FILE_TAG.finditer(body):
        path = check_context_path(match.group("path"))
        content = match.group("body")
        stripped = content.strip()
        if stripped.startswith(("```", "~~~")):
            content = unfence(stripped) + "\n"
        elif content.startswith("\n"):
            content = content[1:]
        files[path] = content
    total = sum(len(c.encode()) for c in files.values())
    if total > MAX_CONTEXT_BYTES:
        raise ParseError(f"the reply's files hold {total} bytes; at most {MAX_CONTEXT_BYTES}")
    return files


def check_context_path(raw: str) -> str:
    path = raw.strip()
    if not is_context_path(path):
        raise ParseError(
            f"file path {raw!r} must be relative to the build context (e.g. setup/data.csv), "
            "without '..', and not 'Dockerfile'"
        )
    return str(PurePosixPath(path))


def _pick_dockerfile(body: str) -> str | None:
    tagged = sections(body, ("dockerfile",))
    if "dockerfile" in tagged:
        return unfence(tagged["dockerfile"])
    blocks = code_blocks(body)
    for block in blocks:
        if block.lang in DOCKER_LANGS:
            return block.code
    for block in blocks:
        if block.lang not in PYTHON_LANGS and first_instruction(block.code) == "FROM":
            return block.code
    if not blocks and first_instruction(body) == "FROM":
        return textwrap.dedent(body).strip()
    return None
