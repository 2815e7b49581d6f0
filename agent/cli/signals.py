"""Ctrl-C, SIGTERM and SIGHUP all end a command the same way: a KeyboardInterrupt in the main
thread, so the agent records ``interrupted`` in the ``.traj``, sandboxes are closed as the stack
unwinds, and ``pgs`` exits with :data:`agent.errors.INTERRUPTED` (130). Every command gets this
(:func:`agent.cli.main` installs it around each), so none handles signals of its own (``pgs
batch`` wraps these handlers to take the interrupt between two steps of its loop).

Only the main thread sees the interrupt. A command whose work runs in threads ends that work
itself: ``pgs eval`` and ``pgs select`` remove the containers this process started
(:func:`envs.docker_util.remove_own_containers`), so the running jobs fail at once; ``pgs batch``
lets its running instances finish and does so on a second interrupt
(:mod:`agent.swebench.scheduler`). The processes pgs starts on the host (the local sandbox's helper)
run in sessions of their own, so a Ctrl-C in the terminal reaches pgs alone, which stops them;
none prints a traceback of its own. A command that kept what it finished says so in one line
before its ``interrupted`` line (:class:`agent.errors.Interrupted`)."""

from __future__ import annotations

import errno
import os
import signal
import termios
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from agent.errors import STOP_SIGNALS


@contextmanager
def stop_signals(received: list[signal.Signals]) -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread,
    so all three unwind like Ctrl-C; each one is appended to ``received``. A signal the parent
    set to be ignored (``nohup`` ignores SIGHUP) stays ignored; outside the main thread (where
    Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        sig = signal.Signals(signum)
        if sig == signal.SIGHUP:
            if received:  # the kernel and the shell may both send one; the cleanup must finish
                return
            _leave_dead_terminal()
        received.append(sig)
        raise KeyboardInterrupt

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for sig, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _leave_dead_terminal() -> None:
    """After a hang-up, writing to the terminal fails (EIO) and would turn the clean unwinding
    into a crash: stdout and stderr that are a terminal go to /dev/null instead."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            if _is_terminal(fd):
                os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _is_terminal(fd: int) -> bool:
    """Like ``os.isatty``, but also True for a terminal that hung up (its ioctls fail with EIO,
    so ``isatty`` says False)."""
    try:
        termios.tcgetattr(fd)
    except termios.error as e:
        return bool(e.args and e.args[0] == errno.EIO)
    return True
