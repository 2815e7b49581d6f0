"""``pgs inspect --tui`` in a real pseudo-terminal: it draws, q, Ctrl-C and the stop signals end it
and give the terminal back; without a terminal, of a path that is not a run, or with a flag of the
HTML page, it is one error line."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.inspect_tui import FOREIGN_ID

ROOT = Path(__file__).resolve().parents[2]


#: What leaving Textual's alternate screen looks like: the terminal is given back as it was.
LEAVE_ALTERNATE_SCREEN = b"\x1b[?1049l"


@pytest.mark.parametrize(
    ("stop", "code"),
    [("q", 0), ("ctrl+c", 0), ("SIGTERM", 130), ("SIGHUP", 130)],
    ids=["q", "ctrl+c", "SIGTERM", "SIGHUP"],
)
def test_pgs_inspect_tui_draws_in_a_real_terminal_and_gives_it_back(
    foreign_traj: Path, stop: str, code: int
) -> None:
    master, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "inspect", str(foreign_traj), "--tui"],
        cwd=ROOT,
        env={**os.environ, "TERM": "xterm-256color"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        start_new_session=True,
    )
    os.close(terminal)
    seen = bytearray()

    def read_until(done: Callable[[], bool], seconds: float) -> None:
        # Read all along: a full terminal would block the app's writes.
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    seen.extend(os.read(master, 65536))
                except OSError:  # the terminal's last reader is gone
                    return

    try:
        read_until(lambda: FOREIGN_ID.encode() in seen, 60)
        assert FOREIGN_ID.encode() in seen, seen.decode(errors="replace")
        if stop.startswith("SIG"):
            proc.send_signal(signal.Signals[stop])
        else:
            os.write(master, {"q": b"q", "ctrl+c": b"\x03"}[stop])
        read_until(lambda: proc.poll() is not None, 30)
        assert proc.wait(timeout=10) == code, seen.decode(errors="replace")
        read_until(lambda: False, 0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert LEAVE_ALTERNATE_SCREEN in seen
    assert b"Traceback" not in seen
    if stop == "SIGTERM":
        assert b"pgs: error: interrupted by SIGTERM" in seen


def pgs_inspect_without_a_terminal(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``pgs inspect ARGS`` in a child process whose stdin is not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", "inspect", *map(str, args)],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pgs_inspect_tui_without_a_terminal_is_one_error_line(foreign_traj: Path) -> None:
    done = pgs_inspect_without_a_terminal(foreign_traj, "--tui")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "pgs: error: --tui needs a terminal (stdin and stdout are not one here): run it in a "
        "terminal, or leave out --tui to write the HTML page"
    ]
    assert not foreign_traj.with_suffix(".html").exists()


def test_pgs_inspect_tui_of_a_path_that_is_not_a_run_is_one_error_line(tmp_path: Path) -> None:
    done = pgs_inspect_without_a_terminal(tmp_path / "nothing", "--tui")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"pgs: error: {tmp_path / 'nothing'} does not exist: pass a .traj")


def test_pgs_inspect_tui_with_a_flag_of_the_html_page_is_one_error_line(
    foreign_traj: Path,
) -> None:
    done = pgs_inspect_without_a_terminal(foreign_traj, "--tui", "--serve")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "pgs: error: --tui shows PATH in this terminal: leave out -o, --serve and --open"
    ]
