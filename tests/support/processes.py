"""What tests of a ``pgs`` process read of it as it runs: its output, waited on for a text."""

from __future__ import annotations

import os
import subprocess
import threading
import time


class Shown:
    """What a process writes to its stdout, read as it comes (so it never blocks on a full
    pipe), and waited on for a text."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.data = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while block := os.read(self.proc.stdout.fileno(), 4096):
            self.data += block

    def text(self) -> str:
        self.reader.join(10)
        return self.data.decode(errors="replace")

    def wait_for(self, text: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while text.encode() not in self.data:
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, self.data.decode(errors="replace")
            time.sleep(0.05)
