"""Text-mode replies to (thought, command), and refusing commands that need a terminal."""

from __future__ import annotations

import shlex
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.core import parsing
from agent.core.parsing import interactive_refusal, parse_text_action, shell_words
from agent.errors import FormatError


def test_thought_and_one_bash_block() -> None:
    reply = "THOUGHT: list the files.\n\n```bash\nls -la\n```\n"
    assert parse_text_action(reply) == ("THOUGHT: list the files.", "ls -la")


def test_unlabelled_block_and_other_languages_in_the_thought() -> None:
    reply = "The bug is here:\n```python\nx = 1\n```\nSo I run:\n```\npytest -x\n```\nDone."
    thought, command = parse_text_action(reply)
    assert command == "pytest -x"
    assert "```python\nx = 1\n```" in thought and thought.endswith("Done.")


def test_multi_line_command_with_heredoc_is_kept_whole() -> None:
    body = "cat > a.py <<'EOF'\nprint('hi')\nEOF\npython a.py"
    assert parse_text_action(f"write and run\n```sh\n{body}\n```")[1] == body


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("I think we are done.", "no bash code block"),
        ("```bash\nls\n```\nand\n```bash\npwd\n```", "2 bash code blocks"),
        ("```bash\n   \n```", "empty"),
        ("```bash\nls -la", "never closed"),
    ],
)
def test_bad_replies_get_the_format_back(reply: str, says: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_text_action(reply)
    assert says in str(info.value)
    assert "```bash" in str(info.value)  # the message shows the expected format


FREE_TEXT = st.text().filter(lambda s: "```" not in s)


@given(
    thought=FREE_TEXT,
    command=FREE_TEXT.filter(lambda s: s.strip()),
    label=st.sampled_from(["bash", "", "sh"]),
)
@example(thought="", command="echo '```'x", label="bash")
@example(thought="use\r\nwindows", command="ls\r\npwd", label="")
def test_any_thought_and_one_block_parse_back(thought: str, command: str, label: str) -> None:
    # A line of the command that starts a fence would end the block: models cannot write one.
    command_lines = command.replace("\r\n", "\n").split("\n")
    if any(line.strip().startswith("```") for line in command_lines):
        return
    if any(line.strip().startswith("```") for line in thought.split("\n")):
        return
    reply = f"{thought}\n```{label}\n{command}\n```\n"
    got_thought, got_command = parse_text_action(reply)
    assert got_command == command.strip()
    assert got_thought == thought.strip()


@pytest.mark.parametrize(
    "command",
    [
        "vim a.py",
        "vi a.py",
        "nano setup.cfg",
        "emacs x",
        "less README.md",
        "git log | less",
        "more x.txt",
        "top",
        "python",
        "python3",
        "ipython",
        "python3 -i",
        "cd /repo && python",
        "sudo -E vim /etc/hosts",
        "FOO=1 /usr/bin/vim x",
    ],
)
def test_interactive_commands_are_refused_with_a_hint(command: str) -> None:
    message = interactive_refusal(command)
    assert message is not None
    assert "terminal" in message
    assert any(hint in message for hint in ("str_replace_editor", "cat", "python -c", "ps aux"))


@pytest.mark.parametrize(
    "command",
    [
        "python -c 'print(1)'",
        "python3 -m pytest -x",
        "python setup.py test",
        "echo 'print(1)' | python",
        "python <<'EOF'\nprint(1)\nEOF",
        "python --version",
        "cat > notes.txt <<'EOF'\nvim and less are editors\nEOF",
        "grep -rn 'less' src/",
        "echo vim",
        "git diff --stat",
        "# open it in vim\nls",
        "pip install more-itertools",
    ],
)
def test_ordinary_commands_pass(command: str) -> None:
    assert interactive_refusal(command) is None


@given(st.text())
def test_refusal_never_crashes(command: str) -> None:
    result = interactive_refusal(command)
    assert result is None or isinstance(result, str)


def _shlex_words(text: str) -> list[str] | None:
    """What `interactive_refusal` split commands with before: shlex, quadratic in a word."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def _words(text: str) -> list[str] | None:
    try:
        return shell_words(text)
    except ValueError:
        return None


@given(st.text(alphabet=st.sampled_from("ab \t\n'\"\\();<>|&#=-é"), max_size=40))
@example("vim 'a b' && less<x")
@example('echo "a\\"b\\c" \\\n')
def test_shell_words_split_as_shlex_does(text: str) -> None:
    assert _words(text) == _shlex_words(text)


_PIECES = [
    "vim",
    "less",
    "python3",
    "-i",
    "-c",
    "x",
    "'a b'",
    '"q"',
    "\\",
    "|",
    "&&",
    ";",
    "<",
    "<<EOF",
    "EOF",
    "\n",
    " ",
    "#",
    "sudo",
    "timeout 5",
    "'",
    '"',
    "=",
    "FOO=1",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join))
@example("vim 'a b' && less<x")
def test_refusal_agrees_with_the_shlex_one(command: str) -> None:
    new = interactive_refusal(command)
    with mock.patch.object(parsing, "shell_words", _shlex_or_raise):
        old = interactive_refusal(command)
    assert new == old


def _shlex_or_raise(text: str) -> list[str]:
    words = _shlex_words(text)
    if words is None:
        raise ValueError("unbalanced")
    return words


@pytest.mark.parametrize("quote", ["", "'", '"'])
def test_a_10_mb_argument_is_checked_in_linear_time(quote: str) -> None:
    # shlex took 13 s for 1 MB and grows with the square: 10 MB would pass the pytest timeout.
    huge = "x" * 10_000_000
    assert interactive_refusal(f"echo {quote}{huge}{quote} | less") is not None
    assert interactive_refusal(f"printf {quote}{huge}{quote} > out.txt") is None
