"""``pgs`` run in the test's own process, answering as ``subprocess.run(..., capture_output=True,
text=True)`` does: for tests of what a command prints, writes and exits with, where a process of
its own proves nothing and costs a fresh interpreter's imports (a second or more) per command.

Tests about the process itself keep starting one: signals, a terminal, two processes at once, a
killed process, the start-up (``python -m agent.cli``, the installed ``pgs`` script, what is
imported before the command runs).

As in a fresh process: the output is captured at the file descriptors (``capfd``: what a child
of the command writes is caught too), the logging of the command goes to stderr through pgs's
own handler (pytest's handlers are set aside while it runs), and the working folder and the
environment are the given ones; both are restored afterwards, whatever the command changed
(a ``.env`` file it read sets variables in this process's environment).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
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
    unset: Iterable[str] = (),
) -> Ran:
    """``pgs argv`` in this process (``argv`` may start with :data:`PGS`): ``env`` set over
    this process's environment, the names in ``unset`` removed from it, ``cwd`` the working
    folder, for the command's duration."""
    args = list(argv)
    if args[: len(PGS)] == PGS:
        args = args[len(PGS) :]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    saved = dict(os.environ)
    with pytest.MonkeyPatch.context() as patch:
        if cwd is not None:
            patch.chdir(cwd)
        os.environ.update(env or {})
        for name in unset:
            os.environ.pop(name, None)
        capfd.readouterr()  # what came before is not this command's
        root.handlers = []  # so that runlog.configure installs pgs's own stderr handler
        try:
            code = main(args)
        finally:
            root.handlers, root.level = handlers, level
            os.environ.clear()
            os.environ.update(saved)
        out, err = capfd.readouterr()
    return Ran(args, code, out, err)
