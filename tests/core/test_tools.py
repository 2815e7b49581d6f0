"""The bundle loader: validation, OpenAI schemas, installing. Tool calls back to commands are in
test_tool_calls.py, the output sentinels in test_tool_sentinels.py."""

# ruff: noqa: E501  (the SWE-agent configs below are kept as that project writes them)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.core.tools import BASH_TOOL, Bundle, Toolset, default_bundle_paths, default_bundles_dir
from agent.errors import ToolConfigError, ToolInstallError
from envs.local import LocalSandbox
from tests.support.bundles import ECHO_ARGV, arg, make_bundle, tool
from tests.support.repos import make_repo

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
