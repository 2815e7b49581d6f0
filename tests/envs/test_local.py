"""The local sandbox's boundary with the host: its environment and its copies (envs/local.py).
The local sandbox isolates nothing else (docs/environments.md); these are the parts it does keep
apart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from envs.local import HOST_ENV, LocalSandbox, LocalSandboxConfig

CANARY = f"canary-{uuid.uuid4().hex}"


def test_commands_see_an_allow_list_environment_not_the_hosts(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "MY_SERVICE_PASSWORD", "SOME_SETTING"):
        monkeypatch.setenv(name, CANARY)
    monkeypatch.setenv("LC_PGS_TEST", "kept")
    config = LocalSandboxConfig(env={"GIVEN_BY_THE_USER": "yes-given"})
    with LocalSandbox(small_repo, config) as box:
        seen = box.run(
            "env; printenv; for p in self $PPID; do tr '\\0' '\\n' < /proc/$p/environ; done"
        )
    assert seen.ok, seen.output
    assert CANARY not in seen.output
    assert "GIVEN_BY_THE_USER=yes-given" in seen.output  # sandbox.env
    assert f"HOME={box.home}" in seen.output and "LC_PGS_TEST=kept" in seen.output
    names = {line.split("=", 1)[0] for line in seen.output.splitlines() if "=" in line}
    allowed = {*HOST_ENV, "HOME", "LC_PGS_TEST", "GIVEN_BY_THE_USER"}
    # what bash and the helper set for themselves (PWD, SHLVL, _, ...) is all that is added
    assert names - allowed <= {"PWD", "OLDPWD", "SHLVL", "_"}, names - allowed


def test_upload_keeps_a_link_a_link(small_repo: Path, tmp_path: Path) -> None:
    host_file = tmp_path / "host-secret.txt"
    host_file.write_text(CANARY)
    link = tmp_path / "link"
    link.symlink_to(host_file)
    with LocalSandbox(small_repo) as box:
        box.upload(link, "carried")
        target = box.run("readlink carried")
        assert target.output.strip() == str(host_file)
        assert Path(box.repo_path, "carried").is_symlink()


def test_closing_the_channel_of_a_helper_that_died_does_not_raise(small_repo: Path) -> None:
    """A hang-up reaches the sandbox's helper too (same process group); the interrupt's cancel
    then fails on the dead pipe and closes the channel. That close must not raise: a
    BrokenPipeError there replaced the interrupt, and a run closed by its terminal ended
    ``exit_error`` with code 1 instead of ``interrupted`` and 130."""
    import signal

    box = LocalSandbox(small_repo)
    channel = box._channel
    assert channel is not None
    channel.proc.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
    channel.proc.wait()  # type: ignore[attr-defined]
    with pytest.raises(BrokenPipeError):
        channel.send(b"x\n")  # left in the buffer, unsent
    box.close()  # what the cancel does: no error, the channel is closed
    assert box._channel is None
