"""A persistent shell session (``Sandbox.run(..., session=...)``), in DockerSandbox and
LocalSandbox alike: what a command leaves (directory, variables, sourced files, functions,
aliases, options) is there for the next command of the session, and only for it; a command
that times out or is stopped leaves the session as it was, with a note; and every process a
session's command started still ends with the command."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from envs.docker_sandbox import DockerSandbox
from envs.sandbox import Sandbox
from tests.envs.test_containment import ESCAPES, _after, _alive

S = "generator"

#: A command that changes every part of a shell's state, the way a model's commands do.
CHANGES = (
    "mkdir -p sub && cd sub && export GREETING=hello && COUNT=2 && "
    "printf 'export FROM_FILE=sourced\\n' > ../vars.sh && source ../vars.sh && "
    'twice() { echo "$1$1"; } && alias hi="echo alias-works" && shopt -s extglob && '
    "greet() { echo exported-function; } && export -f greet"
)
#: Shows every part of the state CHANGES leaves.
SHOWS = (
    'pwd; echo "$GREETING ${COUNT:-unset} $FROM_FILE"; twice ab; hi; '
    "shopt -q extglob && echo extglob; bash -c greet"
)


def test_cd_export_source_functions_and_aliases_carry_over_in_a_session(
    sandbox: Sandbox,
) -> None:
    assert sandbox.run(CHANGES, session=S).ok
    shown = sandbox.run(SHOWS, session=S)
    assert shown.ok, shown.output
    assert shown.output.splitlines() == [
        f"{sandbox.repo_path}/sub",
        "hello 2 sourced",
        "abab",
        "alias-works",
        "extglob",
        "exported-function",
    ]
    # ... and what a later command undoes stays undone.
    assert sandbox.run("unset GREETING; unalias hi; cd ..", session=S).ok
    undone = sandbox.run('pwd; echo "${GREETING-gone}"; type hi || echo no-alias', session=S)
    assert undone.output.splitlines()[0] == sandbox.repo_path
    assert "gone" in undone.output and "no-alias" in undone.output


def test_without_a_session_nothing_carries_over_and_the_session_is_not_seen(
    sandbox: Sandbox,
) -> None:
    assert sandbox.run(CHANGES).ok
    fresh = sandbox.run(SHOWS)
    assert fresh.output.splitlines()[:2] == [sandbox.repo_path, " unset "]
    # A session's state never reaches a command outside it (the Tester's, the PGS checks').
    assert sandbox.run(CHANGES, session=S).ok
    outside = sandbox.run('pwd; echo "${GREETING-none}"; env | grep -c GREETING')
    assert outside.output.split() == [sandbox.repo_path, "none", "0"]
    assert sandbox.run("echo $GREETING", session=S).output == "hello\n"


def test_exit_codes_and_exit_keep_the_state(sandbox: Sandbox) -> None:
    gone = sandbox.run("cd /tmp && export LEFT=yes && exit 3", session=S)
    assert gone.exit_code == 3 and gone.output == ""
    assert sandbox.run('pwd; echo "$LEFT"', session=S).output == "/tmp\nyes\n"
    # set -e carries over: the next failure ends that command, as in a live session, and the
    # session is still there after it.
    sandbox.run("set -e", session=S)
    failed = sandbox.run("false; echo not-reached", session=S)
    assert failed.exit_code == 1 and "not-reached" not in failed.output
    assert sandbox.run("set +e; false; echo reached", session=S).output == "reached\n"


def test_a_traced_session_shows_only_the_commands_own_trace(sandbox: Sandbox) -> None:
    sandbox.run("set -x", session=S)
    traced = sandbox.run("echo hi", session=S)
    assert traced.output == "+ echo hi\nhi\n"


def test_a_timed_out_command_leaves_the_session_as_it_was(sandbox: Sandbox) -> None:
    assert sandbox.run("cd /tmp && export STEP=1", session=S).ok
    slow = sandbox.run("cd / && export STEP=2 && echo moved && sleep 60", session=S, timeout=1)
    assert slow.timed_out and "moved" in slow.output
    assert "shell session is as it was before this command" in slow.output
    after = sandbox.run('pwd; echo "$STEP"', session=S)
    assert after.ok and after.output == "/tmp\n1\n"


def _started(sandbox: Sandbox) -> bool:
    """Whether ``started`` exists in the repository (looked at from outside the helper, which
    is busy with the command)."""
    if isinstance(sandbox, DockerSandbox):
        path = f"{sandbox.repo_path}/started"
        return bool(sandbox.container.exec_run(["test", "-e", path]).exit_code == 0)
    return Path(sandbox.repo_path, "started").exists()


def test_a_stopped_command_leaves_the_session_as_it_was(sandbox: Sandbox) -> None:
    """The owner stops a command (Ctrl-C on its side, a disk limit): CANCEL to the helper."""
    assert sandbox.run("cd /tmp && export STEP=1", session=S).ok

    def cancel_once_started() -> None:
        while not _started(sandbox):
            time.sleep(0.05)
        assert sandbox._channel is not None  # type: ignore[attr-defined]
        sandbox._channel.send(b"CANCEL\n")  # type: ignore[attr-defined]

    stopper = threading.Thread(target=cancel_once_started)
    stopper.start()
    stopped = sandbox.run(
        f"cd / && export STEP=2 && touch {sandbox.repo_path}/started && sleep 60", session=S
    )
    stopper.join()
    assert not stopped.ok and "shell session is as it was before this command" in stopped.output
    assert sandbox.run('pwd; echo "$STEP"', session=S).output == "/tmp\n1\n"


@pytest.mark.parametrize("way", sorted(ESCAPES))
def test_a_background_process_of_a_session_ends_with_its_command(
    sandbox: Sandbox, way: str
) -> None:
    result = sandbox.run(ESCAPES[way] + _after([way]), session=S)
    assert result.ok and "done" in result.output, result.output
    assert not _alive(sandbox, f"{way}.pid")
    # The next command of the session runs at once and in the same state.
    assert sandbox.run("echo next", session=S).output == "next\n"


def test_a_command_that_never_returns_to_the_shell_says_its_changes_were_not_kept(
    sandbox: Sandbox,
) -> None:
    sandbox.run("cd /tmp", session=S)
    replaced = sandbox.run("cd / && exec true", session=S)
    assert replaced.exit_code == 0
    assert "ended without returning to the shell" in replaced.output
    assert sandbox.run("pwd", session=S).output == "/tmp\n"


def test_a_removed_directory_is_said_and_the_session_goes_on_in_the_repository(
    sandbox: Sandbox,
) -> None:
    assert sandbox.run("mkdir -p work && cd work && export KEPT=1", session=S).ok
    assert sandbox.run("rm -rf work").ok  # e.g. the Tester restores the original tree
    after = sandbox.run('echo "kept=$KEPT"; pwd', session=S)
    assert after.output.splitlines() == [
        f"pgs: the directory {sandbox.repo_path}/work is gone; the shell session is now in "
        f"{sandbox.repo_path}",
        "kept=1",
        sandbox.repo_path,
    ]
    assert sandbox.run('pwd; echo "$PWD"', session=S).output == f"{sandbox.repo_path}\n" * 2


def test_noclobber_and_nounset_in_the_session_do_not_stop_it(sandbox: Sandbox) -> None:
    assert sandbox.run("set -Cu && cd /tmp", session=S).ok
    assert sandbox.run("cd / && echo $-", session=S).output.strip().count("u") == 1
    assert sandbox.run("pwd", session=S).output == "/\n"


def test_a_function_that_hangs_the_restore_resets_the_session_once(sandbox: Sandbox) -> None:
    """A function named like a builtin the restore calls, that never returns: the next command
    times out, the session starts again from a fresh shell, and the one after runs."""
    assert sandbox.run("cd /tmp && shopt() { sleep 600; }", session=S).ok
    hung = sandbox.run("echo never", session=S, timeout=2)
    assert hung.timed_out and "never" not in hung.output
    assert "the shell session was reset" in hung.output
    again = sandbox.run("pwd; type shopt | head -1", session=S)
    assert again.ok and again.output == f"{sandbox.repo_path}\nshopt is a shell builtin\n"


def test_a_removed_state_file_is_said_and_the_session_starts_again(sandbox: Sandbox) -> None:
    assert sandbox.run("cd /tmp && export KEPT=1", session=S).ok
    where = "/tmp/pgs-sessions-*" if isinstance(sandbox, DockerSandbox) else "../sessions"
    assert sandbox.run(f"rm -rf {where}").ok  # the model's own `rm -rf /tmp/*`, say
    after = sandbox.run('pwd; echo "kept=${KEPT-no}"', session=S)
    assert after.output.splitlines() == [
        "pgs: the shell session's state was lost (its file was removed); this command runs in "
        "a fresh shell",
        sandbox.repo_path,
        "kept=no",
    ]
    assert sandbox.run("cd /tmp", session=S).ok
    assert sandbox.run("pwd", session=S).output == "/tmp\n"


@pytest.mark.parametrize("option", ["-t", "-n"])
def test_options_that_would_stop_every_later_command_are_not_in_effect(
    sandbox: Sandbox, option: str
) -> None:
    """``set -t`` (exit after one command) and ``set -n`` (run nothing), which an interactive
    bash ignores, would leave no command of the session able to run if they were restored."""
    sandbox.run(f"cd /tmp && set {option}", session=S)
    assert sandbox.run("echo runs; echo and-on", session=S).output == "runs\nand-on\n"
