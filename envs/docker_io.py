"""Bytes to and from a container: the frames of its attach socket (the helper's channel,
:class:`SocketChannel`) and the tar archives ``put_archive`` takes (:func:`tar_path`,
:func:`tar_files`)."""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import tarfile
import threading
import time
from pathlib import Path
from typing import Any


class SocketChannel:
    """The attach socket of a container without a TTY: frames of (stream, length, payload)."""

    def __init__(self, sock: Any) -> None:
        self._holder = sock
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._raw = bytearray()
        self._stdout = bytearray()
        self.stderr = bytearray()
        self._eof = False
        self._send_lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self._send_lock:  # the disk watch sends CANCEL from its own thread
            self._sock.sendall(data)

    def _fill(self) -> None:
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            self._eof = True
            return
        self._raw += chunk
        while len(self._raw) >= 8:
            stream, size = struct.unpack(">BxxxL", self._raw[:8])
            if len(self._raw) < 8 + size:
                break
            payload = bytes(self._raw[8 : 8 + size])
            del self._raw[: 8 + size]
            if stream == 2:
                self.stderr = (self.stderr + payload)[-4000:]
            else:
                self._stdout += payload

    def readline(self, timeout: float | None) -> bytes:
        # One deadline for the line: bytes trickling in must not restart the wait.
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._stdout and not self._eof:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._sock.settimeout(left)
            else:
                self._sock.settimeout(None)
            self._fill()  # socket.timeout is a TimeoutError
        end = self._stdout.find(b"\n") + 1 or len(self._stdout)
        line = bytes(self._stdout[:end])
        del self._stdout[:end]
        return line

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        close = getattr(self._holder, "close", None)
        if close is not None:
            close()


def tar_path(local: Path, name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(local), arcname=name)
    return buf.getvalue()
