"""Reading actions out of a model's text reply, and refusing commands that would hang.

Text mode (models without tool calls): :func:`parse_text_action` returns ``(thought, command)``
or raises :class:`FormatError` whose message tells the model the format (in the words of
``agent.format_errors``). Which block is the action is a convention (:data:`ActionParser`),
chosen with ``agent.action_parser``:

- ``pgs`` (the default): exactly one block labelled ``bash``/``sh``/``shell``/``console``; when
  the reply has none, exactly one unlabelled block. An unlabelled fence beside a ``bash`` block
  (the model quoting earlier output) is part of the thought. Blocks in other languages
  (```python, ```diff) are always part of the thought.
- ``mini-swe-agent``: as mini-swe-agent 1.x's text mode: only ```` ```bash ```` blocks count (the
  block's first line break, its body up to a line break and ```), exactly one;
  ``mini-swe-agent-2`` the same with 2.x's default language, ```` ```mswea_bash_command ````.
- ``swe-agent``: as SWE-agent's ``thought_action`` parser: the last fenced block that is not
  nested in another, whatever its language.

:func:`interactive_refusal` catches commands that wait for a terminal (editors, pagers, a bare
REPL): the sandbox has none, so they would only burn the time limit.
"""

from __future__ import annotations

import posixpath
import re
from typing import Literal

from agent.core.prompts import (
    DEFAULT_REFUSALS,
    Refusals,
    format_error,
    render_text,
)

#: Languages of a fenced block that count as the action.
ACTION_LANGUAGES = frozenset({"", "bash", "sh", "shell", "console"})
#: How the action is read out of a text reply (see the module doc).
ActionParser = Literal["pgs", "mini-swe-agent", "mini-swe-agent-2", "swe-agent"]
ACTION_PARSERS: tuple[ActionParser, ...] = (
    "pgs",
    "mini-swe-agent",
    "mini-swe-agent-2",
    "swe-agent",
)

_FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[ \t]*$")
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")


def find_action_blocks(reply: str) -> list[tuple[int, int, str, bool]]:
    """Fenced action blocks of ``reply`` as (start offset, end offset, body, labelled)."""
    blocks: list[tuple[int, int, str, bool]] = []
    lines = reply.splitlines(keepends=True)
    offset = 0
    open_at: int | None = None
    language = ""
    body: list[str] = []
    for line in lines:
        text = line.rstrip("\r\n")
        if open_at is None:
            m = _FENCE_OPEN.match(text)
            if m:
                open_at, language, body = offset, m.group(1).lower(), []
        elif _FENCE_CLOSE.match(text):
            if language in ACTION_LANGUAGES:
                blocks.append((open_at, offset + len(line), "".join(body), language != ""))
            open_at = None
        else:
            body.append(line)
        offset += len(line)
    if open_at is not None and language in ACTION_LANGUAGES:
        raise format_error(kind="unclosed_block")
    return blocks


def parse_text_action(reply: str, parser: ActionParser = "pgs") -> tuple[str, str]:
    """Split a text-mode reply into (thought, command), reading it by ``parser``'s convention."""
    if parser in ("mini-swe-agent", "mini-swe-agent-2"):
        blocks = _mini_blocks(reply, _MINI_BLOCK if parser == "mini-swe-agent" else _MINI2_BLOCK)
    elif parser == "swe-agent":
        blocks = _swe_agent_block(reply)
    else:
        blocks = find_action_blocks(reply)
        labelled = [b for b in blocks if b[3]]
        if labelled:  # an unlabelled fence beside a bash block is quoted text
            blocks = labelled
    if len(blocks) != 1:
        if not blocks:
            raise format_error(kind="no_block")
        raise format_error(kind="many_blocks", values={"count": len(blocks)})
    start, end, body, _ = blocks[0]
    command = body.strip()
    if not command:
        raise format_error(kind="empty_block")
    thought = (reply[:start] + reply[end:]).strip()
    return thought, command


# mini-swe-agent's text mode: a ```bash fence, blanks to a line break, the body, ``` after a
# line break; bodies are matched lazily, left to right, across lines.
_MINI_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_MINI2_BLOCK = re.compile(r"```mswea_bash_command\s*\n(.*?)\n```", re.DOTALL)


def _mini_blocks(reply: str, pattern: re.Pattern[str]) -> list[tuple[int, int, str, bool]]:
    return [(m.start(), m.end(), m.group(1), True) for m in pattern.finditer(reply)]


# SWE-agent's thought_action parser: a line starting with ``` and a word opens a block, a line
# ``` alone closes the innermost open one; the action is the last block closed at top level.
_SWE_FENCE = re.compile(r"^```(\S*)\s*\n|^```\s*$", re.MULTILINE)


def _swe_agent_block(reply: str) -> list[tuple[int, int, str, bool]]:
    opened: list[re.Match[str]] = []
    last: tuple[int, int, str, bool] | None = None
    for fence in _SWE_FENCE.finditer(reply):
        if opened and not fence.group(1):
            start = opened.pop()
            if not opened:
                last = (start.start(), fence.end(), reply[start.end() : fence.start()], True)
        elif fence.group(1) is not None:
            opened.append(fence)
    return [last] if last else []


# -- commands that need a terminal ------------------------------------------------------------

_INTERACTIVE: dict[str, str] = {  # program -> its text in agent.refusals
    **dict.fromkeys(
        ("vi", "vim", "nvim", "view", "nano", "pico", "emacs", "joe", "mcedit"), "editor"
    ),
    **dict.fromkeys(("less", "more", "most", "pg"), "pager"),
    **dict.fromkeys(("top", "htop", "atop", "watch"), "monitor"),
}
_REPLS = re.compile(r"^(python[0-9.]*|ipython[0-9.]*|pypy[0-9.]*|bpython)$")
_WRAPPERS = frozenset({"sudo", "env", "exec", "command", "time", "nohup", "nice", "stdbuf"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", ";;", "{", "}"})
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?[ \t]*(['\"]?)([A-Za-z_][\w.-]*)\1")


def interactive_refusal(command: str, refusals: Refusals = DEFAULT_REFUSALS) -> str | None:
    """A message refusing ``command`` if it would wait for a terminal, else None; its text is
    ``refusals``' (a config's ``agent.refusals``)."""
    for words, stdin_redirected in _simple_commands(command):
        program, args = _program(words)
        if program is None:
            continue
        name = posixpath.basename(program)
        if name in _INTERACTIVE and not (name == "emacs" and "--batch" in args):
            template = getattr(refusals, _INTERACTIVE[name])
            return render_text(template, {"program": name})
        if _REPLS.match(name) and not stdin_redirected and _is_bare_repl(args):
            return render_text(refusals.repl, {"command": " ".join([name, *args])})
    return None


def _strip_heredocs(command: str) -> str:
    """Drop heredoc bodies: their lines are data, not commands."""
    out: list[str] = []
    pending: list[str] = []
    for line in command.split("\n"):
        if pending:
            if line.lstrip("\t") == pending[0]:
                pending.pop(0)
            continue
        out.append(line)
        pending = [m.group(2) for m in _HEREDOC.finditer(line)]
    return "\n".join(out)


def _tokens(command: str) -> list[str]:
    lines = _strip_heredocs(command).split("\n")
    text = " ; ".join(line for line in lines if not line.lstrip().startswith("#"))
    try:
        return shell_words(text)
    except ValueError:  # unbalanced quotes: fall back to a rough split
        return re.findall(r"[;&|()]+|[^\s;&|()]+", text)


_WHITESPACE = " \t\r\n"
_PUNCTUATION = "();<>|&"
_QUOTES = "'\""
_PLAIN_RUN = re.compile(r"[^ \t\r\n'\"\\();<>|&]+")
_PUNCTUATION_RUN = re.compile(r"[();<>|&]+")
_DOUBLE_QUOTED_RUN = re.compile(r'[^"\\]+')


def shell_words(text: str) -> list[str]:
    """The words and operators of ``text`` as ``shlex.shlex(text, posix=True,
    punctuation_chars=True)`` with ``whitespace_split`` and no comment characters splits them
    (ValueError on an unclosed quote or a trailing backslash), in linear time: shlex grows each
    token one character at a time, which is quadratic in the length of a word (a 1 MB
    argument took 13 s, 10 MB would take hours). Runs of plain characters are taken at once."""
    words: list[str] = []
    token: list[str] = []
    quoted = False
    state, escaped_from = " ", " "
    i, n = 0, len(text)
    while True:
        if state in " ac" and i < n:  # the common case: a run of plain characters at once
            plain = (_PUNCTUATION_RUN if state == "c" else _PLAIN_RUN).match(text, i)
            if plain:
                state = "a" if state == " " else state
                token.append(plain.group())
                i = plain.end()
                continue
        elif state == "'" and i < n:
            end = text.find("'", i)
            end = n if end < 0 else end
            token.append(text[i:end])
            i = end
        elif state == '"' and i < n:
            run = _DOUBLE_QUOTED_RUN.match(text, i)
            if run:
                token.append(run.group())
                i = run.end()
        char = text[i] if i < n else ""
        i += 1
        if state == " ":
            if not char:
                return words
            if char == "\\":
                escaped_from, state = "a", char
            elif char in _QUOTES:
                state = char
            elif char not in _WHITESPACE:
                token, state = [char], "c" if char in _PUNCTUATION else "a"
        elif state in _QUOTES:
            quoted = True
            if not char:
                raise ValueError("No closing quotation")
            if char == state:
                state = "a"
            elif char == "\\" and state == '"':
                escaped_from, state = state, char
            else:
                token.append(char)
        elif state == "\\":
            if not char:
                raise ValueError("No escaped character")
            # Within double quotes a backslash escapes only the quote and itself.
            if escaped_from in _QUOTES and char not in ("\\", escaped_from):
                token.append("\\")
            token.append(char)
            state = escaped_from
        else:  # in a word ("a") or a run of operators ("c")
            ends_word = not char or char in _WHITESPACE
            if not ends_word and state == "a" and char in _QUOTES:
                state = char
            elif not ends_word and state == "a" and char == "\\":
                escaped_from, state = "a", char
            else:  # a space, the end, or an operator after a word (or a word after one)
                if not ends_word:
                    i -= 1  # read this character again as the start of the next token
                if token or quoted:
                    words.append("".join(token))
                token, quoted, state = [], False, " "
                if not char:
                    return words


def _simple_commands(command: str) -> list[tuple[list[str], bool]]:
    """Words of each simple command, and whether its stdin comes from a pipe or redirect."""
    result: list[tuple[list[str], bool]] = []
    words: list[str] = []
    piped = redirected = False
    tokens = _tokens(command)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _SEPARATORS:
            if words:
                result.append((words, piped or redirected))
            words, redirected = [], False
            piped = tok in ("|", "|&")
        elif tok and set(tok) <= set("<>&"):
            redirected = redirected or tok.startswith("<")
            i += 1  # skip the redirect's target
        else:
            words.append(tok)
        i += 1
    if words:
        result.append((words, piped or redirected))
    return result


def _program(words: list[str]) -> tuple[str | None, list[str]]:
    """Skip variable assignments and wrappers (sudo, env, timeout N, ...) to the program."""
    i = 0
    while i < len(words):
        word = words[i]
        if re.match(r"^[A-Za-z_]\w*=", word):
            i += 1
        elif word in _WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        elif word == "timeout":
            i += 1
            while i < len(words) and (words[i].startswith("-") or re.match(r"^\d", words[i])):
                i += 1
        else:
            return word, words[i + 1 :]
    return None, []


def _is_bare_repl(args: list[str]) -> bool:
    """True when a Python interpreter gets no script, ``-c`` or ``-m`` (or asks for ``-i``)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-", "-h", "-?", "--help", "-V", "-VV", "--version") or not arg.startswith("-"):
            return False
        if not arg.startswith("--"):
            for j, flag in enumerate(arg[1:]):
                if flag in "cm":
                    return False
                if flag == "i":
                    return True
                if flag in "WX":  # takes a value: the rest of this word, or the next word
                    i += 1 if j == len(arg) - 2 else 0
                    break
        i += 1
    return True
