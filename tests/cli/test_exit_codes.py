"""``pgs run``'s exit codes as docs/running.md lists them, and the work a failed run keeps: 0 the
run submitted, 1 it ended with another exit status (an error inside the run included: one
``pgs: error:`` line, the ``.traj``, ``.patch`` and ``.pred`` written with the diff so far), 2 a
mistake in the command (an output folder pgs cannot write, refused before any Docker work), 3
the machine failed (Docker unreachable, an image build failed, the disk full while writing), 130
interrupted (tests/cli/test_cli_safety.py). The scripted model over HTTP, real git repositories,
the local sandbox where Docker is not the point, real mounts for read-only and full folders."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, bash, closed_port, run_argv

FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py")
SUBMIT = {"content": "", "tool_calls": [{"name": "submit", "arguments": {}}]}
HTML = {"raw": "<html><body>502 Bad Gateway</body></html>", "content_type": "text/html"}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):  # the scripted model, never a real one
        monkeypatch.delenv(var, raising=False)
    return make_repo(tmp_path / "textutil", BUGGY)


def pgs_run(
    capsys: pytest.CaptureFixture[str], repo: Path, out: Path, steps: Any, *extra: str
) -> tuple[int, str, list[str]]:
    """``pgs run`` in this process; its exit code, stdout and stderr lines."""
    with ScriptedServer(steps) as server:
        code = main(run_argv(repo, "--output-dir", str(out), *extra, url=server.url))
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def results(out: Path) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The run's ``.traj``, ``.patch`` and ``.pred``; each must exist."""
    (folder,) = [p for p in out.iterdir() if p.is_dir()]  # beside it: the .gitignore pgs made
    name = folder.name
    traj = json.loads((folder / f"{name}.traj").read_text())
    pred = json.loads((folder / f"{name}.pred").read_text())
    return traj, (folder / f"{name}.patch").read_text(), pred


def one_error(lines: list[str]) -> str:
    errors = [line for line in lines if line.startswith("pgs: error: ")]
    assert len(errors) == 1, lines
    assert not any("Traceback" in line for line in lines), lines
    return errors[0]


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Any]:
    """``mount(options)``: a fresh tmpfs folder mounted with ``options`` (ro, size=...)."""
    mounted: list[Path] = []

    def make(options: str) -> Path:
        where = tmp_path / f"mnt{len(mounted)}"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=True)


# --------------------------------------------------------------------------- 0 and 1


def test_a_submitted_run_exits_0(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, stdout, _ = pgs_run(capsys, repo, out, [FIX, SUBMIT], "--sandbox", "local")
    assert code == 0
    traj, patch, pred = results(out)
    assert traj["info"]["exit_status"] == "submitted"
    assert "text.upper()" in patch == stdout and pred["model_patch"] == patch


def test_a_model_that_answers_html_ends_the_run_in_1_and_the_edit_is_kept(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, _, lines = pgs_run(capsys, repo, out, [FIX, HTML], "--sandbox", "local")
    assert code == 1
    line = one_error(lines)
    assert "not a chat completion" in line and "exit_error" in line and str(out) in line
    traj, patch, pred = results(out)
    assert traj["info"]["exit_status"] == "exit_error"
    assert "+    return text.upper()" in patch
    assert pred["model_patch"] == patch


def test_another_exit_status_exits_1_with_its_files(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    no_tool = {"content": "I think about it."}
    code, _, lines = pgs_run(capsys, repo, out, [FIX, *[no_tool] * 3], "--sandbox", "local")
    assert code == 1
    assert not any(line.startswith("pgs: error:") for line in lines)
    traj, patch, _ = results(out)
    assert traj["info"]["exit_status"] == "exit_format" and "text.upper()" in patch


# --------------------------------------------------------------------------- 2: the command


@pytest.mark.parametrize("where", ["a file", "a read-only mount"])
def test_an_output_folder_that_cannot_be_written_is_2_before_any_docker_work(
    where: str,
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    mount: Any,
) -> None:
    if where == "a file":
        out = tmp_path / "taken"
        out.write_text("not a folder")
    else:
        out = mount("ro,size=1m") / "out"
    # Docker unreachable: an output check after the image step would report Docker instead.
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{closed_port()}")
    code, _, lines = pgs_run(capsys, repo, out, [SUBMIT])
    assert code == 2
    line = one_error(lines)
    assert f"cannot write results in {out}" in line and "--output-dir" in line


# --------------------------------------------------------------------------- 3: the machine


def test_docker_unreachable_is_3(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{closed_port()}")
    code, _, lines = pgs_run(capsys, repo, tmp_path / "out", [SUBMIT])
    assert code == 3
    assert "Docker" in one_error(lines)


@pytest.mark.docker
def test_a_failed_image_build_is_3(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], base_image: str
) -> None:
    code, _, lines = pgs_run(
        capsys, repo, tmp_path / "out", [SUBMIT], "--setup", "echo pgs-setup-fails; false"
    )
    assert code == 3, lines
    assert "image step failed" in one_error(lines)
    assert "pgs-setup-fails" in "\n".join(lines)


def test_a_disk_full_while_writing_is_3_and_the_patch_is_kept(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mount: Any
) -> None:
    out = mount("size=256k") / "out"
    # Each reply holds 60 kB of text: the .traj outgrows the folder after a few steps.
    talk = bash("true", content="x" * 60_000)
    code, stdout, lines = pgs_run(
        capsys, repo, out, [FIX, *[talk] * 8, SUBMIT], "--sandbox", "local"
    )
    assert code == 3
    line = one_error(lines)
    assert "No space left on device" in line and "kept" in line
    assert "+    return text.upper()" in stdout  # the patch is not lost


def test_a_tool_bundle_that_fails_to_install_as_the_agent_starts_is_2(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "broken"
    (bundle / "bin").mkdir(parents=True)
    (bundle / "config.yaml").write_text("tools: {}\n")
    (bundle / "install.sh").write_text("false\n")
    out = tmp_path / "out"
    bundles = json.dumps([str(bundle)])
    code, _, lines = pgs_run(
        capsys, repo, out, [SUBMIT], "--sandbox", "local", "--tools.bundles", bundles
    )
    assert code == 2
    assert "tool bundle 'broken' failed" in one_error(lines)
    traj, patch, _ = results(out)  # written all the same
    assert traj["info"]["exit_status"] == "exit_error" and patch == ""


def test_pgs_env_without_docker_is_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{closed_port()}")
    assert main(["env", "ls"]) == 3
    assert "Docker" in one_error(capsys.readouterr().err.strip().splitlines())


@pytest.mark.parametrize("ending", ["submitted", "a step limit"])
def test_a_check_that_could_not_run_is_one_line_and_3_never_every_check_passes(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], ending: str
) -> None:
    """Submitted, or ended by a limit (the final check of its diff): exit 3 either way."""
    # A Python without pytest (nor Hypothesis) for the check: the host's own interpreter.
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode == 0:
        pytest.skip(f"{python} has pytest")
    out = tmp_path / "out"
    check = json.dumps({"python": python})
    extra = ("--sandbox", "local", "--feedback", "io", "--pgs.check", check)
    script = [FIX, SUBMIT]
    if ending == "a step limit":
        script, extra = [FIX], (*extra, "--agent.step-limit", "1")
    code, _, lines = pgs_run(capsys, repo, out, script, *extra)
    assert code == 3, lines
    line = one_error(lines)
    assert line.startswith(
        "pgs: error: the check could not run: pytest is not installed in the sandbox "
        f"({python}: ModuleNotFoundError: No module named 'pytest')"
    )
    assert not any("every check passes" in line for line in lines)
    traj, _, _ = results(out)
    status = "submitted (exit_step_limit)" if ending == "a step limit" else "exit_error"
    assert traj["info"]["exit_status"] == status
    assert traj["pgs"]["verdict"] in (None, "unchecked")
