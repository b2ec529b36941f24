"""The top-level commands (steps) of a bash script, found by reading it, never by running it.

A step ends at a newline or a `;` outside any quote, substitution, group, compound command
(if/case/for/while/until/select) or here-document, unless the line goes on (a trailing `\\`,
`|`, `&&` or `||`). A script this reader cannot follow to the end (an unclosed quote or block)
is one step: nothing is split that might not be a whole command.
"""

from __future__ import annotations

import re

_OPENERS = {"if": "fi", "case": "esac", "for": "done", "while": "done", "until": "done"}
_OPENERS["select"] = "done"
_CLOSERS = {"fi", "esac", "done"}
# Words after which the next word is in command position.
_RESTART = {"then", "do", "else", "elif", "if", "while", "until", "!", "time", "{", "(", "in"}
_WORD_END = set(" \t\n;&|<>()")
_SETUP = {"mkdir", "cd", "pushd", "set", "shopt", "umask", "export", "true", ":", "local"}
_NOT_ABLATED = {"set", "shopt", "true", ":"}  # shell options: removing one tests nothing


def split_steps(script: str) -> list[str]:
    """The top-level commands of `script`, each as its source text (comments kept with the
    command they precede), blank and comment-only pieces dropped."""
    bounds = _boundaries(script)
    if bounds is None:
        return [script.strip()] if _has_code(script) else []
    steps, start = [], 0
    for end in [*bounds, len(script)]:
        piece = script[start:end].strip().rstrip(";").strip()
        if _has_code(piece):
            steps.append(piece)
        start = end
    return steps


def ablatable(step: str) -> bool:
    """Whether removing `step` is a meaningful mutation (not a shell option like `set -e`)."""
    words = _code(step).split()
    return bool(words) and words[0] not in _NOT_ABLATED


def is_setup(step: str) -> bool:
    """A step that prepares and cannot by itself produce a task's result: directories, the
    working directory, shell options, plain variables (no substitution, redirection or pipe)."""
    code = _code(step)
    if any(token in code for token in ("$(", "`", ">", "<", "|", "\n")):
        return False
    for part in re.split(r"&&|;", code):
        words = part.split()
        if not words:
            continue
        first = words[0]
        if first in _SETUP or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", first):
            plain = (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(=\S*)?|-\w+", w) for w in words)
            if (first == "export" or "=" in first) and not all(plain):
                return False
            continue
        return False
    return True


def _code(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ).strip()


def _has_code(text: str) -> bool:
    return bool(_code(text))


def _boundaries(s: str) -> list[int] | None:
    """Offsets where a top-level step ends, or None if the script cannot be followed."""
    stack: list[str] = []
    heredocs: list[tuple[str, bool]] = []
    bounds: list[int] = []
    i, n = 0, len(s)
    cmd_start = True  # the next word is in command position
    pending_op = False  # the line ends with | && || (it goes on)
    while i < n:
        c = s[i]
        top = stack[-1] if stack else ""
        if top == "'":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if top in ('"', "`"):
            if c == "\\":
                i += 2
                continue
            if c == top:
                stack.pop()
            elif top == '"' and s.startswith("$(", i):
                stack.append("$(")
                i += 2
                cmd_start = True
                continue
            elif top == '"' and s.startswith("${", i):
                stack.append("${")
                i += 2
                continue
            elif top == '"' and c == "`":
                stack.append("`")
            i += 1
            continue
        if top == "${":
            if c == "}":
                stack.pop()
            elif c in "'\"":
                stack.append(c)
            elif s.startswith("$(", i):
                stack.append("$(")
                i += 1
            i += 1
            continue
        # code: the top level, $( ), ( ), { }, compound commands
        if c == "\\":
            i += 2
            continue
        if c in " \t":
            i += 1
            continue
        if c == "#" and (i == 0 or s[i - 1] in " \t\n;&|()"):
            while i < n and s[i] != "\n":
                i += 1
            continue
        if c == "\n":
            i += 1
            for delim, strip_tabs in heredocs:
                i = _skip_heredoc(s, i, delim, strip_tabs)
                if i < 0:
                    return None
            heredocs = []
            if not stack and not pending_op:
                bounds.append(i)
            cmd_start = True
            continue
        pending_op = False
        if c in "'\"`":
            stack.append(c)
            cmd_start = False
            i += 1
            continue
        if s.startswith("$(", i) or s.startswith("${", i):
            stack.append(s[i : i + 2])
            cmd_start = s[i + 1] == "("
            i += 2
            continue
        if c == "(":
            if top != "case":
                stack.append("(")
            cmd_start = True
            i += 1
            continue
        if c == ")":
            if top in ("(", "$("):
                stack.pop()
            elif top != "case":
                return None
            cmd_start = True  # `name() {` opens a function body
            i += 1
            continue
        if s.startswith("<<", i) and not s.startswith("<<<", i):
            i += 2
            strip_tabs = i < n and s[i] == "-"
            i += 1 if strip_tabs else 0
            while i < n and s[i] in " \t":
                i += 1
            start = i
            while i < n and s[i] not in _WORD_END:
                i += 1
            delim = re.sub(r"[\\'\"]", "", s[start:i])
            if not delim:
                return None
            heredocs.append((delim, strip_tabs))
            cmd_start = False
            continue
        if c in ";&|":
            op = s[i : i + 2]
            if op in ("&&", "||", ";;", ";&", "|&"):
                i += 2
            else:
                i += 1
            pending_op = op in ("&&", "||") or (c == "|" and op != "||")
            if c == ";" and op not in (";;", ";&") and not stack:
                bounds.append(i)
            cmd_start = True
            continue
        if c in "<>":
            i += 1
            continue
        start = i
        while i < n and s[i] not in _WORD_END and s[i] not in "'\"`$\\":
            i += 1
        if i == start:  # a $ not followed by ( or {: part of a word
            i += 1
            cmd_start = False
            continue
        word = s[start:i]
        if cmd_start and word in _OPENERS:
            stack.append(word)
        elif cmd_start and word in _CLOSERS:
            if not stack or _OPENERS.get(stack[-1]) != word:
                return None
            stack.pop()
        elif cmd_start and word == "{" and i < n and s[i] in " \t\n":
            stack.append("{")
        elif word == "}" and (cmd_start or s[start - 1] in ";\n") and top == "{":
            stack.pop()
        cmd_start = word in _RESTART or (top == "case" and word.endswith(")"))
    if stack or heredocs:
        return None
    return bounds


def _skip_heredoc(s: str, i: int, delim: str, strip_tabs: bool) -> int:
    """The offset after the line that ends a here-document whose body starts at `i`; -1 if the
    script ends first."""
    while i <= len(s):
        end = s.find("\n", i)
        line = s[i:] if end < 0 else s[i:end]
        if (line.lstrip("\t") if strip_tabs else line) == delim:
            return len(s) if end < 0 else end + 1
        if end < 0:
            return -1
        i = end + 1
    return -1
