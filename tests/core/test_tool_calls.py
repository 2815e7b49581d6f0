"""Tool calls back to commands: absent optional arguments, the bash tool, the slips models make,
bad calls (a message for the model), and arguments (an ``end_name`` body too) reaching the script
verbatim in a real sandbox."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.core.tools import Toolset
from agent.errors import FormatError, ToolCallError
from tests.support.bundles import ECHO_STDIN, arg, make_bundle, tool
from tests.support.repos import make_repo
from tests.support.toolbox import SANDBOX_KINDS, ToolBox, toolbox


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
