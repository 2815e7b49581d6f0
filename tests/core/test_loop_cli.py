"""``pgs run`` on the command line: a missing repository, an empty issue, bad config files, an
unknown tool bundle, a dirty tree, an unreachable server and a refused key are each one error
line; the demo builds its repository's image and its patch passes the hidden tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.repos import git, make_repo
from tests.support.textutil import FIX_STEPS, cli_error, closed_port, run_argv


def test_cli_rejects_a_missing_repo_and_a_folder_without_git(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(capsys, *run_argv(tmp_path / "nope"))
    assert "does not exist" in line and "nope" in line
    (tmp_path / "plain").mkdir()
    line = cli_error(capsys, *run_argv(tmp_path / "plain"))
    assert "not a git repository" in line and "git init" in line


def test_cli_rejects_an_empty_issue(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "issue.md"
    empty.write_text("  \n")
    argv = run_argv(repo)
    argv[argv.index("--issue") + 1] = str(empty)
    assert "is empty" in cli_error(capsys, *argv)
    argv[argv.index("--issue") + 1] = ""
    assert "--issue text is empty" in cli_error(capsys, *argv)


def test_cli_rejects_bad_config_files_naming_the_field(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agent:\n  step_limit: [1,\n")
    line = cli_error(capsys, *run_argv(repo, "--config", str(config)))
    assert "not valid YAML at line" in line
    config.write_text("agent:\n  step_limit: -1\n")
    assert "agent.step_limit" in cli_error(capsys, *run_argv(repo, "--config", str(config)))
    config.write_text("agent:\n  step_limmit: 3\n")
    assert "agent.step_limmit" in cli_error(capsys, *run_argv(repo, "--config", str(config)))


def test_cli_rejects_an_unknown_tool_bundle(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundles = json.dumps([str(tmp_path / "no-such-bundle")])
    # The model is never asked (no server at the URL): the bundle is the command's mistake.
    argv = run_argv(repo, "--tools.bundles", bundles, "--no-model.check-endpoint")
    line = cli_error(capsys, *argv)
    assert "no-such-bundle" in line and "no such folder" in line


def test_cli_dirty_tree_needs_allow_dirty_and_the_patch_holds_only_the_agent_change(
    repo: Path, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "README.md").write_text("text helpers, edited by the user\n")
    (repo / "notes.txt").write_text("the user's notes\n")
    line = cli_error(capsys, *run_argv(repo))
    assert "uncommitted changes" in line and "--allow-dirty" in line

    out = tmp_path / "out"
    with ScriptedServer(FIX_STEPS) as server:
        extra = ["--allow-dirty", "--image", base_image, "--output-dir", str(out)]
        code = main(run_argv(repo, *extra, url=server.url))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    patch = next(out.glob("*/*.patch")).read_text()
    assert patch == captured.out
    assert "textutil.py" in patch
    assert "README.md" not in patch and "notes.txt" not in patch
    # The patch applies on top of the user's tree, which the run left as it was.
    assert git(repo, "status", "--porcelain").split() == ["M", "README.md", "??", "notes.txt"]
    subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=patch, text=True, check=True)


def test_cli_unreachable_server_is_one_error_line(
    repo: Path, base_image: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = run_argv(repo, "--image", base_image, "--output-dir", str(tmp_path / "out"), url=url)
    line = cli_error(capsys, *argv)  # found before the run: nothing started, nothing written
    assert f"cannot reach the model's server at {url}" in line and "--base-url" in line
    assert not (tmp_path / "out").exists()


def test_cli_refused_api_key_is_one_error_line(
    repo: Path, base_image: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with ScriptedServer([{"error": 401}]) as server:
        argv = run_argv(
            repo, "--image", base_image, "--output-dir", str(tmp_path / "out"), url=server.url
        )
        line = cli_error(capsys, *argv, code=1)
    assert "API key was refused" in line and "OPENAI_API_KEY" in line


def test_demo_builds_the_repository_image_and_its_patch_passes_the_hidden_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    code = main(["demo", "--output-dir", str(tmp_path / "demo")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (
        "hidden tests on the patched repository: PASS (sealed: in a fresh container of the "
        "repository's image, never touched by the agent)"
    ) in captured.err.splitlines()
    assert "exit status: submitted" in captured.err
    assert "+    middle = len(ordered) // 2" in captured.out


def test_cli_repository_image_at_another_commit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    from agent.cli import make_example_repo
    from envs.images import build_repo_image

    repo = make_example_repo(tmp_path / "stats")
    image = build_repo_image(repo).tag  # the demo's image: cached after the first build
    make_repo(repo, {"stats.py": (repo / "stats.py").read_text() + "\n# moved on\n"}, "later")
    with ScriptedServer([]) as server:  # the model answers: the image is what is refused
        argv = run_argv(
            repo, "--image", image, "--output-dir", str(tmp_path / "out"), url=server.url
        )
        line = cli_error(capsys, *argv)
        assert not server.requests
    assert "the image holds a repository at /repo at commit" in line
    assert "pgs env build" in line
