"""A command's processes end with the command, in DockerSandbox and LocalSandbox alike: whatever
group or session they moved to, none is left to edit the repository between steps, and a fork
bomb does not take the sandbox with it. On the host, no process the command did not start is
touched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.local import LocalSandbox
from envs.sandbox import Sandbox

#: Ways a command's child leaves the command's process group; each writes its own pid to a
#: file named after the way, then sleeps.
ESCAPES = {
    "setsid": "setsid sh -c 'echo $$ > setsid.pid; exec sleep 300' &",
    "timeout": "timeout 300 sh -c 'echo $$ > timeout.pid; exec sleep 300' &",
    "set-m": "(set -m; sh -c 'echo $$ > set-m.pid; exec sleep 300' &)",
    # A daemon as daemons start: fork, setsid, fork again, the parents exit at once.
    "daemon": (
        "python3 -c 'import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        '        open("daemon.pid", "w").write(str(os.getpid()))\n'
        "        time.sleep(300)\n'"
    ),
}


def _after(ways: list[str]) -> str:
    """Shell lines that wait until each way's pid file is written, then say done."""
    files = " ".join(f"{way}.pid" for way in ways)
    return f"\nfor f in {files}; do until [ -s $f ]; do sleep 0.05; done; done; echo done"


#: Appends a line to grow.txt ten times a second, from a session of its own.
WRITER = "setsid sh -c 'while :; do echo x >> grow.txt; sleep 0.1; done' &"


def _alive(sandbox: Sandbox, pid_file: str) -> bool:
    """Whether the process whose pid is in ``pid_file`` runs (a zombie is dead)."""
    pid = sandbox.read_file(pid_file).decode().strip()
    assert pid.isdigit(), f"{pid_file} holds {pid!r}"
    state = sandbox.run(f"ps -o stat= -p {pid}").output.strip()
    return state != "" and not state.startswith("Z")


def test_a_background_writer_stops_editing_the_repository(sandbox: Sandbox) -> None:
    started = sandbox.run(f"{WRITER} until [ -s grow.txt ]; do sleep 0.05; done; echo started")
    assert started.ok and "started" in started.output
    sizes = sandbox.run("wc -c < grow.txt; sleep 1; wc -c < grow.txt").output.split()
    assert len(sizes) == 2 and sizes[0] == sizes[1], f"grow.txt still grows: {sizes}"
    diff = sandbox.diff()
    assert diff.count("+x") == int(sizes[1]) // 2  # the patch holds only what was written


@pytest.mark.parametrize("way", sorted(ESCAPES))
def test_a_child_that_left_the_process_group_ends_with_the_command(
    sandbox: Sandbox, way: str
) -> None:
    result = sandbox.run(ESCAPES[way] + _after([way]))
    assert result.ok and "done" in result.output, result.output
    assert not _alive(sandbox, f"{way}.pid")


def test_output_held_open_by_a_leftover_does_not_hold_the_reply(sandbox: Sandbox) -> None:
    # A leftover in its own session writing to the command's output, forever.
    result = sandbox.run(
        "setsid sh -c 'while :; do echo tick; sleep 0.01; done' & echo started", timeout=30
    )
    assert result.ok and result.output.startswith("started\n")
    # Today's helper read the leftover's ticks until the command's time limit.
    assert not result.timed_out, f"the reply waited {result.duration:.0f} s for a leftover"
    after = sandbox.run("echo next")
    assert after.output == "next\n"


def test_a_process_the_command_did_not_start_is_never_touched(small_repo: Path) -> None:
    # The local sandbox runs among the user's own processes: one started beside the helper
    # (a child of this test, as the helper is) and one in a session of its own must survive
    # every command, escapes included.
    beside = subprocess.Popen(["sleep", "300"])
    apart = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        with LocalSandbox(small_repo) as box:
            commands = [*ESCAPES.values(), WRITER]
            result = box.run("\n".join(commands) + _after(list(ESCAPES)))
            assert result.ok and "done" in result.output
            for way in ESCAPES:
                assert not _alive(box, f"{way}.pid")
            assert box.run("sleep 0.2; echo again").output == "again\n"
        assert beside.poll() is None and apart.poll() is None
    finally:
        for proc in (beside, apart):
            proc.kill()
            proc.wait()


@pytest.mark.docker
def test_nothing_but_the_helper_is_left_in_the_container(base_image: str, small_repo: Path) -> None:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        commands = [*ESCAPES.values(), WRITER]
        assert box.run("\n".join(commands) + _after(list(ESCAPES))).ok
        # ps itself, Docker's init and the helper: nothing else.
        left = box.run("ps -eo comm=").output.split()
        assert sorted(left) == ["docker-init", "ps", "python3"], left


@pytest.mark.docker
def test_a_fork_bomb_under_timeout_ends_and_the_next_command_runs(
    base_image: str, small_repo: Path
) -> None:
    config = DockerSandboxConfig(image=base_image, pids_limit=200, cpus=1.0)
    with DockerSandbox(config, repo=small_repo) as box:
        bomb = box.run("timeout 15 bash -c ':(){ :|:& };:'; echo launched", timeout=60)
        assert "launched" in bomb.output
        after = box.run("echo next; ps -e --no-headers | wc -l")
        assert after.ok, after.output
        lines = after.output.split()
        assert lines[0] == "next"
        # init, the helper, bash, ps and wc at most
        assert int(lines[1]) <= 5, after.output
        assert box.run("python3 -c 'print(6 * 7)'").output == "42\n"
