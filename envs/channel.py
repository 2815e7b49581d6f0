"""Client side of the helper protocol (``envs/helper/pgs_helper.py``), shared by both sandboxes.

A :class:`Channel` is a pair of byte streams to one helper process: the Docker sandbox reads
the demultiplexed attach socket of its container, the local sandbox the pipes of a
subprocess. :class:`HelperSandbox` implements the :class:`~envs.sandbox.Sandbox` operations on
top of it, so both sandboxes behave the same way by construction.

The channel is not trusted to carry only replies: a command can write to the helper's own
stdout (``echo x > /proc/$PPID/fd/1``). A line that is not a reply, or text before a reply on
its line, is logged as a warning and skipped; the reply is still read and the next command
runs. A wait is bounded by one deadline, whatever arrives meanwhile, and an error says the
time really waited; a helper that gave no answer in time leaves the sandbox closed (a late
reply would answer the next request), so nothing waits on it again.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import logging
import posixpath
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

from envs.errors import SandboxClosed, SandboxError
from envs.sandbox import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT,
    SCRATCH_DIRS,
    CommandResult,
    diff_command,
)

#: The line that stops the running command (the helper's CANCEL), and how long its reply may take.
CANCEL = b"CANCEL\n"
CANCEL_WAIT = 10.0
#: Where a reply may start on a line that holds other text before it, and how many such places
#: are tried (each try parses the rest of the line).
OBJECT_START = b'{"'
STARTS_TRIED = 8

logger = logging.getLogger(__name__)

#: Seconds a reply may lag behind the command's own time limit before the helper is presumed dead.
REPLY_GRACE = 30.0


#: The helper's script among its files (:func:`helper_files`): what the sandbox runs.
HELPER_SCRIPT = "pgs_helper.py"


def helper_files() -> dict[str, bytes]:
    """The helper's files as shipped in the package (name -> content): its script and the
    modules it imports from its own folder, which go into one folder of the sandbox together."""
    folder = Path(__file__).parent / "helper"
    return {path.name: path.read_bytes() for path in sorted(folder.glob("pgs_helper*.py"))}


#: ``python -u -c HELPER_BOOT ARGS...``: reads a 10-digit length and that much Python from its
#: stdin (:func:`helper_boot`) and runs it; what follows on stdin is the helper's.
HELPER_BOOT = """\
import os
def read(n):
    data = b""
    while len(data) < n:
        more = os.read(0, n - len(data))
        if not more:
            raise SystemExit("pgs: the sandbox helper's files never came")
        data += more
    return data
exec(read(int(read(10))))
"""


@functools.cache
def helper_boot(folder: str) -> bytes:
    """What :data:`HELPER_BOOT` reads first from a new container's stdin: Python that writes the
    helper's files into ``folder``, each replaced whole (a link there is replaced, never
    followed), then becomes the helper (``python -u FOLDER/HELPER_SCRIPT ARGS...``). The files
    travel on stdin: an archive copied into a container costs the daemon a mount of its file
    system and a re-exec of itself, a tenth of a second of CPU with fuse-overlayfs, and every
    check starts a container; on the command line, they would fill every ``ps`` of the agent."""
    files = {name: data.decode("utf-8") for name, data in helper_files().items()}
    code = (
        f"import os, sys\nfolder, files = {folder!r}, {files!r}\n"
        "os.makedirs(folder, exist_ok=True)\n"
        "for name, text in files.items():\n"
        "    path = os.path.join(folder, name)\n"
        '    with open(path + ".new", "w", encoding="utf-8") as f:\n'
        "        f.write(text)\n"
        '    os.replace(path + ".new", path)\n'
        f"script = os.path.join(folder, {HELPER_SCRIPT!r})\n"
        'os.execv(sys.executable, [sys.executable, "-u", script] + sys.argv[1:])\n'
    ).encode()
    return b"%010d" % len(code) + code


class Channel(Protocol):
    def send(self, data: bytes) -> None: ...

    def readline(self, timeout: float | None) -> bytes:
        """One line from the helper's stdout, or b"" at end of stream. Raises TimeoutError."""
        ...

    def close(self) -> None: ...


class HelperSandbox:
    """Sandbox operations over a :class:`Channel`. Subclasses start the helper and upload files."""

    repo_path: str
    home: str

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.default_timeout = timeout
        self.max_output = max_output
        self.base_env = dict(env or {})
        self._channel: Channel | None = None
        self._ids = itertools.count(1)
        self.contained = False
        self._lock = threading.Lock()
        #: Seconds a reply may lag behind a command's time limit (:data:`REPLY_GRACE`).
        self.reply_grace = REPLY_GRACE

    # -- helper protocol -------------------------------------------------------------------

    def _attach(self, channel: Channel, *, timeout: float = 60.0) -> None:
        self._channel = channel
        hello = self._read_reply(timeout)
        if not hello.get("ready"):
            raise SandboxError(f"the sandbox helper did not start: {hello}")
        #: True when the helper ends every process a command started (it is a subreaper).
        self.contained = bool(hello.get("contained"))

    def _read_reply(self, timeout: float | None) -> dict[str, Any]:
        """The next reply, within ``timeout`` seconds in all (None: no limit)."""
        assert self._channel is not None
        started = time.monotonic()
        while True:
            left = None if timeout is None else max(0.0, started + timeout - time.monotonic())
            try:
                line = self._channel.readline(left)
            except TimeoutError as e:
                waited = time.monotonic() - started
                self._close_channel()  # its late reply would answer the next request
                raise SandboxError(
                    f"the sandbox helper gave no answer within {waited:.0f} s (is its container "
                    "paused, or the machine overloaded?); the sandbox is unusable, start a new "
                    "one"
                ) from e
            if not line:
                raise SandboxError(
                    "the sandbox helper stopped (the container was removed or ran out of "
                    f"memory); start a new sandbox. {self._helper_stderr()}".rstrip()
                )
            reply = self._reply_in(line)
            if reply is not None:
                return reply

    def _reply_in(self, line: bytes) -> dict[str, Any] | None:
        """The reply a line holds (a JSON object with an ``id``), after any text a command
        wrote before it on the same line; None (reported) when it holds none."""
        start = 0 if line.startswith(OBJECT_START) else line.find(OBJECT_START)
        for _ in range(STARTS_TRIED):
            if start < 0:
                break
            try:
                reply = json.loads(line[start:])
            except ValueError:  # JSONDecodeError, UnicodeDecodeError
                reply = None
            if isinstance(reply, dict) and "id" in reply:
                if start:
                    self._stray(line[:start])
                return reply
            start = line.find(OBJECT_START, start + 1)
        if line.strip():
            self._stray(line)
        return None

    def _helper_stderr(self) -> str:
        return ""

    def _stray(self, text: bytes) -> None:
        """Report what is no reply on the channel: a command wrote to the helper's stdout."""
        logger.warning(
            "ignored %d byte(s) on the sandbox helper's channel that are no reply (a command "
            "wrote to the helper's own output?): %r",
            len(text),
            text[:200],
        )

    def _call(self, op: str, *, wait: float | None, **fields: Any) -> dict[str, Any]:
        if self._channel is None:
            raise SandboxClosed("this sandbox is closed; start a new one")
        with self._lock:
            rid = next(self._ids)
            payload = json.dumps({"id": rid, "op": op, **fields}).encode() + b"\n"
            try:
                self._channel.send(payload)
            except OSError as e:
                raise SandboxError(f"cannot reach the sandbox helper: {e}") from e
            try:
                reply = self._read_reply(wait)
            except KeyboardInterrupt:  # Ctrl-C, SIGTERM: stop the command, then unwind
                self._cancel(rid)
                raise
        if reply.get("id") != rid:
            raise SandboxError(f"the sandbox helper answered out of order: {reply}")
        if "error" in reply:
            raise SandboxError(str(reply["error"]))
        return reply

    def _cancel(self, rid: int) -> None:
        """Stop the command of request ``rid`` and drop its reply, so that the next request
        (the diff an interrupted run keeps) is answered at once and in order. If that fails
        too, the channel is closed: later requests say the sandbox is closed."""
        assert self._channel is not None
        try:
            self._channel.send(CANCEL)
            while self._read_reply(CANCEL_WAIT).get("id") != rid:
                pass
        except BaseException:
            self._close_channel()

    def _abs(self, path: str) -> str:
        return path if posixpath.isabs(path) else posixpath.join(self.repo_path, path)

    # -- Sandbox ---------------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int | None = None,
        session: str | None = None,
    ) -> CommandResult:
        limit = self.default_timeout if timeout is None else timeout
        reply = self._call(
            "run",
            wait=limit + self.reply_grace,
            cmd=command,
            cwd=self._abs(cwd) if cwd else self.repo_path,
            env={**self.base_env, **(env or {})},
            timeout=limit,
            max_output=max_output or self.max_output,
            **({"session": session} if session else {}),
        )
        return CommandResult(
            output=reply["output"],
            exit_code=reply["exit_code"],
            timed_out=reply["timed_out"],
            truncated=reply["truncated"],
            output_bytes=reply["output_bytes"],
            duration=reply["duration"],
        )

    def read_file(self, path: str) -> bytes:
        try:
            reply = self._call("read", wait=self.reply_grace * 4, path=self._abs(path))
        except SandboxError as e:
            if "FileNotFoundError" in str(e):
                raise FileNotFoundError(path) from None
            raise
        return base64.b64decode(reply["data"])

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self._call(
            "write",
            wait=self.reply_grace * 4,
            path=self._abs(path),
            data=base64.b64encode(raw).decode("ascii"),
            mode=mode,
        )

    def diff(self, *, base: str = "HEAD", exclude: Sequence[str] = SCRATCH_DIRS) -> str:
        result = self.run(diff_command(base, exclude), max_output=1 << 30)
        if not result.ok:
            raise SandboxError(f"git diff failed in the sandbox:\n{result.output[-2000:]}")
        return result.output

    def _close_channel(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            channel.close()

    def close(self) -> None:
        self._close_channel()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
