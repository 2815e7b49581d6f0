"""The bundle loader: validation, OpenAI schemas, tool calls back to commands, sentinels."""

# ruff: noqa: E501  (the SWE-agent configs below are kept as that project writes them)

from __future__ import annotations

import json
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.core.tools import (
    BASH_TOOL,
    Bundle,
    OutputKind,
    Role,
    ToolOutput,
    Toolset,
    classify_output,
    default_bundle_paths,
    default_bundles_dir,
)
from agent.errors import FormatError, ToolCallError, ToolConfigError, ToolInstallError
from envs.local import LocalSandbox
from tests.support.repos import make_repo
from tests.support.toolbox import SANDBOX_KINDS, ToolBox, toolbox

#: SWE-agent's tools/search/config.yaml, as that project ships it.
SWE_AGENT_SEARCH = """\
tools:
  find_file:
    signature: "find_file <file_name> [<dir>]"
    docstring: |
      finds all files with the given name or pattern in the specified directory
      Returns: Total count and list of absolute file paths
    arguments:
      - name: file_name
        type: string
        description: "the name of the file or pattern to search for. supports shell-style wildcards (e.g. *.py)"
        required: true
      - name: dir
        type: string
        description: "the directory to search in (if not provided, searches in the current directory)"
        required: false
  search_dir:
    signature: "search_dir <search_term> [<dir>]"
    docstring: "searches for search_term in all files in dir. If dir is not provided, searches in the current directory"
    arguments:
      - name: search_term
        type: string
        description: "the term to search for"
        required: true
      - name: dir
        type: string
        description: "the directory to search in (if not provided, searches in the current directory)"
        required: false
"""

#: SWE-agent's tools/edit_anthropic/config.yaml (docstring shortened), as that project ships it.
SWE_AGENT_EDIT = """\
tools:
  str_replace_editor:
    signature: |
      str_replace_editor <command> <path> [<file_text>] [<view_range>] [<old_str>] [<new_str>] [<insert_line>]
    # This docstring was shortened
    docstring: >
      Custom editing tool for viewing, creating and editing files
      * State is persistent across command calls and discussions with the user
    arguments:
      - name: command
        type: string
        description: "The commands to run. Allowed options are: `view`, `create`, `str_replace`, `insert`, `undo_edit`."
        required: true
        enum: ["view", "create", "str_replace", "insert", "undo_edit"]
      - name: path
        type: string
        description: "Absolute path to file or directory, e.g. `/testbed/file.py` or `/testbed`."
        required: true
      - name: file_text
        type: string
        description: "Required parameter of `create` command, with the content of the file to be created."
        required: false
        argument_format: "--file_text {{value}}"
      - name: old_str
        type: string
        description: "Required parameter of `str_replace` command containing the string in `path` to replace."
        required: false
        argument_format: "--old_str {{value}}"
      - name: new_str
        type: string
        description: "Optional parameter of `str_replace` command containing the new string."
        required: false
        argument_format: "--new_str {{value}}"
      - name: insert_line
        type: integer
        description: "Required parameter of `insert` command."
        required: false
        argument_format: "--insert_line {{value}}"
      - name: view_range
        type: array
        items:
          type: integer
        description: "Optional parameter of `view` command when `path` points to a file."
        required: false
        argument_format: "--view_range {{value|join(' ')}}"
state_command: "_state_anthropic"
"""

#: SWE-agent's tools/registry/install.sh: puts the bundle's lib/ on PYTHONPATH.
SWE_AGENT_REGISTRY_INSTALL = """\
#!/usr/bin/env bash

bundle_dir=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd )

export PYTHONPATH="$bundle_dir/lib${PYTHONPATH:+:$PYTHONPATH}"
"""

ECHO_ARGV = """\
#!/usr/bin/env python3
import json, sys
print(json.dumps(sys.argv[1:]))
"""

ECHO_STDIN = """\
#!/usr/bin/env python3
import json, sys
print(json.dumps({"argv": sys.argv[1:], "stdin": sys.stdin.read()}))
"""


def make_bundle(
    root: Path, name: str, config: str | dict[str, Any], scripts: dict[str, str] | None = None
) -> Path:
    """A bundle folder: config.yaml plus bin/ scripts (default: one that echoes argv as JSON)."""
    folder = root / name
    (folder / "bin").mkdir(parents=True)
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False)
    (folder / "config.yaml").write_text(text)
    if scripts is None:
        raw = yaml.safe_load(text)
        scripts = {tool: ECHO_ARGV for tool in raw.get("tools") or {}}
    for script, source in scripts.items():
        target = folder / "bin" / script
        target.write_text(source)
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def tool(name: str, signature: str | None, arguments: list[dict[str, Any]], **extra: Any) -> dict:
    spec: dict[str, Any] = {"docstring": f"the {name} tool", "arguments": arguments, **extra}
    if signature is not None:
        spec["signature"] = signature
    return {"tools": {name: spec}}


def arg(name: str, required: bool = True, type: str = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type, "description": f"the {name}", "required": required, **extra}


@pytest.fixture
def ours() -> Toolset:
    return Toolset.from_paths()


# -- loading and validation -------------------------------------------------------------------


def test_default_bundles_are_found_and_load(ours: Toolset) -> None:
    assert default_bundles_dir().name == "tools"
    assert [p.name for p in default_bundle_paths()] == ["edit", "search", "submit"]
    names = [t["function"]["name"] for t in ours.openai_tools()]
    assert names == [
        BASH_TOOL,
        "str_replace_editor",
        "find_file",
        "search_dir",
        "search_file",
        "submit",
    ]
    assert ours.state_commands == ["_state"]


def test_openai_schema_of_the_editor(ours: Toolset) -> None:
    schema = next(t for t in ours.openai_tools() if t["function"]["name"] == "str_replace_editor")
    assert schema["type"] == "function"
    params = schema["function"]["parameters"]
    assert params["required"] == ["command", "path"]
    assert params["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert",
        "undo_edit",
    ]
    assert params["properties"]["view_range"] == {
        "type": "array",
        "description": params["properties"]["view_range"]["description"],
        "items": {"type": "integer"},
    }
    assert "cat -n" in schema["function"]["description"]
    bash = ours.openai_tools()[0]["function"]
    assert bash["parameters"]["required"] == ["command"]
    json.dumps(ours.openai_tools())  # serialisable as sent to the API


def test_text_docs_has_one_usage_line_per_tool(ours: Toolset) -> None:
    docs = ours.text_docs()
    for name in ["str_replace_editor", "find_file", "search_dir", "search_file", "submit"]:
        assert any(line.startswith(name) for line in docs.splitlines()), name
    assert "str_replace_editor <command> <path> [--file_text <file_text>]" in docs
    assert "[--view_range <view_range>]" in docs


def test_missing_config_names_the_bundle(tmp_path: Path) -> None:
    (tmp_path / "empty_bundle" / "bin").mkdir(parents=True)
    with pytest.raises(ToolConfigError, match=r"'empty_bundle'.*config\.yaml is missing"):
        Bundle.load(tmp_path / "empty_bundle")


def test_missing_field_names_bundle_and_field(tmp_path: Path) -> None:
    broken = tool("t", "t <x>", [{"name": "x", "type": "string", "required": True}])
    with pytest.raises(ToolConfigError) as info:
        Bundle.load(make_bundle(tmp_path, "broken", broken))
    message = str(info.value)
    assert "'broken'" in message and "tools.t.arguments.0.description" in message
    assert "\n" not in message


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match=r"'odd'.*tools\.t\.colour"):
        Bundle.load(make_bundle(tmp_path, "odd", tool("t", "t", [], colour="red")))


def test_missing_executable_is_refused(tmp_path: Path) -> None:
    folder = make_bundle(tmp_path, "noexe", tool("t", "t", []), scripts={})
    with pytest.raises(ToolConfigError, match=r"'noexe'.*bin/t"):
        Bundle.load(folder)


@pytest.mark.parametrize(
    ("signature", "arguments"),
    [
        ("t <a>", [arg("a"), arg("b", required=False)]),  # b not in the signature
        ("t <a> [<b>]", [arg("a")]),  # b not declared
        ("t <a> <a>", [arg("a")]),  # named twice
    ],
)
def test_signature_must_name_exactly_the_arguments(
    tmp_path: Path, signature: str, arguments: list[dict[str, Any]]
) -> None:
    with pytest.raises(ToolConfigError, match=r"'sig'.*'signature'.*exactly the arguments"):
        Bundle.load(make_bundle(tmp_path, "sig", tool("t", signature, arguments)))


def test_required_argument_after_optional_is_refused(tmp_path: Path) -> None:
    config = tool("t", "t [<a>] <b>", [arg("a", required=False), arg("b")])
    with pytest.raises(ToolConfigError, match=r"'order'.*required argument 'b'.*optional"):
        Bundle.load(make_bundle(tmp_path, "order", config))


def test_duplicate_tool_across_bundles_is_refused(tmp_path: Path) -> None:
    one = make_bundle(tmp_path, "one", tool("t", "t", []))
    two = make_bundle(tmp_path, "two", tool("t", "t", []))
    with pytest.raises(ToolConfigError, match=r"'t' is already defined by bundle 'one'"):
        Toolset.from_paths([one, two])


def test_tool_named_bash_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match="built-in bash"):
        Bundle.load(make_bundle(tmp_path, "b", tool("bash", "bash <c>", [arg("c")])))


def test_swe_agent_bundles_load_unchanged(tmp_path: Path) -> None:
    search = make_bundle(tmp_path, "search", SWE_AGENT_SEARCH)
    edit = make_bundle(
        tmp_path,
        "edit_anthropic",
        SWE_AGENT_EDIT,
        {"str_replace_editor": ECHO_ARGV, "_state_anthropic": ""},
    )
    toolset = Toolset.from_paths([search, edit])
    assert toolset.state_commands == ["_state_anthropic"]
    # The commands are the ones SWE-agent itself would build for these calls.
    assert toolset.to_command("find_file", {"file_name": "*.py", "dir": "/testbed"}) == (
        "find_file '*.py' /testbed"
    )
    assert toolset.to_command("search_dir", {"search_term": "def f("}) == "search_dir 'def f('"
    assert (
        toolset.to_command(
            "str_replace_editor",
            {"command": "view", "path": "/testbed/a.py", "view_range": [3, -1]},
        )
        == "str_replace_editor view /testbed/a.py --view_range 3 -1"
    )
    assert (
        toolset.to_command(
            "str_replace_editor",
            {"command": "str_replace", "path": "/t/a.py", "old_str": "x = 1", "new_str": "x = 2"},
        )
        == "str_replace_editor str_replace /t/a.py --old_str 'x = 1' --new_str 'x = 2'"
    )


def test_values_that_are_not_strings_are_rendered_as_swe_agent_renders_them(
    tmp_path: Path,
) -> None:
    # SWE-agent's windowed_edit_replace `edit` (its config's signature and arguments), called
    # as gpt-4o called it in SWE-agent's test data (6e44b9__sweagenttestrepo-1c2844.traj,
    # history[6]): SWE-agent ran `edit '...' '...:' False`, Python's spelling of the boolean.
    edit = tool(
        "edit",
        "edit <search> <replace> [<replace-all>]",
        [arg("search"), arg("replace"), arg("replace-all", required=False, type="boolean")],
    )
    toolset = Toolset.from_paths([make_bundle(tmp_path, "windowed_edit_replace", edit)])
    call = {
        "search": "def division(a: float, b: float) -> float",
        "replace": "def division(a: float, b: float) -> float:",
        "replace-all": False,
    }
    assert toolset.to_command("edit", call) == (
        "edit 'def division(a: float, b: float) -> float' "
        "'def division(a: float, b: float) -> float:' False"
    )
    assert toolset.to_command("edit", {**call, "replace-all": True}).endswith(" True")


# -- installing -------------------------------------------------------------------------------


def test_install_sources_install_sh_and_keeps_its_exports(tmp_path: Path) -> None:
    """A registry-like bundle: install.sh exports PYTHONPATH; its tool imports from lib/."""
    folder = make_bundle(
        tmp_path,
        "registry",
        tool("hello", "hello", []),
        {"hello": "#!/usr/bin/env python3\nimport greeting\nprint(greeting.WORD)\n"},
    )
    (folder / "lib").mkdir()
    (folder / "lib" / "greeting.py").write_text("WORD = 'hello from lib'\n")
    (folder / "install.sh").write_text(SWE_AGENT_REGISTRY_INSTALL)
    (folder / "bin" / "hello").chmod(0o644)  # install makes bin/* executable
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    toolset = Toolset.from_paths([folder])
    with LocalSandbox(repo) as box:
        env = toolset.install(box)
        assert env["PYTHONPATH"].startswith(f"{box.home}/tools/registry/lib")
        assert env["PATH"].startswith(f"{box.home}/tools/registry/bin:")
        result = box.run(toolset.to_command("hello", {}), env=env)
        assert result.output == "hello from lib\n"


def test_failing_install_sh_is_reported(tmp_path: Path) -> None:
    folder = make_bundle(tmp_path, "bad", tool("t", "t", []))
    (folder / "install.sh").write_text("echo 'no network here' >&2\nfalse\n")
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    with LocalSandbox(repo) as box, pytest.raises(ToolInstallError, match=r"(?s)'bad'.*no network"):
        Toolset.from_paths([folder]).install(box)


# -- tool calls to commands -------------------------------------------------------------------


def test_absent_optional_arguments_leave_no_gaps(ours: Toolset) -> None:
    assert ours.to_command("find_file", {"file_name": "x.py"}) == "find_file x.py"
    assert ours.to_command("submit", {}) == "submit"
    assert ours.to_command(
        "str_replace_editor", {"command": "view", "path": "/r", "view_range": None}
    ) == ("str_replace_editor view /r")


def test_bash_tool_passes_the_command_as_is(ours: Toolset) -> None:
    assert (
        ours.to_command("bash", {"command": "ls | wc -l && echo $HOME"})
        == "ls | wc -l && echo $HOME"
    )
    assert ours.to_command("bash", '{"command": "pwd"}') == "pwd"  # raw JSON arguments


def test_common_model_slips_are_accepted(ours: Toolset) -> None:
    view = {"command": "view", "path": "/r/a.py", "view_range": "[1, 5]"}
    assert ours.to_command("str_replace_editor", view).endswith("--view_range 1 5")
    insert = {"command": "insert", "path": "/r/a.py", "insert_line": "3", "new_str": "x"}
    assert "--insert_line 3" in ours.to_command("str_replace_editor", insert)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("vim", {}, "Unknown tool 'vim'"),
        ("find_file", {}, "Required argument `file_name`"),
        (
            "find_file",
            {"file_name": "a", "depth": 2},
            "Unexpected argument(s) for find_file: depth",
        ),
        ("str_replace_editor", {"command": "delete", "path": "/a"}, "must be one of: view"),
        ("str_replace_editor", {"command": "view", "path": 3}, "must be of type string"),
        (
            "str_replace_editor",
            {"command": "view", "path": "/a", "view_range": [1]},
            "[start, end]",
        ),
        ("str_replace_editor", {"command": "insert", "path": "/a", "insert_line": True}, "integer"),
        ("find_file", "{not json", "not valid JSON"),
        ("find_file", ["a"], "must be a JSON object"),
        ("find_file", {"file_name": "a\0b"}, "NUL"),
        ("bash", {"command": "  "}, "non-empty"),
    ],
)
def test_bad_calls_raise_a_message_for_the_model(
    ours: Toolset, name: str, arguments: Any, message: str
) -> None:
    with pytest.raises(ToolCallError) as info:
        ours.to_command(name, arguments)
    assert message in str(info.value)
    assert isinstance(info.value, FormatError)


END_NAME_TOOL = tool(
    "write_note",
    "write_note <title> [<tag>]\n<body>\nend_of_note",
    [arg("title"), arg("body"), arg("tag", required=False)],
    end_name="end_of_note",
)


@pytest.fixture(scope="module", params=SANDBOX_KINDS)
def custom_box(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ToolBox]:
    root = tmp_path_factory.mktemp("custom")
    echo = make_bundle(
        root,
        "echo",
        {
            "tools": {
                "echo_args": {
                    "signature": "echo_args <first> [<second>] [<numbers>]",
                    "docstring": "prints its argv",
                    "arguments": [
                        arg("first"),
                        arg("second", required=False, argument_format="--second={{value}}"),
                        arg(
                            "numbers",
                            False,
                            "array",
                            items={"type": "integer"},
                            argument_format="--numbers {{value|join(' ')}}",
                        ),
                    ],
                }
            }
        },
    )
    note = make_bundle(root, "note", END_NAME_TOOL, {"write_note": ECHO_STDIN})
    repo = make_repo(root / "repo", {"a.txt": "a\n"})
    with toolbox(request.param, repo, request, [echo, note]) as box:
        yield box


def test_end_name_body_reaches_the_script_verbatim(custom_box: ToolBox) -> None:
    body = 'He said "don\'t" and $HOME `whoami` \\n\n  indented\n\nend_of_note_not_quite'
    command = custom_box.toolset.to_command(
        "write_note", {"title": "a title; rm -rf /", "body": body}
    )
    assert command.splitlines()[0] == "write_note 'a title; rm -rf /' << 'end_of_note'"
    got = json.loads(custom_box.sh(command).output)
    assert got == {"argv": ["a title; rm -rf /"], "stdin": body + "\n"}


def test_end_name_line_inside_the_body_is_refused(custom_box: ToolBox) -> None:
    with pytest.raises(ToolCallError, match="end_of_note"):
        custom_box.toolset.to_command("write_note", {"title": "t", "body": "a\nend_of_note\nb"})


#: Any text a command can carry: no NUL, no lone surrogates (JSON from the API has neither).
NO_NUL = st.text().map(lambda s: s.replace("\0", ""))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=NO_NUL, second=st.none() | NO_NUL, numbers=st.none() | st.lists(st.integers(), max_size=3)
)
@example(first="-x", second="--second=y", numbers=[-1, 0])
@example(first="'\"$(echo hi)`id`\\\n\t ", second="", numbers=None)
def test_arguments_reach_the_script_verbatim(
    custom_box: ToolBox, first: str, second: str | None, numbers: list[int] | None
) -> None:
    command = custom_box.toolset.to_command(
        "echo_args", {"first": first, "second": second, "numbers": numbers}
    )
    expected = [first]
    if second is not None:
        expected.append(f"--second={second}")
    if numbers is not None:
        expected += ["--numbers", *map(str, numbers)]
    assert json.loads(custom_box.sh(command).output) == expected


@settings(max_examples=300)
@given(path=NO_NUL, old=NO_NUL, new=NO_NUL)
def test_editor_commands_split_back_into_their_arguments(path: str, old: str, new: str) -> None:
    toolset = Toolset.from_paths()
    command = toolset.to_command(
        "str_replace_editor",
        {"command": "str_replace", "path": path, "old_str": old, "new_str": new},
    )
    assert shlex.split(command) == [
        "str_replace_editor",
        "str_replace",
        path,
        "--old_str",
        old,
        "--new_str",
        new,
    ]


# -- output sentinels -------------------------------------------------------------------------


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


# -- the module's surface ---------------------------------------------------------------------


def test_the_names_other_code_imports_stay_in_agent_core_tools() -> None:
    """tools.py re-exports what moved to bundles.py and tool_output.py (issue 14)."""
    from agent.core import bundles, tool_output, toolenv, tools

    assert tools.Bundle is bundles.Bundle and tools.ToolConfigError is bundles.ToolConfigError
    assert tools.classify_output is tool_output.classify_output
    assert tools.ToolInstallError is toolenv.ToolInstallError
    assert all(hasattr(tools, name) for name in tools.__all__)
