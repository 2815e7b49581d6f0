"""Persistent shell sessions: a session's state (directory, variables, functions, aliases,
options) restored before each of its commands and saved after it, when it ended by itself (see
``pgs_helper.py``'s docstring). Part of the sandbox helper, shipped and run beside it; standard
library only, Python 3.7+."""
import os
import re
import tempfile

#: Where session states live: set by ``--state-dir DIR``, else a temporary folder made at the
#: first session command (in a container, it goes with the container).
STATE_DIR = None
#: Sessions that have had a state, to tell a lost state file from a new session.
sessions = set()

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


def session_files(name):
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


def session_command(cmd, state, following, mark, env):
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


def session_after(name, state, following, mark, restoring, reason):
    """Keep the state the command saved when it ended by itself; else a note for its output.

    A command stopped before its restore was over (``mark`` not written; a function named like
    a builtin the restore uses, that hangs) would stop every later command the same way: the
    session starts again from a fresh shell then, and the note says so."""
    try:
        if reason == "ended" and os.path.exists(following):
            os.replace(following, state)
            sessions.add(name)
            return ""
        if os.path.exists(following):
            os.unlink(following)
        if restoring and reason != "ended" and not os.path.exists(mark):
            os.unlink(state)
            sessions.discard(name)
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

