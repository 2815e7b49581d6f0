"""The output sentinels of tool bundles (which role a command has, and which of its outputs count
as a submission, a retry or a forfeit), and the names agent/core/tools.py keeps."""

from __future__ import annotations

import pytest

from agent.core.tools import OutputKind, Role, ToolOutput, Toolset, classify_output


def test_the_submission_marker_counts_only_in_a_submit_tools_output() -> None:
    printed = "note\n<<SWE_AGENT_SUBMISSION>>\ndiff --git a/x b/x\n+1\n<<SWE_AGENT_SUBMISSION>>\n"
    out = classify_output(printed, Role.SUBMIT)
    assert (out.kind, out.text) == (OutputKind.SUBMISSION, "note")
    for role in (Role.COMMAND, Role.TOOL, Role.FORFEIT):  # `cat NOTES.md`: just text
        assert classify_output(printed, role) == ToolOutput(OutputKind.NORMAL, printed)


@pytest.mark.parametrize(
    ("sentinel", "kind", "role"),
    [
        ("###SWE-AGENT-RETRY-WITH-OUTPUT###", OutputKind.RETRY_WITH_OUTPUT, Role.TOOL),
        ("###SWE-AGENT-RETRY-WITHOUT-OUTPUT###", OutputKind.RETRY_WITHOUT_OUTPUT, Role.SUBMIT),
        ("###SWE-AGENT-EXIT-FORFEIT###", OutputKind.EXIT_FORFEIT, Role.FORFEIT),
    ],
)
def test_other_sentinels(sentinel: str, kind: OutputKind, role: Role) -> None:
    out = classify_output(f"{sentinel}\nplease review\n", role)
    assert out.kind is kind and out.text == "please review"
    plain = classify_output(f"{sentinel}\nplease review\n", Role.COMMAND)
    assert plain.kind is OutputKind.NORMAL and sentinel in plain.text


def test_forfeit_counts_only_from_a_forfeit_tool() -> None:
    out = classify_output("###SWE-AGENT-EXIT-FORFEIT###\n", Role.TOOL)
    assert out.kind is OutputKind.NORMAL


def test_a_commands_role_is_the_bundle_tool_it_runs() -> None:
    toolset = Toolset.from_paths()
    assert toolset.role("submit") is Role.SUBMIT
    assert toolset.role("", "submit") is Role.SUBMIT
    assert toolset.role("cd /repo && submit") is Role.SUBMIT
    assert toolset.role("cat NOTES.md") is Role.COMMAND
    assert toolset.role("echo submit; grep -r submit .") is Role.COMMAND
    assert toolset.role("cat NOTES.md", "bash") is Role.COMMAND
    assert toolset.role("search_file x y.py", "search_file") is Role.TOOL
    assert toolset.role("exit_forfeit") is Role.COMMAND  # no such tool in our bundles
    declared = Toolset.from_paths(submit_tools=["search_file"])
    assert declared.role("search_file x") is Role.SUBMIT
    assert declared.role("submit") is Role.TOOL


def test_plain_output_is_normal() -> None:
    out = classify_output("hello\n", Role.SUBMIT)
    assert out.kind is OutputKind.NORMAL and out.text == "hello\n"


def test_the_names_other_code_imports_stay_in_agent_core_tools() -> None:
    """tools.py re-exports what moved to bundles.py and tool_output.py (issue 14)."""
    from agent.core import bundles, tool_output, toolenv, tools

    assert tools.Bundle is bundles.Bundle and tools.ToolConfigError is bundles.ToolConfigError
    assert tools.classify_output is tool_output.classify_output
    assert tools.ToolInstallError is toolenv.ToolInstallError
    assert all(hasattr(tools, name) for name in tools.__all__)
