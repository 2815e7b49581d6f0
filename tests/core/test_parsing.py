"""Text-mode replies to (thought, command), and refusing commands that need a terminal."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.core.parsing import FormatError, interactive_refusal, parse_text_action


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
