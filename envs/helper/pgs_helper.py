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
whatever Python the repository uses. The helper is this script and the modules beside it, one
per part: the protocol's streams (``pgs_helper_io``), a command's process and output
(``pgs_helper_command``), containment (``pgs_helper_procs``), shell sessions
(``pgs_helper_session``). They ship together: a sandbox copies every ``pgs_helper*.py`` of this
folder into one folder of its own (``envs.channel.helper_files``) and runs this script there.
"""
import base64
import json
import os
import shutil
import signal
import sys
import time

# The helper's other modules sit beside this file (sys.path[0] is missing under
# PYTHONSAFEPATH) and are compiled afresh each start: no __pycache__ is written in the sandbox.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pgs_helper_command as command  # noqa: E402
import pgs_helper_procs as procs  # noqa: E402
import pgs_helper_session as shell  # noqa: E402
from pgs_helper_io import CANCEL, Hangup, incoming, reply  # noqa: E402


def run(req):
    env = dict(os.environ)
    env.update(req.get("env") or {})
    timeout = req.get("timeout")
    buf = command.CappedBuffer(int(req.get("max_output") or 1000000))
    start = time.monotonic()
    cmd, session, before, after = req["cmd"], req.get("session"), b"", ""
    if session:
        state, following, mark = shell.session_files(session)
        restoring = os.path.exists(state)
        if session in shell.sessions and not restoring:
            before = (b"pgs: the shell session's state was lost (its file was removed); this "
                      b"command runs in a fresh shell\n")
            shell.sessions.discard(session)
        for stale in (following, mark):
            if os.path.exists(stale):
                os.unlink(stale)
        cmd, env = shell.session_command(cmd, state, following, mark, env)
        buf.add(before)
    try:
        proc = command.start(cmd, req.get("cwd") or None, env)
    except (OSError, ValueError) as e:
        return {"output": "pgs: cannot start command: %s\n" % e, "exit_code": 127,
                "timed_out": False, "truncated": False, "output_bytes": 0, "duration": 0.0}

    try:
        reason = command.pump(proc, buf, timeout)
        timed_out = reason == "timeout"
        # The command is over, out of time or cancelled: end everything it started. Then no
        # writer is left (when contained), and the rest of the output is read to its end.
        command.end(proc)
        command.drain(proc.stdout, buf, 2.0 if procs.CONTAIN else 0.0)
    except BaseException:  # Hangup: the owner is gone
        command.end(proc)
        raise
    finally:
        proc.stdout.close()
    if session:
        after = shell.session_after(session, state, following, mark, restoring, reason)
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
    procs.CONTAIN = "--no-contain" not in sys.argv[1:] and procs.become_subreaper()
    given = "--state-dir" in sys.argv[1:-1]
    if given:
        shell.STATE_DIR = sys.argv[sys.argv.index("--state-dir") + 1]
    command.watch_children()
    reply({"id": None, "ready": True, "pid": os.getpid(), "contained": procs.CONTAIN})
    try:
        while True:
            line = incoming.readline().strip()
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
        if shell.STATE_DIR is not None and not given:  # a folder of its own: the helper's to remove
            shutil.rmtree(shell.STATE_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
