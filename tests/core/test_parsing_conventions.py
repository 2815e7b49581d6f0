"""The action conventions of the agents pgs replays (``agent.action_parser``), on real replies.

The replies are gemini-3-pro's under mini-swe-agent 1.15 on SWE-bench Verified (public results:
bash-only/20251118_mini-v1.15.0_gemini-3-pro-preview-20251118, trajs/<id>/<id>.traj.json), prose
shortened, fences exactly as the model wrote them.
"""

from __future__ import annotations

import pytest

from agent.core.parsing import ActionParser, parse_text_action
from agent.errors import FormatError

#: pytest-dev__pytest-7432, messages[58]: quotes output in an unlabelled fence, then runs one
#: ```bash block. mini-swe-agent ran it; pgs used to count two actions and refuse the reply.
QUOTES_OUTPUT = """\
THOUGHT: `item.reportinfo()` returned `(local('/testbed/reproduce_issue.py'), 1, ...)`.

The PR description says:
```
SKIPPED [1] test_it.py:3: unconditional skip
```

If I look at `reproduce_issue.py`:
```python
import pytest
@pytest.mark.skip
def test_skip_location() -> None:
    assert 0
```

If I remove the decorator, where does it point?

```bash
cat <<'EOF' > test_loc.py
import pytest
def test_loc():
    assert 0
EOF
pytest test_loc.py
```"""
QUOTED_COMMAND = (
    "cat <<'EOF' > test_loc.py\nimport pytest\ndef test_loc():\n    assert 0\nEOF\n"
    "pytest test_loc.py"
)

#: pytest-dev__pytest-10081, messages[14]: two ```bash blocks; mini-swe-agent answered "found 2
#: actions"; SWE-agent's parser would have run the last one.
TWO_BASH_BLOCKS = """\
THOUGHT: Let's verify this hypothesis with a small script.

```bash
cat <<'EOF' > check_skip_attr.py
import unittest
print(getattr(unittest, '__unittest_skip__', False))
EOF
```

I need to run this with python.

```bash
python3 check_skip_attr.py
```"""

#: pytest-dev__pytest-10081, messages[-2]: the submission.
SUBMITS = """\
THOUGHT: The diff looks correct.

```bash
echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached
```"""

PARSERS: list[ActionParser] = ["pgs", "mini-swe-agent", "swe-agent"]


@pytest.mark.parametrize("parser", PARSERS)
def test_a_quoted_unlabelled_fence_is_not_a_second_action(parser: ActionParser) -> None:
    thought, command = parse_text_action(QUOTES_OUTPUT, parser)
    assert command == QUOTED_COMMAND
    assert "SKIPPED [1] test_it.py:3" in thought and "pytest test_loc.py" not in thought


def test_pgs_is_the_default() -> None:
    assert parse_text_action(QUOTES_OUTPUT)[1] == QUOTED_COMMAND


def test_two_bash_blocks_mini_and_pgs_refuse_swe_agent_takes_the_last() -> None:
    for parser in PARSERS[:2]:
        with pytest.raises(FormatError, match="2 bash code blocks"):
            parse_text_action(TWO_BASH_BLOCKS, parser)
    assert parse_text_action(TWO_BASH_BLOCKS, "swe-agent")[1] == "python3 check_skip_attr.py"


@pytest.mark.parametrize("parser", PARSERS)
def test_the_real_submission_parses_alike(parser: ActionParser) -> None:
    assert parse_text_action(SUBMITS, parser) == (
        "THOUGHT: The diff looks correct.",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
    )


def test_mini_counts_only_bash_blocks_and_swe_agent_any_language() -> None:
    reply = "THOUGHT: run it\n```sh\nls\n```"
    with pytest.raises(FormatError, match="no bash code block"):
        parse_text_action(reply, "mini-swe-agent")
    assert parse_text_action(reply, "pgs")[1] == "ls"
    python_last = "```bash\nls\n```\nthen\n```python\nprint(1)\n```"
    assert parse_text_action(python_last, "swe-agent")[1] == "print(1)"
    assert parse_text_action(python_last, "mini-swe-agent")[1] == "ls"
    assert parse_text_action(python_last, "pgs")[1] == "ls"


def test_swe_agent_skips_a_block_nested_in_another() -> None:
    reply = "```markdown\nsee:\n```bash\nrm -rf x\n```\n```\nthen\n```\nls\n```"
    assert parse_text_action(reply, "swe-agent")[1] == "ls"


def test_mini_2_reads_its_own_language_only() -> None:
    # mini-swe-agent 2.x's text mode (its default action_regex): bash examples are thought.
    reply = "THOUGHT: e.g.\n```bash\nls\n```\nnow:\n```mswea_bash_command\npwd\n```"
    assert parse_text_action(reply, "mini-swe-agent-2") == (
        "THOUGHT: e.g.\n```bash\nls\n```\nnow:",
        "pwd",
    )
    with pytest.raises(FormatError, match="no bash code block"):
        parse_text_action("```bash\nls\n```", "mini-swe-agent-2")
