"""mini-swe-agent's and SWE-agent's conventions for outputs: the submit command and its marker
(recognised only where it counts), and how a long output is cut (``agent.truncation``)."""

from __future__ import annotations

import pytest

from agent.core.tool_output import (
    OutputKind,
    Role,
    classify_output,
    truncate_observation,
)
from agent.core.tools import Toolset

MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: The command gemini-3-pro submitted with under mini-swe-agent 1.15 (every run of the public
#: bash-only/20251118_mini-v1.15.0_gemini-3-pro-preview-20251118 results we read).
REAL_SUBMIT = f"{MINI_SUBMIT} && git add -A && git diff --cached"
#: mini-swe-agent 1.15's note before a long output, as a real observation holds it
#: (pallets__flask-5014, messages[5]).
REAL_WARNING = (
    "<warning>\nThe output of your last command was too long.\nPlease try a different command "
    "that produces less output.\nIf you're looking at a file you can try use head, tail or sed "
    "to view a smaller number of lines selectively.\nIf you're using grep or find and it "
    "produced too much output, you can use a more selective search pattern.\nIf you really need "
    "to see something from the full command's output, you can redirect output to a file and "
    "then search in that file.\n</warning><output_head>\n"
)


@pytest.fixture
def toolset() -> Toolset:
    return Toolset.from_paths(submit_commands=[MINI_SUBMIT])


@pytest.mark.parametrize(
    "command",
    [
        REAL_SUBMIT,
        MINI_SUBMIT,
        f"\n{MINI_SUBMIT}; git diff",
        'echo "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"',
    ],
)
def test_the_configured_submit_command_has_the_submit_role(toolset: Toolset, command: str) -> None:
    assert toolset.role(command) is Role.SUBMIT
    assert toolset.role(command, "bash") is Role.SUBMIT


@pytest.mark.parametrize(
    "command",
    [
        "cat NOTES.md",
        f"cat NOTES.md; {MINI_SUBMIT}",  # the file's first line would come first
        f"cd /testbed && {MINI_SUBMIT}",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT_NOT",
        "python print_marker.py",
    ],
)
def test_any_other_command_does_not(toolset: Toolset, command: str) -> None:
    assert toolset.role(command) is Role.COMMAND


def test_without_the_setting_the_echo_is_a_plain_command() -> None:
    assert Toolset.from_paths().role(REAL_SUBMIT) is Role.COMMAND


def test_the_marker_submits_only_as_the_first_line_of_a_submit_commands_output() -> None:
    output = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x\n"
    assert classify_output(output, Role.SUBMIT).kind is OutputKind.SUBMISSION
    # A repository file that starts with the marker, printed by `cat`: text.
    as_text = classify_output(output, Role.COMMAND)
    assert as_text.kind is OutputKind.NORMAL and as_text.text == output
    later = "building\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"
    assert classify_output(later, Role.SUBMIT).kind is OutputKind.NORMAL


def test_mini_truncation_keeps_head_and_tail_halves_with_its_warning() -> None:
    text = "h" * 6_000 + "t" * 6_000
    cut = truncate_observation(text, 10_000, "mini-swe-agent")
    assert cut.startswith(REAL_WARNING + "h" * 5_000 + "\n</output_head>")
    assert "<elided_chars>\n2000 characters elided\n</elided_chars>" in cut
    assert cut.endswith("<output_tail>\n" + "t" * 5_000 + "\n</output_tail>")
    # mini cuts from 10,000 characters on; 9,999 pass whole
    assert truncate_observation("x" * 9_999, 10_000, "mini-swe-agent") == "x" * 9_999
    assert truncate_observation("x" * 10_000, 10_000, "mini-swe-agent") != "x" * 10_000


def test_swe_agent_truncation_keeps_the_head_and_says_how_much_went() -> None:
    cut = truncate_observation("a" * 150, 100, "swe-agent")
    assert cut.startswith("a" * 100 + "<response clipped><NOTE>Observations should not exceeded")
    assert "50 characters were elided" in cut
    assert truncate_observation("a" * 100, 100, "swe-agent") == "a" * 100


def test_pgs_truncation_cuts_the_middle() -> None:
    cut = truncate_observation("a" * 100 + "b" * 100, 100, "pgs")
    assert cut.startswith("a" * 50 + "\n[... 100 characters omitted")
    assert cut.endswith("b" * 50)
