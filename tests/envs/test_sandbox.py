"""The Sandbox protocol, run against DockerSandbox and LocalSandbox alike."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.docker_util import LABEL, RUN_LABEL
from envs.errors import (
    DockerUnavailable,
    ImageNotFound,
    NotAGitRepository,
    SandboxClosed,
    SandboxError,
)
from envs.local import LocalSandbox
from envs.sandbox import Sandbox
from tests.support.containers import one_off
from tests.support.repos import git


@pytest.fixture
def docker_box(base_image: str, small_repo: Path) -> Iterator[DockerSandbox]:
    config = DockerSandboxConfig(image=base_image, memory="512m", cpus=1.5, pids_limit=256)
    with DockerSandbox(config, repo=small_repo, run_id="test-run") as box:
        yield box


def test_satisfies_protocol(sandbox: Sandbox) -> None:
    assert isinstance(sandbox, Sandbox)


def test_run_reports_output_exit_code_and_duration(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.run("echo out; echo err >&2; exit 3")
    took = time.monotonic() - start
    assert result.output == "out\nerr\n"
    assert result.exit_code == 3
    assert not result.timed_out and not result.truncated
    assert 0 < result.duration <= took  # the command's own time, in seconds


def test_no_shell_state_leaks_between_commands(sandbox: Sandbox) -> None:
    sandbox.run("cd /tmp && export PGS_LEAK=1")
    result = sandbox.run('pwd; echo "[$PGS_LEAK]"')
    assert result.output == f"{sandbox.repo_path}\n[]\n"


def test_cwd_and_env_are_explicit(sandbox: Sandbox) -> None:
    sandbox.run("mkdir -p sub")
    result = sandbox.run('pwd; echo "$GREETING"', cwd="sub", env={"GREETING": "hi there"})
    assert result.output == f"{sandbox.repo_path}/sub\nhi there\n"


def _alive(sandbox: Sandbox, pid_file: str) -> bool:
    """A killed child may linger as a zombie until its new parent reaps it: that is dead too."""
    state = sandbox.run(f"ps -o stat= -p $(cat {pid_file})").output.strip()
    return state != "" and not state.startswith("Z")


def test_timeout_kills_the_whole_process_group(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.run("sleep 300 & echo $! > child.pid; echo started; wait", timeout=1)
    assert result.timed_out and not result.ok
    assert "started" in result.output
    assert time.monotonic() - start < 300  # not waited for the child's sleep
    assert not _alive(sandbox, "child.pid")


def test_an_interrupt_stops_the_command_and_the_sandbox_answers_at_once(
    sandbox: Sandbox,
) -> None:
    # Ctrl-C (or SIGTERM, which pgs turns into one) while a command runs: the command is
    # stopped, and the next request (the diff an interrupted run keeps) gets its own answer.
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            sandbox.run("echo started > started.txt; sleep 60; echo late > late.txt")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    after = sandbox.run("echo answered; ls")
    assert after.output.startswith("answered\n") and after.duration < 60  # not after the sleep
    assert "started.txt" in after.output and "late.txt" not in after.output
    assert "started.txt" in sandbox.diff()


def test_background_child_does_not_outlive_its_command(sandbox: Sandbox) -> None:
    result = sandbox.run("sleep 300 & echo $! > child.pid", timeout=10)
    assert result.ok and not result.timed_out  # not waited for the child
    assert not _alive(sandbox, "child.pid")


def test_output_is_capped_head_and_tail_kept(sandbox: Sandbox) -> None:
    result = sandbox.run(
        "echo FIRST; head -c 5000000 /dev/zero | tr '\\0' a; echo; echo LAST", max_output=10_000
    )
    assert result.ok and result.truncated
    assert result.output_bytes > 5_000_000
    assert len(result.output) < 11_000
    assert result.output.startswith("FIRST\n")
    assert result.output.endswith("LAST\n")
    assert "bytes omitted" in result.output


def test_endless_output_neither_hangs_nor_floods(sandbox: Sandbox) -> None:
    result = sandbox.run("yes", timeout=1, max_output=4096)
    assert result.timed_out and result.truncated
    assert len(result.output) < 5000


def test_file_round_trip_binary(sandbox: Sandbox) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    sandbox.write_file("data/blob.bin", data)
    assert sandbox.read_file("data/blob.bin") == data
    assert sandbox.run("wc -c < data/blob.bin").output.strip() == str(len(data))


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
def test_text_file_round_trip(sandbox: Sandbox, text: str) -> None:
    sandbox.write_file("t.txt", text)
    assert sandbox.read_file("t.txt").decode() == text


def test_read_missing_file(sandbox: Sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        sandbox.read_file("no/such/file")


def test_upload_folder(sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "bundle" / "bin").mkdir(parents=True)
    (tmp_path / "bundle" / "bin" / "hello").write_text("#!/bin/sh\necho hello from bundle\n")
    (tmp_path / "bundle" / "bin" / "hello").chmod(0o755)
    sandbox.upload(tmp_path / "bundle", f"{sandbox.home}/tools/bundle")
    result = sandbox.run(f"{sandbox.home}/tools/bundle/bin/hello")
    assert result.output == "hello from bundle\n"


def test_diff_has_new_files_excludes_scratch_and_keeps_index(sandbox: Sandbox) -> None:
    sandbox.write_file("calc.py", "def add(a, b):\n    return b + a\n")
    sandbox.write_file("new_module.py", "X = 1\n")
    sandbox.write_file(".pgs/properties/test_p.py", "def test(): pass\n")
    patch = sandbox.diff()
    assert "+    return b + a" in patch
    assert "new file mode" in patch and "new_module.py" in patch
    assert ".pgs" not in patch
    status = sandbox.run("git status --porcelain").output
    assert "?? new_module.py" in status  # the user's index was not touched


def test_closed_sandbox_says_so(small_repo: Path) -> None:
    box = LocalSandbox(small_repo)
    box.close()
    box.close()  # idempotent
    with pytest.raises(SandboxClosed, match="closed"):
        box.run("true")


def test_local_sandbox_never_touches_the_original(small_repo: Path) -> None:
    with LocalSandbox(small_repo) as box:
        box.write_file("calc.py", "broken\n")
        box.run("git commit -qam 'x' --no-verify || true")
    assert "return a + b" in (small_repo / "calc.py").read_text()
    assert git(small_repo, "status", "--porcelain") == ""


def test_not_a_git_repository(tmp_path: Path) -> None:
    with pytest.raises(NotAGitRepository, match="not a git repository"):
        LocalSandbox(tmp_path)


# -- Docker only ------------------------------------------------------------------------------


def test_container_is_labelled_and_removed(docker_box: DockerSandbox, docker_client: Any) -> None:
    container = docker_client.containers.get(docker_box.container.id)
    assert container.labels[LABEL] == "1"
    assert container.labels[RUN_LABEL] == "test-run"
    assert container.status == "running"
    docker_box.close()
    assert not docker_client.containers.list(
        all=True, filters={"id": container.id}, ignore_removed=True
    )


def test_the_helper_comes_on_stdin_and_a_link_at_its_path_is_replaced_not_followed(
    base_image: str, docker_client: Any
) -> None:
    """The helper's files are written by the container itself, from its stdin (no archive is
    copied in: each copy costs the daemon a mount and a re-exec); an image that holds a link
    where the helper goes gets the link replaced, and the file it pointed at is untouched."""
    from envs.channel import helper_files
    from envs.docker_sandbox import HELPER_DIR

    plant = (
        f"mkdir -p {HELPER_DIR} && echo kept > /tmp/target && "
        f"ln -s /tmp/target {HELPER_DIR}/pgs_helper.py"
    )
    with one_off(docker_client, base_image, ["sh", "-c", plant]) as planted:
        planted.wait(timeout=60)
        image = planted.commit(repository="pgs-test-linked-helper", tag=uuid.uuid4().hex[:8])
    started = int(time.time()) - 1
    try:
        with DockerSandbox(DockerSandboxConfig(image=image.id)) as box:
            listing = box.run(f"ls -l {HELPER_DIR}; cat /tmp/target", cwd="/")
            files = {n: box.read_file(f"{HELPER_DIR}/{n}") for n in helper_files()}
            cid = box.container.id
    finally:
        docker_client.images.remove(image.id, force=True)
    assert files == helper_files()
    assert "->" not in listing.output and listing.output.rstrip().endswith("kept"), listing.output
    seen = docker_client.events(
        since=started, until=int(time.time()) + 1, decode=True, filters={"container": cid}
    )
    actions = [e.get("Action") or e.get("status") for e in seen]
    assert "start" in actions, actions  # the events were read
    assert "extract-to-dir" not in actions, "an archive was copied into the container"


def test_network_is_off_by_default(docker_box: DockerSandbox) -> None:
    probe = (
        'python3 -c "import socket; s = socket.socket(); s.settimeout(3); '
        "s.connect(('1.1.1.1', 53)); print('connected')\""
    )
    result = docker_box.run(probe, timeout=20)
    assert result.exit_code != 0
    assert "connected" not in result.output
    assert "unreachable" in result.output.lower()
    assert docker_box.run("ls /sys/class/net").output.split() == ["lo"]


def test_limits_are_applied(docker_box: DockerSandbox, docker_client: Any) -> None:
    host = docker_client.containers.get(docker_box.container.id).attrs["HostConfig"]
    assert host["Memory"] == 512 * 1024 * 1024
    assert host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] == 1_500_000_000
    assert host["PidsLimit"] == 256
    assert host["NetworkMode"] == "none"
    inside = docker_box.run(
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
    )
    assert inside.output.strip() == str(512 * 1024 * 1024)


def test_memory_hog_is_stopped_by_the_limit(docker_box: DockerSandbox) -> None:
    result = docker_box.run("python3 -c 'x = bytearray(2 * 1024**3)'", timeout=60)
    assert result.exit_code != 0


def test_dead_helper_is_reported(docker_box: DockerSandbox) -> None:
    with pytest.raises(SandboxError, match="helper stopped"):
        docker_box.run("kill -9 $PPID; sleep 5")


def test_missing_image_is_one_clear_error() -> None:
    config = DockerSandboxConfig(image="pgs-no-such-image:never")
    try:
        with pytest.raises(ImageNotFound, match="pgs-no-such-image") as info:
            DockerSandbox(config)
    except DockerUnavailable:
        pytest.skip("no Docker daemon")
    assert "pgs env" in str(info.value)


def test_dead_daemon_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nobody.sock")
    with pytest.raises(DockerUnavailable) as info:
        DockerSandbox(DockerSandboxConfig(image="anything"))
    message = str(info.value)
    assert "nobody.sock" in message and "start Docker" in message
    assert "\n" not in message


def test_exit_code_of_a_command_that_closes_its_output_first(sandbox: Sandbox) -> None:
    # rm, git and env close stdout before they exit; the helper must not kill them in that gap.
    codes = {
        sandbox.run("git status -s >/dev/null && rm -f nothing && env >/dev/null").exit_code
        for _ in range(30)
    }
    assert codes == {0}


def test_command_that_closes_output_but_runs_on_is_timed_out(sandbox: Sandbox) -> None:
    result = sandbox.run("exec >/dev/null 2>&1; sleep 30", timeout=1)
    assert result.timed_out
