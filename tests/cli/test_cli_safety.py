"""What ``pgs run`` and ``pgs batch`` do when they are stopped or pointed at old results, as a
user sees it: real ``pgs`` processes, the scripted model server over HTTP, real git repositories
and real Docker containers. A run whose process proves nothing (only what it prints, writes and
exits with is checked) runs in this process.

- SIGTERM and SIGHUP end a run like Ctrl-C: the ``.traj`` says ``interrupted``, the containers
  are removed by the run's own unwinding, the exit code is 130.
- Ctrl-C in a terminal (a pseudo-terminal's interrupt character) under ``--sandbox local``
  shows no traceback of any process pgs started, and leaves none of them running.
- Results are never overwritten silently: test_cli_result_folders.py.
- ``--issue`` that looks like a path but is no file is one error line.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.models.script_server import ScriptedServer
from envs.docker_util import LABEL, PID_LABEL
from tests.support.cli_runs import (
    MODEL,
    PGS,
    ROOT,
    Capture,
    call,
    fixing,
    only_traj,
    pgs,
    run_args,
    wait_for,
)
from tests.support.processes import Shown
from tests.support.swe_dataset import Dataset, batch_args, fixing_policy, make_dataset
from tests.support.textutil import pgs_env

INTERRUPTED = 130


def containers_of(client: Any, pid: int) -> list[Any]:
    mine = {"label": [f"{LABEL}=1", f"{PID_LABEL}={pid}"]}
    return list(client.containers.list(all=True, filters=mine, ignore_removed=True))


def unique_sleep() -> str:
    """A ``sleep`` of about a minute that no other process on the machine runs (other test
    runs may share it): its process is found by its command line."""
    return f"sleep 60.{uuid.uuid4().int % 10**6:06d}"


class Sleeper:
    """A scripted model whose one command is :attr:`command`, a :func:`unique_sleep`;
    ``asked`` is set once it answered."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.command = unique_sleep()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.asked.set()
        return call("bash", command=self.command)


@pytest.fixture
def sleeper() -> Iterator[tuple[Sleeper, ScriptedServer]]:
    policy = Sleeper()
    with ScriptedServer(policy) as server:
        yield policy, server


def processes_running(needle: str) -> list[int]:
    """Pids of the live processes (zombies aside) whose command line holds ``needle``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def wait_running(needle: str, proc: subprocess.Popen[Any], seconds: float) -> None:
    """Until a process whose command line holds ``needle`` runs (a sandbox's command: Docker's
    containers are processes of this machine too)."""
    deadline = time.monotonic() + seconds
    while not processes_running(needle):
        assert proc.poll() is None, "pgs ended before its sandbox ran the command"
        assert time.monotonic() < deadline, f"the sandbox never ran {needle!r}"
        time.sleep(0.1)


# --------------------------------------------------------------------------- signals


@pytest.mark.docker
def test_sigterm_ends_a_run_like_ctrl_c(
    repo: Path,
    base_image: str,
    docker_client: Any,
    tmp_path: Path,
    sleeper: tuple[Sleeper, ScriptedServer],
) -> None:
    policy, server = sleeper
    out = tmp_path / "out"
    args = run_args(repo, server.url, "--image", base_image, "--output-dir", str(out))
    proc = subprocess.Popen(
        args, cwd=ROOT, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(policy.asked, proc, 240)
        wait_running(policy.command, proc, 240)  # the container runs the sleep
        assert containers_of(docker_client, proc.pid)
        proc.send_signal(signal.SIGTERM)
        # Within the command's own time: the agent's last diff of the sandbox waits behind the
        # running command in the sandbox's helper, so the run ends when the sleep does.
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == INTERRUPTED, stderr
    assert "pgs: error: interrupted by SIGTERM" in stderr
    assert "Traceback" not in stderr
    traj = only_traj(out)
    assert traj["info"]["exit_status"] == "interrupted"
    assert not containers_of(docker_client, proc.pid)


#: Run the rest of argv with the terminal on stdin as its controlling terminal (a new session
#: that owns it, as a login shell does), keeping its pid: exec, not a child.
WITH_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def test_closing_the_terminal_ends_a_run_like_ctrl_c(
    repo: Path, tmp_path: Path, sleeper: tuple[Sleeper, ScriptedServer]
) -> None:
    policy, server = sleeper
    out = tmp_path / "out"
    args = run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out))
    master, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", WITH_TERMINAL, *args[1:]],
        cwd=ROOT,
        env=pgs_env(),
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    shown, stop = bytearray(), threading.Event()
    reader = threading.Thread(target=drain, args=(master, shown, stop), daemon=True)
    reader.start()
    try:
        wait_for(policy.asked, proc, 60)
        wait_running(policy.command, proc, 60)  # the sandbox runs the sleep
        stop.set()
        reader.join()
        # A hang-up: the terminal goes away (the kernel signals the session leader), then the
        # shell sends SIGHUP to the job's process group; pgs gets two.
        os.close(master)
        os.killpg(proc.pid, signal.SIGHUP)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # 130, not a crash on writing to the dead terminal (1, or 120 when stderr cannot flush).
    assert code == INTERRUPTED, shown.decode(errors="replace")
    assert only_traj(out)["info"]["exit_status"] == "interrupted"


def test_ctrl_c_in_a_terminal_under_the_local_sandbox_prints_no_traceback(
    repo: Path, tmp_path: Path
) -> None:
    asked = threading.Event()
    sleep = unique_sleep()

    def sleeping(request: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        return call("bash", command=sleep)

    out = tmp_path / "out"
    with ScriptedServer(sleeping) as server:
        args = run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out))
        master, terminal = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-c", WITH_TERMINAL, *args[1:]],
            cwd=ROOT,
            env=pgs_env(),
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            start_new_session=True,
        )
        os.close(terminal)
        shown, stop = bytearray(), threading.Event()
        reader = threading.Thread(target=read_all, args=(master, shown, stop), daemon=True)
        reader.start()
        try:
            wait_for(asked, proc, 60)
            wait_running(sleep, proc, 60)  # the sandbox runs the command
            helpers = [p for p in processes_running("pgs_helper.py") if _parent(p) == proc.pid]
            assert helpers, "the local sandbox's helper is not pgs's child"
            os.write(master, b"\x03")  # the terminal's interrupt character: a real Ctrl-C
            code = proc.wait(timeout=120)
            reader.join(10)  # to the end: the terminal has no writer left
        finally:
            stop.set()
            reader.join()
            os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = shown.decode(errors="replace")
    assert code == INTERRUPTED, text
    assert "pgs: error: interrupted" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert only_traj(out)["info"]["exit_status"] == "interrupted"
    # The helper and the command it ran ended with pgs: none is left on the machine.
    assert not [p for p in helpers if p in processes_running("pgs_helper.py")]
    assert not processes_running(sleep)


def read_all(fd: int, into: bytearray, stop: threading.Event) -> None:
    """What the terminal shows, to the end (EIO: every process holding it has ended)."""
    while not stop.is_set():
        if select.select([fd], [], [], 0.1)[0]:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if not data:
                return
            into += data


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def drain(fd: int, into: bytearray, stop: threading.Event) -> None:
    """What the terminal shows, until ``stop``: read, so that pgs never blocks on a full
    terminal, and never left blocked in a read, which would keep the terminal open."""
    while not stop.is_set():
        if select.select([fd], [], [], 0.1)[0]:
            into += os.read(fd, 4096)


# --------------------------------------------------------------------------- --issue


def test_an_issue_path_that_is_no_file_is_one_error(
    repo: Path, tmp_path: Path, capfd: Capture
) -> None:
    for issue in ("isue.txt", "docs/ISSUE.md", "./bug"):
        args = run_args(repo, "http://127.0.0.1:9/v1", "--sandbox", "local", issue=issue)
        done = pgs(args, capfd, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr.strip() == (
            f"pgs: error: --issue {issue}: no such file; give an existing file or the issue's text"
        )
    assert not (tmp_path / "trajectories").exists()


def test_an_issue_text_with_a_slash_is_the_issue(
    repo: Path, tmp_path: Path, capfd: Capture
) -> None:
    issue = "parse_date('2024/02/30') should raise"
    out = tmp_path / "out"
    with ScriptedServer(fixing) as server:
        done = pgs(
            run_args(repo, server.url, "--sandbox", "local", "--output-dir", str(out), issue=issue),
            capfd,
        )
        first_prompt = json.dumps(server.requests[0]["messages"])
    assert done.returncode == 0, done.stderr
    assert issue in first_prompt
    (traj,) = out.glob("*/*.traj")
    assert traj.stem.startswith("textutil__issue-")


# --------------------------------------------------------------------------- batch


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


class HeldFirst:
    """The fixing model, but the first instance's first answer waits for ``release``."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        if "slugify" in json.dumps(request["messages"][:2]):
            self.asked.set()
            self.release.wait(60)
        return fixing_policy(request)


def asked_about(server: ScriptedServer, word: str) -> int:
    return sum(word in json.dumps(r["messages"][:2]) for r in server.requests)


@pytest.mark.docker
def test_sigterm_on_a_batch_keeps_finished_predictions_and_the_rerun_resumes(
    dataset: Dataset, base_image: str, docker_client: Any, tmp_path: Path, capfd: Capture
) -> None:
    out = tmp_path / "run"
    policy = HeldFirst()
    with ScriptedServer(policy) as server:
        args = [*PGS, *batch_args(dataset, server.url, out, model=MODEL, price=0.0)]
        proc = subprocess.Popen(
            args, cwd=ROOT, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        shown = Shown(proc)
        try:
            wait_for(policy.asked, proc, 300)  # the first instance is running
            proc.send_signal(signal.SIGTERM)
            shown.wait_for("interrupted: no new instance starts", 120)  # the signal is taken
            policy.release.set()
            proc.wait(timeout=120)
            output = shown.text()
        finally:
            policy.release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # The running instance finished; the second never started.
        assert proc.returncode == INTERRUPTED, output
        assert f"rerun with --output-dir {out} to resume" in output
        preds = json.loads((out / "preds.json").read_text())
        assert list(preds) == ["acme__textkit-1"] and preds["acme__textkit-1"]["model_patch"]
        assert not containers_of(docker_client, proc.pid)

        resumed = pgs(args, capfd)
        assert resumed.returncode == 0, resumed.stderr
        assert "resume: 1 finished instances skipped" in resumed.stderr
        assert asked_about(server, "slugify") == 2  # not asked again: edit and submit, once
    after = json.loads((out / "preds.json").read_text())
    assert sorted(after) == ["acme__textkit-1", "acme__textkit-2"]
    assert after["acme__textkit-1"] == preds["acme__textkit-1"]
