"""The host side of the helper channel (envs/channel.py) against what a command or the machine
can do to it: text written to the helper's own stdout is reported and skipped, the next command
runs; a helper that stops answering (its container paused) is reported after the time the
message says, and nothing waits on it again. Real helpers in real containers and processes."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from envs.channel import REPLY_GRACE
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.errors import SandboxClosed, SandboxError
from envs.sandbox import Sandbox

#: Writes to the stdout of this command's own helper: the nearest ancestor that is a helper
#: (never another sandbox's, nor a helper of another run on this machine); the pattern does
#: not match this command's own text.
TO_HELPER = (
    'p=$$; while [ "$p" -gt 1 ]; do '
    "if grep -qs 'pgs_helpe[r]' /proc/$p/cmdline; then { %s > /proc/$p/fd/1; } 2>/dev/null; "
    "break; fi; p=$(cut -d' ' -f4 /proc/$p/stat); done; echo command-done"
)


@pytest.mark.parametrize(
    "garbage",
    ["echo not-json-garbage", "printf not-json-garbage", 'echo \'{"not": "a reply"}\''],
    ids=["a line", "text before the reply", "json that is no reply"],
)
def test_text_on_the_helpers_stdout_is_reported_and_the_next_command_runs(
    garbage: str, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    result = sandbox.run(TO_HELPER % garbage)
    assert result.output.strip() == "command-done"
    assert "no reply" in caplog.text and (
        "not-json-garbage" in caplog.text or "a reply" in caplog.text
    )
    assert sandbox.run("echo next").output == "next\n"


@pytest.mark.docker
def test_a_paused_container_is_reported_after_the_time_the_message_says(
    base_image: str, small_repo: Path, docker_client: object
) -> None:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        assert box.reply_grace == REPLY_GRACE
        box.reply_grace = 3.0  # the default (30 s) shows the same, ten times slower
        box.container.pause()
        try:
            started = time.monotonic()
            with pytest.raises(SandboxError, match="no answer within") as raised:
                box.run("true", timeout=1)
            waited = time.monotonic() - started
            said = float(re.search(r"within (\d+) s", str(raised.value)).group(1))  # type: ignore[union-attr]
            assert said == pytest.approx(waited, abs=1)
            assert said >= 1 + box.reply_grace - 1  # it waited what the command's limit allows
            # The diff a failed run keeps must not wait on the same silent helper again.
            with pytest.raises(SandboxClosed):
                box.diff()
        finally:
            box.container.unpause()
