"""Containment: every process a command started ends with it (see ``pgs_helper.py``'s
docstring). The helper is a child subreaper; :func:`end_descendants` freezes its process tree,
kills it and reaps it. Part of the sandbox helper, shipped and run beside it; standard library
only, Python 3.7+."""
import ctypes
import os
import signal
import time


def kill_group(pgid):
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


def become_subreaper():
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

