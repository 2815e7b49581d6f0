"""No debris: a sandbox's container goes with the process that owns it, whatever ends that
process, and cleaning up after ended runs never touches a live run's containers.

The owners here are subprocesses (a small script, a real ``pgs run``) killed with SIGKILL, so
nothing of theirs gets to clean up. Their containers carry their pid, not this session's, so the
suite's leak check cannot see them: each test removes what it made, by its labels, in a finally.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cli import main as pgs
from agent.models.script_server import ScriptedServer
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.docker_util import (
    HOST_LABEL,
    LABEL,
    PID_LABEL,
    RUN_LABEL,
    STARTED_LABEL,
    container_labels,
    labels,
    list_containers,
    owner_gone,
    remove_container,
    stat_fields,
)
from envs.images.housekeeping import reap_orphans

ROOT = Path(__file__).resolve().parents[2]
#: How long a container may outlive its owner.
WITHIN = 10.0

#: An owner: opens a sandbox on the image argv[1] for run argv[2], prints its container id,
#: runs the command argv[3] if given, then waits to be killed.
OWNER = """
import sys, time
from envs import scratch
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
box = DockerSandbox(DockerSandboxConfig(image=sys.argv[1]), run_id=sys.argv[2])
print(box.container.id, flush=True)
if len(sys.argv) > 3:
    box.run(sys.argv[3], cwd="/", timeout=600)
time.sleep(600)
"""


def python(code: str, *args: str, **env: str) -> subprocess.Popen[str]:
    """``code`` run by this venv's Python with pgs importable, stdout piped."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        text=True,
    )


def run_id() -> str:
    return f"test-debris-{uuid.uuid4().hex[:8]}"


def remove_all(client: Any, *label_filters: str) -> None:
    """Remove the containers a test made (by labels naming them, never others')."""
    for container in list_containers(client, f"{LABEL}=1", *label_filters):
        remove_container(client, container["Id"])


def exists(client: Any, container_id: str) -> bool:
    return bool(client.api.containers(all=True, filters={"id": container_id}))


def running(client: Any, container_id: str) -> bool:
    found = client.api.containers(all=True, filters={"id": container_id})
    return bool(found) and found[0]["State"] == "running"


def wait_for(condition: Callable[[], bool], within: float, what: str) -> float:
    """Poll ``condition`` until it holds; the seconds that took. Fails after ``within``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > within:
            pytest.fail(f"{what}: not after {within:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - start


def runs_command(client: Any, container_id: str, command: str) -> bool:
    if not running(client, container_id):
        return False
    return any(command in " ".join(row) for row in client.api.top(container_id)["Processes"])


def kill(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        stat = stat_fields(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return False
    return stat is not None and stat[0] not in ("Z", "X")


@contextmanager
def owner(image: str, run: str, command: str | None = None) -> Iterator[tuple[Any, str]]:
    """A live subprocess owning a sandbox of run ``run``: yields (process, container id)."""
    proc = python(OWNER, image, run, *([command] if command else []))
    try:
        assert proc.stdout is not None
        container_id = proc.stdout.readline().strip()
        assert container_id, f"the owner did not start its sandbox (exit {proc.wait()})"
        yield proc, container_id
    finally:
        kill(proc)


def dead_owner_labels(run: str) -> dict[str, str]:
    """The labels a process puts on its containers, from a process that has ended since."""
    code = "import json, sys; from envs.docker_util import container_labels as c; "
    code += "print(json.dumps(c(sys.argv[1])))"
    proc = python(code, run)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    found: dict[str, str] = json.loads(out)
    return found


def debris(client: Any, image: str, with_labels: dict[str, str]) -> str:
    """A container as an older pgs left it behind: ``sleep infinity`` with these labels.

    Made in two steps, as ``docker run`` makes it: an orphan is any pgs's to remove, and one
    starting on another worker (every sandbox reaps once per process) may remove it between
    the two. Then its start fails and it is gone, as the test expects of an orphan."""
    import docker.errors

    config = client.api.create_host_config(init=True, network_mode="none")
    made = client.api.create_container(
        image, ["sleep", "infinity"], host_config=config, labels=with_labels
    )
    container_id = str(made["Id"])  # not inspected: it may be gone already
    try:
        client.api.start(container_id)
    except docker.errors.APIError:
        if not owner_gone(with_labels):
            raise  # nobody removes a live owner's container: a real error
        remove_container(client, container_id)  # waits for the other reaper's removal
        assert not exists(client, container_id)
    return container_id


# -- a container goes with its owner ---------------------------------------------------------


@pytest.mark.docker
@pytest.mark.parametrize("command", [None, "sleep 120"], ids=["idle", "mid-command"])
def test_sigkill_of_the_owner_takes_its_container_along(
    docker_client: Any, base_image: str, command: str | None
) -> None:
    run = run_id()
    try:
        with owner(base_image, run, command) as (proc, container_id):
            if command:
                wait_for(lambda: runs_command(docker_client, container_id, command), 30, command)
            assert running(docker_client, container_id)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            wait_for(lambda: not exists(docker_client, container_id), WITHIN, "container left")
    finally:
        remove_all(docker_client, f"{RUN_LABEL}={run}")


@pytest.mark.docker
def test_sigkill_of_pgs_run_mid_command_takes_its_container_along(
    docker_client: Any, base_image: str, small_repo: Path, tmp_path: Path
) -> None:
    sleep = "sleep 120"
    script = [
        {"content": "Wait.", "tool_calls": [{"name": "bash", "arguments": {"command": sleep}}]},
        {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    log = tmp_path / "pgs.log"
    with ScriptedServer(script) as server, log.open("w") as log_file:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "agent.cli", "run"),
                *("--repo", str(small_repo), "--issue", "add() must add"),
                *("--model", "scripted", "--base-url", server.url, "--image", base_image),
                *("--model.prices", json.dumps({"scripted": [0, 0]}), "--feedback", "none"),
                *("--output-dir", str(tmp_path / "out")),
            ],
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        mine = f"{PID_LABEL}={proc.pid}"
        try:

            def sleeping() -> bool:
                assert proc.poll() is None, f"pgs run ended first:\n{log.read_text()}"
                found = list_containers(docker_client, f"{LABEL}=1", mine)
                return bool(found) and runs_command(docker_client, found[0]["Id"], sleep)

            wait_for(sleeping, 120, f"pgs run running {sleep}")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            wait_for(
                lambda: not list_containers(docker_client, f"{LABEL}=1", mine),
                WITHIN,
                "pgs run's container left",
            )
        finally:
            kill(proc)
            remove_all(docker_client, mine)


def test_sigkill_of_a_local_sandbox_owner_ends_its_helper_and_command(
    small_repo: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    code = (
        "import sys; from pathlib import Path; from envs.local import LocalSandbox\n"
        "LocalSandbox(Path(sys.argv[1])).run(sys.argv[2], timeout=600)\n"
    )
    # $PPID: the helper, which started the command's shell; $$: the command.
    command = f"echo $PPID $$ > {pids}.new; mv {pids}.new {pids}; exec sleep 120"
    # TMPDIR: the copy of the repository that a killed owner leaves behind lands in tmp_path.
    proc = python(code, str(small_repo), command, TMPDIR=str(tmp_path))
    try:
        wait_for(pids.exists, 60, "the command did not start")
        left = [int(pid) for pid in pids.read_text().split()]
        assert all(alive(pid) for pid in left)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        wait_for(lambda: not any(alive(pid) for pid in left), WITHIN, "helper or command left")
    finally:
        kill(proc)


# -- removing what ended owners left, and nothing else ------------------------------------


@pytest.mark.docker
def test_reap_orphans_removes_ended_owners_containers_and_keeps_live_ones(
    docker_client: Any, base_image: str
) -> None:
    run = run_id()
    ended = dead_owner_labels(run)
    made = {
        "ended owner": debris(docker_client, base_image, ended),
        "ended owner, older pgs (a pid only)": debris(
            docker_client, base_image, {**labels(run), PID_LABEL: ended[PID_LABEL]}
        ),
        # This process's pid, but a start time that is not this process's: the pid was reused.
        "reused pid": debris(
            docker_client, base_image, {**container_labels(run), STARTED_LABEL: "1"}
        ),
        "another host": debris(docker_client, base_image, {**ended, HOST_LABEL: "elsewhere"}),
        "no owner": debris(docker_client, base_image, labels(run)),
    }
    try:
        with (
            owner(base_image, run) as (_, live),
            DockerSandbox(DockerSandboxConfig(image=base_image), run_id=run) as mine,
        ):
            reap_orphans(docker_client)

            left = {what for what, cid in made.items() if exists(docker_client, cid)}
            assert left == {"another host", "no owner"}
            assert running(docker_client, live)
            assert mine.run("echo still here", cwd="/").output == "still here\n"
    finally:
        remove_all(docker_client, f"{RUN_LABEL}={run}")


@pytest.mark.docker
def test_pgs_env_prune_orphans_keeps_live_runs(
    docker_client: Any, base_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_id()
    orphan = debris(docker_client, base_image, dead_owner_labels(run))
    try:
        with owner(base_image, run) as (_, live):
            assert pgs(["env", "prune", "--orphans"]) == 0

            assert re.fullmatch(r"removed \d+ orphan container\(s\)\n", capsys.readouterr().out)
            assert not exists(docker_client, orphan)
            assert running(docker_client, live)
    finally:
        remove_all(docker_client, f"{RUN_LABEL}={run}")


def test_prune_help_says_it_removes_live_runs_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert pgs(["env", "prune", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "labelled pgs-agent=1, including the containers of runs still going" in text
    assert "--orphans" in text


# -- who owns a container ---------------------------------------------------------------------


def test_owner_gone_tells_ended_owners_only() -> None:
    me = container_labels("r")
    assert me[HOST_LABEL] == socket.gethostname() and me[PID_LABEL] == str(os.getpid())
    assert not owner_gone(me)
    ended = dead_owner_labels("r")
    assert owner_gone(ended)
    assert owner_gone({PID_LABEL: ended[PID_LABEL]})  # an older pgs: a pid, no host
    assert owner_gone({**me, STARTED_LABEL: "1"})  # this pid, another process
    # What cannot be told is kept.
    assert not owner_gone({**ended, HOST_LABEL: "elsewhere"})
    for unknown in ({}, {PID_LABEL: "x"}, {PID_LABEL: "0"}, {PID_LABEL: "-1"}):
        assert not owner_gone(unknown)


def test_a_zombie_owner_is_gone() -> None:
    code = "import json; from envs.docker_util import container_labels as c; "
    code += "print(json.dumps(c()), flush=True); import time; time.sleep(60)"
    proc = python(code)
    try:
        assert proc.stdout is not None
        its_labels = json.loads(proc.stdout.readline())
        assert not owner_gone(its_labels)
        proc.kill()  # and not waited for: a zombie until then
        wait_for(lambda: not alive(proc.pid), WITHIN, "the owner did not die")
        assert Path(f"/proc/{proc.pid}").exists()  # still there, as a zombie
        assert owner_gone(its_labels)
    finally:
        kill(proc)


@given(
    comm=st.text(st.characters(blacklist_characters="\x00"), max_size=16),
    state=st.sampled_from("RSDZTtXI"),
    start=st.integers(0, 2**63),
)
def test_stat_fields_reads_state_and_start_whatever_the_command_name(
    comm: str, state: str, start: int
) -> None:
    rest = [str(n) for n in range(4, 53)]
    rest[22 - 4] = str(start)
    text = f"4242 ({comm}) {state} {' '.join(rest)}\n"
    assert stat_fields(text) == (state, str(start))


# -- temporary trees: removed on start-up once their owner has ended ---------------------------

#: An owner of a local sandbox in $TMPDIR: prints its tree, makes a read-only folder in it (as
#: a command may), then waits to be killed.
TREE_OWNER = """
import sys, time
from pathlib import Path
from envs.local import LocalSandbox
box = LocalSandbox(Path(sys.argv[1]))
box.run("mkdir -p locked/in && touch locked/in/f && chmod 500 locked/in locked")
print(box._tmp, flush=True)
time.sleep(600)
"""


def start_pgs(cwd: Path, **env: str) -> None:
    """A ``pgs`` command that starts and fails at once (no such repository): its start-up."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "agent.cli", "run", "--model", "m", "--issue", "x", "--repo"),
            str(cwd / "none"),
        ],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr, done.stderr


def test_a_killed_owners_working_tree_is_removed_at_the_next_start_and_live_ones_kept(
    small_repo: Path, tmp_path: Path
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    unowned = tmp / "pgs-local-of-an-older-pgs"  # no owner in its name: never touched
    unowned.mkdir()
    killed, live = (python(TREE_OWNER, str(small_repo), TMPDIR=str(tmp)) for _ in range(2))
    try:
        trees = {}
        for name, proc in (("killed", killed), ("live", live)):
            assert proc.stdout is not None
            trees[name] = Path(proc.stdout.readline().strip())
            assert trees[name].parent == tmp and (trees[name] / "repo" / "calc.py").exists()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        wait_for(lambda: not alive(killed.pid), WITHIN, "the owner did not die")
        assert trees["killed"].exists()  # SIGKILL: nothing of the owner cleaned up

        start_pgs(tmp_path, TMPDIR=str(tmp))

        assert not trees["killed"].exists()
        assert (trees["live"] / "repo" / "calc.py").exists() and unowned.exists()
    finally:
        kill(killed)
        kill(live)
        subprocess.run(["chmod", "-R", "u+rwx", str(tmp)], check=True)
        shutil.rmtree(tmp)


#: Builds the image of repository argv[1] with an install step that takes its time, in the
#: cache $PGS_CACHE_DIR; waits there to be killed.
BUILD_OWNER = """
import sys
from envs.images import RepoImageSpec, build_repo_image
spec = RepoImageSpec.checked({"install": ["sleep 300"]}, source="test")
build_repo_image(sys.argv[1], spec=spec, run_id=sys.argv[2])
"""


@pytest.mark.docker
def test_a_build_killed_mid_step_leaves_no_clone_or_context_after_the_next_start(
    docker_client: Any, base_image: str, small_repo: Path, tmp_path: Path
) -> None:
    # A short path: the build's proxy socket lives in the build context (AF_UNIX: 108 bytes).
    cache = Path(tempfile.mkdtemp(prefix="pgs-t-", dir="/tmp"))
    builds = cache / "build"
    run = run_id()
    builder = python(BUILD_OWNER, str(small_repo), run, PGS_CACHE_DIR=str(cache))
    try:

        def mid_build() -> bool:
            assert builder.poll() is None, "the build ended first"
            found = {p.name.split("-")[0] for p in builds.glob("*")} if builds.exists() else set()
            return {"clone", "ctx"} <= found

        wait_for(mid_build, 300, "the build never had its clone and context")
        builder.send_signal(signal.SIGKILL)
        builder.wait()
        left = sorted(p.name.split("-")[0] for p in builds.iterdir())
        assert left == ["clone", "ctx"]  # the repository's copy and the build context

        start_pgs(tmp_path, PGS_CACHE_DIR=str(cache))

        assert list(builds.iterdir()) == []
    finally:
        kill(builder)
        remove_all(docker_client, f"{RUN_LABEL}={run}")
        shutil.rmtree(cache)
