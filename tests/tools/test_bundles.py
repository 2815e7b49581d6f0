"""Our bundles (edit, search, submit) as the model uses them, in LocalSandbox and DockerSandbox."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.core.tools import OutputKind, classify_output, default_bundles_dir
from tests.support.repos import make_repo
from tests.support.toolbox import SANDBOX_KINDS, ToolBox, toolbox

LINES = "".join(f"line {i}\n" for i in range(1, 11))


FILES = {
    "ten.txt": LINES,
    "pkg/mod.py": "def f():\n    return 1\n\n\ndef g():\n    return 1\n",
    "pkg/sub/deep/deeper.py": "X = 1\n",
    ".hidden/secret.txt": "hidden\n",
}
#: Puts the repository and the tools' state files back as they were (a container is slow to
#: start, so the tests of one module share it).
RESET = (
    "git reset -q --hard && git clean -qfdx && "
    'rm -f "$HOME/.pgs_edit_history" "$HOME/state.json" "$HOME/model.patch" && echo reset'
)


@pytest.fixture(scope="module", params=SANDBOX_KINDS)
def shared_box(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ToolBox]:
    repo = make_repo(tmp_path_factory.mktemp("bundles") / "repo", FILES)
    with toolbox(request.param, repo, request) as box:
        yield box


@pytest.fixture
def tb(shared_box: ToolBox) -> ToolBox:
    reset = shared_box.sh(RESET)
    assert reset.ok, reset.output
    return shared_box


def unchanged(tb: ToolBox, relative: str, original: str) -> bool:
    return tb.read(relative) == original


# -- str_replace_editor -----------------------------------------------------------------------


def test_view_whole_file_is_cat_n(tb: ToolBox) -> None:
    out = tb.call("str_replace_editor", command="view", path=tb.path("ten.txt"))
    assert out.exit_code == 0
    assert "     1\tline 1\n" in out.output and "    10\tline 10\n" in out.output


@pytest.mark.parametrize(
    ("view_range", "first", "last"), [([3, 5], 3, 5), ([8, -1], 8, 10), ([9, 40], 9, 10)]
)
def test_view_range(tb: ToolBox, view_range: list[int], first: int, last: int) -> None:
    out = tb.call(
        "str_replace_editor", command="view", path=tb.path("ten.txt"), view_range=view_range
    )
    numbers = [int(line.split("\t")[0]) for line in out.output.splitlines() if "\t" in line]
    assert numbers == list(range(first, last + 1))


def test_view_range_outside_the_file_is_an_error(tb: ToolBox) -> None:
    out = tb.call(
        "str_replace_editor", command="view", path=tb.path("ten.txt"), view_range=[11, 12]
    )
    assert out.exit_code == 1 and "Invalid `view_range`" in out.output and "[1, 10]" in out.output


def test_view_directory_two_levels_without_hidden(tb: ToolBox) -> None:
    out = tb.call("str_replace_editor", command="view", path=tb.repo)
    listed = set(out.output.splitlines()[1:])
    assert {tb.path("ten.txt"), tb.path("pkg"), tb.path("pkg/mod.py"), tb.path("pkg/sub")} <= listed
    assert tb.path("pkg/sub/deep") not in listed  # third level
    assert not [p for p in listed if "/." in p]  # .git, .hidden


def test_relative_path_is_refused_with_a_hint(tb: ToolBox) -> None:
    out = tb.call("str_replace_editor", command="view", path="ten.txt")
    assert out.exit_code == 1
    assert "not an absolute path" in out.output and tb.path("ten.txt") in out.output


def test_str_replace_unique_edits_and_shows_snippet(tb: ToolBox) -> None:
    out = tb.call(
        "str_replace_editor",
        command="str_replace",
        path=tb.path("ten.txt"),
        old_str="line 5\n",
        new_str="LINE $FIVE 'quoted' \"double\"\n",
    )
    assert out.exit_code == 0, out.output
    assert "     5\tLINE $FIVE 'quoted' \"double\"" in out.output
    assert "     1\t" in out.output and "     9\t" in out.output and "    10\t" not in out.output
    assert tb.read("ten.txt") == LINES.replace("line 5\n", "LINE $FIVE 'quoted' \"double\"\n")


def test_str_replace_absent_text_is_refused_and_file_unchanged(tb: ToolBox) -> None:
    out = tb.call(
        "str_replace_editor",
        command="str_replace",
        path=tb.path("ten.txt"),
        old_str="nope",
        new_str="x",
    )
    assert out.exit_code == 1 and "did not appear verbatim" in out.output
    assert unchanged(tb, "ten.txt", LINES)


def test_str_replace_repeated_text_is_refused_with_count(tb: ToolBox) -> None:
    original = tb.read("pkg/mod.py")
    out = tb.call(
        "str_replace_editor",
        command="str_replace",
        path=tb.path("pkg/mod.py"),
        old_str="    return 1",
        new_str="    return 2",
    )
    assert out.exit_code == 1
    assert "occurs 2 times" in out.output and "lines 2, 6" in out.output
    assert unchanged(tb, "pkg/mod.py", original)


def test_insert_at_top_and_after_last_line(tb: ToolBox) -> None:
    path = tb.path("ten.txt")
    assert tb.call(
        "str_replace_editor", command="insert", path=path, insert_line=0, new_str="top"
    ).ok
    out = tb.call(
        "str_replace_editor", command="insert", path=path, insert_line=11, new_str="end\n"
    )
    assert out.ok and "    12\tend" in out.output
    assert tb.read("ten.txt") == "top\n" + LINES + "end\n"
    bad = tb.call("str_replace_editor", command="insert", path=path, insert_line=99, new_str="x")
    assert bad.exit_code == 1 and "[0, 12]" in bad.output


def test_undo_restores_each_previous_version(tb: ToolBox) -> None:
    path = tb.path("ten.txt")
    tb.call(
        "str_replace_editor", command="str_replace", path=path, old_str="line 1\n", new_str="one\n"
    )
    tb.call("str_replace_editor", command="insert", path=path, insert_line=2, new_str="inserted")
    assert tb.call("str_replace_editor", command="undo_edit", path=path).ok
    assert tb.read("ten.txt") == LINES.replace("line 1\n", "one\n")
    assert tb.call("str_replace_editor", command="undo_edit", path=path).ok
    assert tb.read("ten.txt") == LINES
    out = tb.call("str_replace_editor", command="undo_edit", path=path)
    assert out.exit_code == 1 and "No edit history" in out.output


def test_create_refuses_existing_file_and_undo_removes_a_created_one(tb: ToolBox) -> None:
    out = tb.call("str_replace_editor", command="create", path=tb.path("ten.txt"), file_text="x")
    assert out.exit_code == 1 and "already exists" in out.output and unchanged(tb, "ten.txt", LINES)
    new = tb.path("new/dir/file.py")
    assert tb.call("str_replace_editor", command="create", path=new, file_text="A = 1\n").ok
    assert tb.read("new/dir/file.py") == "A = 1\n"
    assert tb.call("str_replace_editor", command="undo_edit", path=new).ok
    assert not tb.sh(f"test -e {new}").ok


def test_undo_history_lives_in_the_home_folder(tb: ToolBox) -> None:
    path = tb.path("ten.txt")
    tb.call("str_replace_editor", command="str_replace", path=path, old_str="line 3", new_str="3")
    history = json.loads(tb.sandbox.read_file(f"{tb.home}/.pgs_edit_history"))
    assert history[path] == [LINES]


# -- submit and state -------------------------------------------------------------------------


def test_submit_has_new_file_never_scratch_and_keeps_index(tb: ToolBox) -> None:
    tb.call("str_replace_editor", command="create", path=tb.path("added.py"), file_text="NEW = 1\n")
    tb.call("str_replace_editor", command="create", path=tb.path(".pgs/test_p.py"), file_text="p\n")
    tb.call(
        "str_replace_editor",
        command="str_replace",
        path=tb.path("ten.txt"),
        old_str="line 2\n",
        new_str="",
    )
    status_before = tb.sh("git status --porcelain").output
    result = tb.sh(tb.toolset.to_command("submit", {}))
    out = classify_output(result.output, tb.toolset.role("submit"))
    assert result.ok and out.kind is OutputKind.SUBMISSION
    patch = tb.sandbox.read_file(f"{tb.home}/model.patch").decode()
    assert "+++ b/added.py" in patch and "-line 2" in patch
    assert ".pgs" not in patch
    assert patch == tb.sandbox.diff()
    assert tb.sh("git status --porcelain").output == status_before  # index untouched
    assert tb.sh("git diff --cached --name-only").output == ""
    # (the clone is removed after: in the local sandbox mktemp makes it in the host's /tmp)
    applies = tb.sh(
        'c=$(mktemp -d) && git clone -q . "$c/clone" && '
        '(cd "$c/clone" && git apply --check "$HOME/model.patch"); s=$?; rm -rf "$c"; [ "$s" = 0 ]'
    )
    assert applies.ok, applies.output


def test_submit_with_no_change_gives_an_empty_patch(tb: ToolBox) -> None:
    out = classify_output(tb.call("submit").output, tb.toolset.role("submit"))
    assert out.kind is OutputKind.SUBMISSION and tb.sandbox.diff() == ""


def test_state_command_merges_working_dir_and_diff(tb: ToolBox) -> None:
    state_file = f"{tb.home}/state.json"
    tb.sandbox.write_file(state_file, json.dumps({"kept": 1}))
    tb.call(
        "str_replace_editor",
        command="str_replace",
        path=tb.path("ten.txt"),
        old_str="line 7",
        new_str="7",
    )
    state = tb.toolset.state(tb.sandbox, tb.env)
    assert state["working_dir"] == tb.repo
    assert "+7" in state["diff"] and state["kept"] == 1
    assert json.loads(tb.sandbox.read_file(state_file)) == state


# -- search -----------------------------------------------------------------------------------


def test_search_dir_counts_per_file(tb: ToolBox) -> None:
    out = tb.call("search_dir", search_term="return 1")
    assert f'Found 2 matches for "return 1" in {tb.repo}:' in out.output
    assert f"{tb.path('pkg/mod.py')} (2 matches)" in out.output
    assert "secret" not in tb.call("search_dir", search_term="hidden").output


def test_search_file_and_find_file(tb: ToolBox) -> None:
    out = tb.call("search_file", search_term="def ", file=tb.path("pkg/mod.py"))
    assert "Line 1:def f():" in out.output and "Line 5:def g():" in out.output
    found = tb.call("find_file", file_name="*.py", dir=tb.path("pkg"))
    assert "Found 2 matches" in found.output and tb.path("pkg/sub/deep/deeper.py") in found.output
    assert "No matches found" in tb.call("find_file", file_name="nothing.rs").output


def test_search_file_defaults_to_the_file_last_viewed(tb: ToolBox) -> None:
    tb.call("str_replace_editor", command="view", path=tb.path("pkg/mod.py"))
    assert "Line 2:    return 1" in tb.call("search_file", search_term="return").output


def test_searches_are_capped(tb: ToolBox) -> None:
    many = " && ".join(
        [
            "mkdir -p many",
            "for i in $(seq 1 101); do echo needle > many/f$i.txt; done",
            "for i in $(seq 1 101); do echo needle; done > many_lines.txt",
        ]
    )
    assert tb.sh(many).ok
    assert "More than 100 files matched" in tb.call("search_dir", search_term="needle").output
    assert "More than 100 files matched" in tb.call("find_file", file_name="f*.txt").output
    lines = tb.call("search_file", search_term="needle", file=tb.path("many_lines.txt"))
    assert "More than 100 lines matched" in lines.output


# -- the scripts themselves -------------------------------------------------------------------


def _scripts() -> list[Path]:
    root = default_bundles_dir()
    return sorted([*root.glob("*/bin/*"), *root.glob("*/lib/*.py")])


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_scripts_run_on_python_37_and_are_executable(script: Path) -> None:
    source = script.read_text()
    ast.parse(
        source, filename=str(script), feature_version=(3, 7)
    )  # the sandbox's system Python may be old
    if script.parent.name == "bin":
        assert source.startswith("#!/usr/bin/env python3\n")
        assert script.stat().st_mode & 0o111
