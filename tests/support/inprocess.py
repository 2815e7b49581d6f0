"""``pgs`` run in the test's own process, answering as ``subprocess.run(..., capture_output=True,
text=True)`` does: for tests of what a command prints and the code it exits with, where a
process of its own proves nothing and costs a fresh interpreter's imports (seconds) per command.

Tests about the process itself keep starting one: signals, a terminal, two processes at once, a
killed process, the environment a process inherits, ``python -m agent.cli`` and the installed
``pgs`` script.

As in a fresh process: the output is captured at the file descriptors (``capfd``: what a child
of the command writes is caught too), the logging of the command goes to stderr through pgs's
own handler (pytest's handlers are set aside while it runs), and the working folder and
environment variables are the given ones, restored afterwards.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.cli import main

#: How the subprocess tests start pgs; a leading copy of it is dropped from ``argv``.
PGS = [sys.executable, "-m", "agent.cli"]


@dataclass
class Ran:
    """What ``subprocess.run`` gives back, for a command run by :func:`run_pgs`."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_pgs(
    argv: Sequence[str],
    capfd: pytest.CaptureFixture[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Ran:
    """``pgs argv`` in this process (``argv`` may start with :data:`PGS`)."""
    args = list(argv)
    if args[: len(PGS)] == PGS:
        args = args[len(PGS) :]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    with pytest.MonkeyPatch.context() as patch:
        if cwd is not None:
            patch.chdir(cwd)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        capfd.readouterr()  # what came before is not this command's
        root.handlers = []  # so that runlog.configure installs pgs's own stderr handler
        try:
            code = main(args)
        finally:
            root.handlers, root.level = handlers, level
        out, err = capfd.readouterr()
    return Ran(args, code, out, err)
