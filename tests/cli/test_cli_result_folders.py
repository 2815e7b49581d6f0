"""What ``pgs run`` does when pointed at old results, as a user sees it: real ``pgs`` processes
(and runs in this process), the scripted model server over HTTP, real git repositories.

- Results are never overwritten silently: default folders are unique, a reused ``--output-dir``
  is refused unless ``--overwrite``; two runs of one issue into one folder at once: one runs, and
  a killed run leaves no claim behind.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from agent.models.script_server import ScriptedServer
from tests.support.cli_runs import (
    MODEL,
    ROOT,
    SUBMIT,
    Capture,
    fixing,
    only_traj,
    pgs,
    run_args,
    wait_for,
)
from tests.support.textutil import pgs_env


def test_two_runs_started_together_keep_both_results(repo: Path, tmp_path: Path) -> None:
    with ScriptedServer(fixing) as server:
        args = run_args(repo, server.url, "--sandbox", "local")
        procs = [
            subprocess.Popen(
                args, cwd=tmp_path, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr.decode()
    # Beside them: the .gitignore pgs made with the folder (agent.run.outputs.mark_as_results).
    folders = sorted(p for p in (tmp_path / "trajectories").iterdir() if p.is_dir())
    assert len(folders) == 2  # trajectories/<time>-scripted-<random>, one per run
    for folder in folders:
        assert folder.name.split("-")[2] == MODEL
        (run,) = [p for p in folder.iterdir() if p.is_dir()]
        suffixes = sorted(p.suffix for p in run.iterdir())
        assert suffixes == [".log", ".patch", ".pred", ".traj", ".yaml"]
        assert "+    return text.upper()" in (run / f"{run.name}.patch").read_text()


def test_a_reused_output_dir_is_refused_unless_overwrite(
    repo: Path, tmp_path: Path, capfd: Capture
) -> None:
    out = tmp_path / "out"
    with ScriptedServer(fixing) as server:
        args = run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out))
        assert pgs(args, capfd).returncode == 0
        (traj,) = out.glob("*/*.traj")
        first = traj.read_text()

        again = pgs(args, capfd)
        assert again.returncode == 2
        error = again.stderr.strip().splitlines()[-1]
        assert error.startswith(f"pgs: error: {traj.parent} already holds a run of {traj.stem}")
        assert "--output-dir" in error and "--overwrite" in error
        assert "Traceback" not in again.stderr
        assert traj.read_text() == first  # untouched
        asked = len(server.requests)

        replaced = pgs([*args, "--overwrite"], capfd)
        assert replaced.returncode == 0, replaced.stderr
        assert len(server.requests) == asked + 2  # it ran again
    assert traj.read_text() != first
    assert json.loads(traj.read_text())["info"]["exit_status"] == "submitted"


def test_two_runs_of_one_issue_into_one_folder_at_once_one_runs(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    release = threading.Event()

    def held(request: dict[str, Any]) -> dict[str, Any]:
        release.wait(120)  # until the test has seen both runs reach the model, or one refused
        return fixing(request)

    with ScriptedServer(held) as server:
        args = run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out))
        procs = [
            subprocess.Popen(
                args, cwd=ROOT, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + 120
            while len(server.requests) < 2 and all(p.poll() is None for p in procs):
                assert time.monotonic() < deadline, "neither run reached the model"
                time.sleep(0.05)
        finally:
            release.set()
        outputs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    refused = next(e.decode() for p, (_, e) in zip(procs, outputs, strict=True) if p.returncode)
    assert codes == [0, 2], outputs
    lines = [line for line in refused.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pgs: error: another pgs process"), refused
    assert "is running" in lines[0] and "another --output-dir" in lines[0]
    assert len(server.requests) == 2  # one run: the fix, then submit
    assert only_traj(out)["info"]["exit_status"] == "submitted"


def test_a_killed_run_leaves_no_claim_behind(repo: Path, tmp_path: Path, capfd: Capture) -> None:
    out = tmp_path / "out"
    asked, gone = threading.Event(), threading.Event()

    def stuck(request: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        gone.wait(120)  # the run is killed while it waits for the model (no child process)
        return SUBMIT

    with ScriptedServer(stuck) as server:
        args = run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out))
        proc = subprocess.Popen(
            args, cwd=ROOT, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            wait_for(asked, proc, 120)  # it holds the claim now
        finally:
            proc.kill()
            proc.communicate()
            gone.set()
    with ScriptedServer(fixing) as server:
        args = run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out))
        done = pgs([*args, "--overwrite"], capfd)
    assert done.returncode == 0, done.stderr
    assert only_traj(out)["info"]["exit_status"] == "submitted"
