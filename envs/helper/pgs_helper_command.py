"""One command's process: started as ``bash -c`` in a session of its own, its output pumped
into a capped buffer until it ends, times out or is cancelled, then ended with everything it
started. Part of the sandbox helper (``pgs_helper.py``), shipped and run beside it; standard
library only, Python 3.7+."""
import collections
import os
import selectors
import signal
import subprocess
import sys
import time

import pgs_helper_procs as procs
from pgs_helper_io import incoming


class CappedBuffer(object):
    """Keeps the first and last ``cap // 2`` bytes of a stream and counts the rest."""

    def __init__(self, cap):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = collections.deque()
        self.tail_len = 0
        self.total = 0

    def add(self, chunk):
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail_len - len(self.tail[0]) >= self.half:
                self.tail_len -= len(self.tail.popleft())

    def render(self):
        tail = b"".join(self.tail)
        kept = len(self.head) + len(tail)
        if kept <= 2 * self.half and self.total == kept:
            return bytes(self.head) + tail, False
        tail = tail[-self.half:]
        omitted = self.total - len(self.head) - len(tail)
        marker = ("\n[... output truncated: %d bytes omitted ...]\n" % omitted).encode()
        return bytes(self.head) + marker + tail, True



def pump(proc, buf, timeout):
    """Read the command's output until it ends, runs out of time or is cancelled; returns
    "ended", "timeout" or "cancelled".

    Watches stdin meanwhile: Hangup (the owner is gone) or a CANCEL line ends the wait at once."""
    deadline = None if timeout is None else time.monotonic() + timeout
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    sel.register(incoming.fd, selectors.EVENT_READ)
    if _child_exited is not None:
        sel.register(_child_exited, selectors.EVENT_READ)
    output_open = True
    # Once the output has closed, the command may still be exiting (rm, git and env close
    # their output first): poll for its end, briefly at first, so it is not killed in that gap.
    delay = 0.0002
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return "ended" if proc.poll() is not None else "timeout"
            if output_open:
                events = sel.select(0.5 if left is None else min(left, 0.5))
            else:
                # epoll waits whole milliseconds: sleep, then look at stdin without waiting.
                time.sleep(delay if left is None else min(left, delay))
                delay = min(delay * 2, 0.05)
                events = sel.select(0)
            for key, _ in events:
                if key.fd == _child_exited:
                    _drop_wakeups()
                    continue
                if key.fd == incoming.fd:
                    incoming.fill()
                    if incoming.take_cancel():
                        return "cancelled"
                    continue
                chunk = os.read(fd, 65536)
                if chunk:
                    buf.add(chunk)
                else:
                    sel.unregister(fd)
                    output_open = False
            # Once the command itself is gone, what it left behind may hold the pipe open (or
            # keep writing to it): the caller ends those, then reads what is left.
            if proc.poll() is not None:
                return "ended"
    finally:
        sel.close()


#: Readable when a child has exited (SIGCHLD through signal.set_wakeup_fd): the command's end
#: wakes the pump at once even while something it left behind holds its output open.
_child_exited = None


def watch_children():
    global _child_exited
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    try:
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except TypeError:  # Python 3.6 has no warn_on_full_buffer
        signal.set_wakeup_fd(write_end)
    _child_exited = read_end


def _drop_wakeups():
    try:
        while os.read(_child_exited, 4096):
            pass
    except BlockingIOError:
        pass


def drain(stream, buf, wait):
    """Read what is left in the command's output, until end of file or ``wait`` seconds
    without any (0: only what is there already)."""
    fd = stream.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    stop = time.monotonic() + max(wait, 0.5)  # a writer that is still alive cannot hold us
    try:
        while time.monotonic() < stop:
            if not sel.select(wait):
                return
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            buf.add(chunk)
    finally:
        sel.close()


def end(proc):
    """End the command and, when contained, every process it started; reap them."""
    procs.kill_group(proc.pid)
    proc.wait()
    if procs.CONTAIN:
        procs.end_descendants()


class _Spawned(object):
    """The part of Popen's interface the helper uses, for a process from posix_spawn."""

    def __init__(self, pid, stdout):
        self.pid = pid
        self.stdout = stdout
        self.returncode = None

    def _reap(self, flags):
        pid, status = os.waitpid(self.pid, flags)
        if pid == 0:
            return None
        if os.WIFSIGNALED(status):
            self.returncode = -os.WTERMSIG(status)
        else:
            self.returncode = os.WEXITSTATUS(status)
        return self.returncode

    def poll(self):
        return self.returncode if self.returncode is not None else self._reap(os.WNOHANG)

    def wait(self, timeout=None):
        if self.returncode is not None:
            return self.returncode
        if timeout is None:
            return self._reap(0)
        deadline = time.monotonic() + timeout
        delay = 0.0002
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(["bash"], timeout)
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)
        return self.returncode


def start(cmd, cwd, env):
    """``bash -c cmd`` in a new session, stdout and stderr on one pipe, stdin from /dev/null.

    posix_spawn (vfork underneath) starts a command about 1 ms faster than Popen's fork; it has
    no cwd argument, so the helper (one request at a time) changes its own and changes back."""
    if not hasattr(os, "posix_spawnp") or sys.version_info < (3, 8):
        return subprocess.Popen(
            ["bash", "-c", cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    read_end, write_end = os.pipe()
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, write_end, 1),
        (os.POSIX_SPAWN_DUP2, write_end, 2),
    ]
    here = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        pid = os.posix_spawnp(
            "bash", ["bash", "-c", cmd], env, file_actions=actions, setsid=True,
            # Python ignores SIGPIPE and SIGXFSZ, the helper SIGINT (main); a shell command
            # expects the defaults (bash cannot undo a signal ignored when it started).
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT),
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
        os.chdir(here)
    return _Spawned(pid, os.fdopen(read_end, "rb", buffering=0))

