"""pgs sandbox helper: one long-lived process that runs commands on request.

Started once per sandbox (inside the container, or on the host for LocalSandbox). It reads one
JSON request per line on stdin and writes one JSON reply per line on stdout. Each command runs
as ``bash -c`` in a process group of its own, with the working directory and environment given
in the request (no shell state carries over). Output is capped: the head and the tail are kept
and the number of bytes dropped is reported.

A request may name a persistent shell ``session``: then ``cd``, variables (exported or not),
``source``, functions, aliases and shell options carry over from one command of that session to
the next, as in an interactive bash. The helper keeps the session's STATE, not a live shell:
each command is still a fresh ``bash -c`` in a process group of its own, whose script first
restores the state file (a bash script: ``cd``, ``declare -p``, ``declare -f``, ``declare -F``,
``alias -p``, ``shopt -p``, ``set +o``) and whose EXIT trap writes the new state to a second
file. Only when the command ended by itself does that file replace the state; a command that
timed out, was cancelled, or ended without its trap (``exec``, a trap of its own on EXIT, a
signal) leaves the session as it was before it, and the output ends with a line that says so
(one stopped before its restore was over resets the session: that state would stop every later
command). So timeouts, cancels, output caps and containment are those of any command, the end of
a command is the end of its process (no prompt or marker is looked for in its output), and
nothing a command started outlives it, in a session or not. The state restores into a shell
started with an empty environment: the session's environment is its first command's, then what
its commands changed (``unset`` included); the request's ``env`` and ``cwd`` apply only to a
session's first command. Not carried over: background jobs (they end with their command), traps,
the directory stack.

Every process a command started ends with the command, whatever group or session it moved to
(``setsid``, ``timeout``, ``set -m``, a double fork): the helper is a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``), so an orphaned descendant is re-parented to the helper
instead of to init, and the helper's process tree holds exactly what its commands started.
When a command ends, times out or is cancelled, the helper freezes that tree (SIGSTOP, parents
before children, until a scan of /proc finds nothing running and nothing new) and then kills
it (SIGKILL), and reaps until it has no child left; a fork bomb cannot outrun it, because a
stopped process cannot fork. Only the helper's own descendants are ever signalled, so on the
host (LocalSandbox) no other process is touched (nor can a descendant that runs as another
user, a setuid program, be: it is left). Why not a PID namespace or a cgroup: both need
privileges the hardened container does not have (CAP_SYS_ADMIN, a writable cgroup tree), and
neither exists for the local sandbox; a subreaper needs no privilege, works the same in both,
and costs one ``waitpid`` per command when nothing was left behind. ``--no-contain`` turns this
off (only the command's process group is killed, as before; for benchmarks).

The helper lives exactly as long as its connection: at end of stdin (the owner closed the
sandbox or died, SIGKILL included), even in the middle of a command, it kills that command's
group and exits. It ignores SIGINT (commands start with the default again): a Ctrl-C is its
owner's to handle, by a cancel or by closing the connection. In a Docker sandbox it is the container's main process, so the container
stops then, and Docker removes it.

Standard library only, and compatible with Python 3.7+: it runs on the sandbox's system Python,
whatever Python the repository uses.
"""
import base64
import collections
import ctypes
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

_out = sys.stdout.buffer


class Hangup(BaseException):
    """End of stdin: the owner is gone. Not an Exception, so no request handler reports it."""


class Requests(object):
    """Request lines from a file descriptor, read with os.read so that a running command's
    pump can watch the same descriptor for the end of stdin (the selector and Python's own
    buffering of sys.stdin would disagree about what is left to read)."""

    def __init__(self, fd):
        self.fd = fd
        self.pending = bytearray()

    def fill(self):
        """Read what is there; raises Hangup at end of stream."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            raise Hangup()
        self.pending += chunk

    def take_cancel(self):
        """True (and the line consumed) when the owner asked to stop the running command."""
        at = self.pending.find(CANCEL)
        if at < 0 or (at > 0 and self.pending[at - 1:at] != b"\n"):
            return False
        del self.pending[at:at + len(CANCEL)]
        return True

    def readline(self):
        while b"\n" not in self.pending:
            self.fill()
        end = self.pending.index(b"\n") + 1
        line = bytes(self.pending[:end])
        del self.pending[:end]
        return line


#: A line the owner sends to stop the command it waits for (Ctrl-C, SIGTERM on its side).
CANCEL = b"CANCEL\n"
_in = Requests(sys.stdin.fileno())


def reply(message):
    data = (json.dumps(message) + "\n").encode("utf-8")
    _out.write(data)
    _out.flush()


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


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


PR_SET_CHILD_SUBREAPER = 36
#: Set by main(): True when the helper is a subreaper and ends every descendant of a command.
CONTAIN = False
#: The longest the helper spends ending a command's processes (one in uninterruptible sleep
#: cannot be stopped or killed until it wakes); then the next request is served anyway.
END_LIMIT = 20.0


def _become_subreaper():
    """True when orphaned descendants are now re-parented to this process (Linux 3.4+)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _signal(pid, sig):
    """False when ``pid`` may not be signalled (a setuid program on the host runs as another
    user); True otherwise, also when it has exited meanwhile."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        return False
    return True


def _reap():
    """Reap the helper's exited children; True when it has no child left at all.

    With the helper a subreaper, no child means no descendant: every living descendant has
    a living ancestor that is a child of the helper."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _process_table():
    """{pid: (parent pid, state letter)} of every process this helper can see in /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:  # exited meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        table[int(name)] = (int(fields[1]), fields[0][:1])
    return table


def _descendants(table, root):
    """Descendants of ``root`` in ``table``, every parent before its children."""
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def end_descendants():
    """Stop, then kill, every descendant of the helper; reap them. Returns how many there were.

    One ``waitpid`` when there are none (the usual case). Otherwise: freeze the tree until a
    scan finds every member stopped (a stopped process neither forks nor reaps its children,
    so no pid about to be killed can be reused meanwhile by a process that is not ours), kill
    it, reap, and start over until the helper has no child left or END_LIMIT has passed."""
    if _reap():
        return 0
    me = os.getpid()
    deadline = time.monotonic() + END_LIMIT
    ended, untouchable = set(), set()
    while time.monotonic() < deadline:
        stopped = set()
        while True:
            table = _process_table()
            tree = [p for p in _descendants(table, me) if p not in untouchable]
            for pid in tree:
                if pid not in stopped:
                    if not _signal(pid, signal.SIGSTOP):
                        untouchable.add(pid)
                    stopped.add(pid)
            tree = [p for p in tree if p not in untouchable]
            if time.monotonic() >= deadline or all(table[p][1] in b"TtZX" for p in tree):
                break
            time.sleep(0.001)  # let the stops land
        for pid in tree:
            _signal(pid, signal.SIGKILL)
        ended.update(tree)
        pause = 0.0002
        while time.monotonic() < deadline:
            if _reap():
                return len(ended)
            left = [p for p in _descendants(_process_table(), me) if p not in untouchable]
            if not left:
                return len(ended)  # only what may not be signalled remains
            if any(p not in ended for p in left):
                break  # a child forked before its parent stopped: freeze again
            time.sleep(pause)  # the killed are exiting; their zombies come to the helper
            pause = min(pause * 2, 0.02)
    return len(ended)


def _pump(proc, buf, timeout):
    """Read the command's output until it ends, runs out of time or is cancelled; returns
    "ended", "timeout" or "cancelled".

    Watches stdin meanwhile: Hangup (the owner is gone) or a CANCEL line ends the wait at once."""
    deadline = None if timeout is None else time.monotonic() + timeout
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    sel.register(_in.fd, selectors.EVENT_READ)
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
                if key.fd == _in.fd:
                    _in.fill()
                    if _in.take_cancel():
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


def _watch_children():
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


def _drain(stream, buf, wait):
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


def _end(proc):
    """End the command and, when contained, every process it started; reap them."""
    _kill_group(proc.pid)
    proc.wait()
    if CONTAIN:
        end_descendants()


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


def _start(cmd, cwd, env):
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


#: Where session states live: set by ``--state-dir DIR``, else a temporary folder made at the
#: first session command (in a container, it goes with the container).
STATE_DIR = None
#: Sessions that have had a state, to tell a lost state file from a new session.
_sessions = set()

#: The first line of a session command's script; {save} is where its state goes (``>|``: even
#: under ``set -C``; ``builtin``: whatever functions the command defined). The state is bash code
#: that restores it: the directory first (so that OLDPWD is restored after it; a directory
#: removed meanwhile is said, on stdout), then every variable (but PWD, which the cd sets),
#: function (``declare -F`` lines then mark the exported ones again; the others print their
#: definition, to /dev/null) and alias, and the options last (a restored `set -e` or `set -u`
#: must not stop the restore, and a restored `set -x` must not trace it). ``set -n`` is never
#: kept (its EXIT trap does not run), nor is ``set -t`` in effect (``bash -c`` ignores it), as
#: in an interactive bash. Bash's own read-only variables fail to restore, silently. The trap's
#: output goes nowhere, traced or not.
_SESSION_PRELUDE = (
    "builtin unset BASH_EXECUTION_STRING; builtin shopt -s expand_aliases; "
    "__pgs_save() { { builtin printf 'builtin cd -- %q || builtin echo %q\"$PWD\"\\n' "
    "\"$PWD\" \"pgs: the directory $PWD is gone; the shell session is now in \"; "
    "builtin unset BASH_COMMAND PWD; builtin declare -p; builtin declare -f; "
    "builtin printf '__pgs_exports() {\\nbuiltin true\\n'; builtin declare -F; "
    "builtin printf '}\\n__pgs_exports >/dev/null\\n'; "
    "builtin printf 'builtin unalias -a\\n'; builtin alias -p; "
    "builtin printf '__pgs_options() {\\n'; builtin shopt -p; builtin set +o; "
    "builtin printf '}\\n__pgs_options\\n'; } >| {save}; }; "
    "builtin trap '{ __pgs_save; } 2>/dev/null' EXIT; "
)
_SESSION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}$")


def _session_files(name):
    """(state, next state, restored mark) paths of session ``name``."""
    global STATE_DIR
    if not _SESSION_NAME.match(name) or name.startswith("."):
        raise ValueError("bad session name: %r" % name)
    if STATE_DIR is None:
        STATE_DIR = tempfile.mkdtemp(prefix="pgs-sessions-")
    os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
    state = os.path.join(STATE_DIR, name + ".sh")
    return state, state + ".next", state + ".restored"


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def _session_command(cmd, state, following, mark, env):
    """(script, environment) of a session command: the state (if any) restored first, in a
    shell with an empty environment (the state holds the session's), then ``mark`` written
    (an untraced redirection: the restore is over), then ``cmd`` on its own lines, as
    ``bash -c`` would run it (aliases just restored apply, since bash parses ``-c`` a line at
    a time)."""
    prelude = _SESSION_PRELUDE.replace("{save}", _quote(following))
    if os.path.exists(state):
        prelude += "builtin source %s 2>/dev/null; >| %s" % (_quote(state), _quote(mark))
        env = {}
    return prelude + "\n" + cmd, env


#: Appended to a session command's output when its changes to the session were not kept.
_NOT_KEPT = (
    "\npgs: the shell session is as it was before this command (directory, variables, "
    "functions): %s\n"
)


def _session_after(name, state, following, mark, restoring, reason):
    """Keep the state the command saved when it ended by itself; else a note for its output.

    A command stopped before its restore was over (``mark`` not written; a function named like
    a builtin the restore uses, that hangs) would stop every later command the same way: the
    session starts again from a fresh shell then, and the note says so."""
    try:
        if reason == "ended" and os.path.exists(following):
            os.replace(following, state)
            _sessions.add(name)
            return ""
        if os.path.exists(following):
            os.unlink(following)
        if restoring and reason != "ended" and not os.path.exists(mark):
            os.unlink(state)
            _sessions.discard(name)
            return (
                "\npgs: the shell session was reset: restoring its state did not finish (a "
                "function named like a shell builtin?); the next command starts in a fresh "
                "shell in the repository\n"
            )
    except OSError as e:
        return _NOT_KEPT % ("its state could not be saved (%s)" % e)
    if reason == "timeout":
        return _NOT_KEPT % "the command was stopped at its time limit"
    if reason == "cancelled":
        return _NOT_KEPT % "the command was stopped"
    return _NOT_KEPT % (
        "it ended without returning to the shell (exec, its own trap on EXIT, or a signal)"
    )


def run(req):
    env = dict(os.environ)
    env.update(req.get("env") or {})
    timeout = req.get("timeout")
    buf = CappedBuffer(int(req.get("max_output") or 1000000))
    start = time.monotonic()
    cmd, session, before, after = req["cmd"], req.get("session"), b"", ""
    if session:
        state, following, mark = _session_files(session)
        restoring = os.path.exists(state)
        if session in _sessions and not restoring:
            before = (b"pgs: the shell session's state was lost (its file was removed); this "
                      b"command runs in a fresh shell\n")
            _sessions.discard(session)
        for stale in (following, mark):
            if os.path.exists(stale):
                os.unlink(stale)
        cmd, env = _session_command(cmd, state, following, mark, env)
        buf.add(before)
    try:
        proc = _start(cmd, req.get("cwd") or None, env)
    except (OSError, ValueError) as e:
        return {"output": "pgs: cannot start command: %s\n" % e, "exit_code": 127,
                "timed_out": False, "truncated": False, "output_bytes": 0, "duration": 0.0}

    try:
        reason = _pump(proc, buf, timeout)
        timed_out = reason == "timeout"
        # The command is over, out of time or cancelled: end everything it started. Then no
        # writer is left (when contained), and the rest of the output is read to its end.
        _end(proc)
        _drain(proc.stdout, buf, 2.0 if CONTAIN else 0.0)
    except BaseException:  # Hangup: the owner is gone
        _end(proc)
        raise
    finally:
        proc.stdout.close()
    if session:
        after = _session_after(session, state, following, mark, restoring, reason)
    data, truncated = buf.render()
    return {
        "output": data.decode("utf-8", "replace") + after,
        "exit_code": -9 if timed_out else proc.returncode,
        "timed_out": timed_out,
        "truncated": truncated,
        "output_bytes": buf.total,
        "duration": time.monotonic() - start,
    }


def read(req):
    with open(req["path"], "rb") as f:
        return {"data": base64.b64encode(f.read()).decode("ascii")}


def write(req):
    path = req["path"]
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    os.chmod(path, int(req.get("mode", 0o644)))
    return {}


OPS = {"run": run, "read": read, "write": write, "ping": lambda req: {"pid": os.getpid()}}


def handle(req):
    rid = req.get("id")
    try:
        result = OPS[req["op"]](req)
    except KeyError as e:
        result = {"error": "unknown op or missing field: %s" % e}
    except Exception as e:  # reported to the caller, never fatal to the helper
        result = {"error": "%s: %s" % (type(e).__name__, e)}
    result["id"] = rid
    reply(result)


def main():
    # Replies go through our own handle on the real stdout; nothing else may write there.
    sys.stdout = sys.stderr
    # An interrupt is the owner's to handle: it cancels the command or closes the connection.
    # A Ctrl-C that reaches the helper too (its owner's terminal) must not end it with a
    # traceback on that terminal, nor before the owner has asked for the diff it keeps.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global CONTAIN
    CONTAIN = "--no-contain" not in sys.argv[1:] and _become_subreaper()
    global STATE_DIR
    given = "--state-dir" in sys.argv[1:-1]
    if given:
        STATE_DIR = sys.argv[sys.argv.index("--state-dir") + 1]
    _watch_children()
    reply({"id": None, "ready": True, "pid": os.getpid(), "contained": CONTAIN})
    try:
        while True:
            line = _in.readline().strip()
            if not line or line == CANCEL.strip():  # a cancel that came after its command
                continue
            try:
                req = json.loads(line.decode("utf-8"))
            except ValueError as e:
                reply({"id": None, "error": "bad request: %s" % e})
                continue
            handle(req)
    except Hangup:
        return
    finally:
        if STATE_DIR is not None and not given:  # a folder of its own: the helper's to remove
            shutil.rmtree(STATE_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
