"""What pgs leaves in the repository it fixes: nothing but the patch. ``pgs run --repo .`` from
inside the repository writes ``./trajectories``, which git ignores (pgs made it with a
``.gitignore`` of ``*``), so the next run is not refused as dirty; an untracked issue file given
as ``--issue`` is not dirt either, and neither is carried into the patch; with the local sandbox
the bytecode Python writes when the agent imports a module is never in the patch, nor written
by ``--apply``, though the repository ignores none of it, while a ``.pyc`` the repository
tracks is still the agent's to change. The real command line (in this process), a real git
repository, the scripted model over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.models.script_server import ScriptedServer
from tests.support.inprocess import Ran, run_pgs
from tests.support.repos import git, make_repo
from tests.support.textutil import BUGGY, SUBMIT, bash, run_argv

Capture = pytest.CaptureFixture[str]
FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py", "Fix it.")
#: Importing the module writes __pycache__/textutil.cpython-*.pyc into the repository.
IMPORT = bash("python3 -c 'import textutil; print(textutil.shout(\"hi\"))'", "Check it.")


def pgs(capfd: Capture, cwd: Path, argv: list[str]) -> Ran:
    return run_pgs(
        [*argv, "--sandbox", "local", "--quiet"],
        capfd,
        cwd=cwd,
        env={"DOCKER_HOST": "unix:///nonexistent/no-docker.sock"},
    )


def patches(repo: Path) -> list[str]:
    return [p.read_text() for p in sorted((repo / "trajectories").glob("*/*/*.patch"))]


def test_two_runs_in_a_row_from_inside_the_repo_with_an_untracked_issue_file(
    tmp_path: Path, capfd: Capture
) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    (repo / "issue.md").write_text("shout() does not shout\n\nIt must upper-case the text.\n")
    with ScriptedServer([FIX, SUBMIT, FIX, SUBMIT]) as server:
        for _ in range(2):
            done = pgs(capfd, repo, run_argv(Path("."), url=server.url, issue="issue.md"))
            assert done.returncode == 0, done.stderr
            assert "uncommitted changes" not in done.stderr
    assert (repo / "trajectories" / ".gitignore").read_text().splitlines()[-1] == "*"
    # The user's working tree: their issue file, nothing of pgs's.
    assert git(repo, "status", "--porcelain") == "?? issue.md\n"
    runs = patches(repo)
    assert len(runs) == 2
    for patch in runs:
        assert "+    return text.upper()" in patch
        assert "issue.md" not in patch and "trajectories" not in patch


def test_a_modified_tracked_file_is_still_dirt(tmp_path: Path, capfd: Capture) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    (repo / "issue.md").write_text("shout() does not shout\n")
    (repo / "README.md").write_text("changed\n")
    done = pgs(capfd, repo, run_argv(Path("."), issue="issue.md"))
    assert done.returncode == 2, done.stderr
    assert "uncommitted changes (' M README.md'...)" in done.stderr
    assert not (repo / "trajectories").exists()  # refused before anything was written


def test_the_bytecode_of_an_import_is_not_in_the_patch_nor_applied(
    tmp_path: Path, capfd: Capture
) -> None:
    # No .gitignore at all; a .pyc the repository tracks is the agent's to change.
    files = {**BUGGY, "vendored/legacy.pyc": "tracked bytes\n"}
    repo = make_repo(tmp_path / "textutil", files)
    change_tracked = bash("echo changed > vendored/legacy.pyc", "Refresh the vendored file.")
    out = tmp_path / "out"
    with ScriptedServer([IMPORT, FIX, IMPORT, change_tracked, SUBMIT]) as server:
        done = pgs(
            capfd, tmp_path, [*run_argv(repo, url=server.url), "--output-dir", str(out), "--apply"]
        )
    assert done.returncode == 0, done.stderr
    assert any("HI!" in json.dumps(r["messages"][-1]) for r in server.requests)  # it imported
    (patch_file,) = out.glob("*/*.patch")
    patch = patch_file.read_text()
    assert "+    return text.upper()" in patch
    assert "__pycache__" not in patch and "textutil.cpython" not in patch
    assert "vendored/legacy.pyc" in patch  # tracked: its change is in the patch
    # --apply wrote the fix and the tracked file's change, and no bytecode.
    assert not list(repo.rglob("__pycache__"))
    status = git(repo, "status", "--porcelain").splitlines()
    assert sorted(status) == [" M textutil.py", " M vendored/legacy.pyc"]


def test_a_replay_from_inside_the_repo_into_a_folder_of_the_users_is_not_dirt(
    tmp_path: Path, capfd: Capture
) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    with ScriptedServer([FIX, SUBMIT]) as server:
        done = pgs(capfd, repo, run_argv(Path("."), url=server.url))
    assert done.returncode == 0, done.stderr
    (recording,) = (repo / "trajectories").glob("*/*/*.traj")
    (repo / "replays").mkdir()  # the user's own folder: pgs gives it no .gitignore
    for where in ("replays/0", "replays/1"):  # the second one sees the first one's files
        done = run_pgs(
            ["replay", str(recording), "--repo", ".", "--sandbox", "local", "--output-dir", where],
            capfd,
            cwd=repo,
            env={"DOCKER_HOST": "unix:///nonexistent/no-docker.sock"},
        )
        assert done.returncode == 0, done.stderr
        assert "uncommitted changes" not in done.stderr
    assert len(list((repo / "replays").glob("*/*/*.patch"))) == 2
