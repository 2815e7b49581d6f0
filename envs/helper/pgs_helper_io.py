"""The helper's protocol streams: request lines from stdin (a cancel noticed while a command
runs), replies to the real stdout. Part of the sandbox helper (``pgs_helper.py``), shipped and
run beside it; standard library only, Python 3.7+."""
import json
import os
import sys

_out = sys.stdout.buffer
#: A line the owner sends to stop the command it waits for (Ctrl-C, SIGTERM on its side).
CANCEL = b"CANCEL\n"


class Hangup(BaseException):
    """End of stdin: the owner is gone. Not an Exception, so no request handler reports it."""


class Requests(object):
    """Request lines from a file descriptor, read with os.read so that a running command's
    pump can watch the same descriptor for the end of stdin (the selector and Python's own
    buffering of sys.stdin would disagree about what is left to read)."""

    def __init__(self, fd):
        self.fd = fd
        self.pending = bytearray()

    def fill(self):
        """Read what is there; raises Hangup at end of stream."""
        chunk = os.read(self.fd, 65536)
        if not chunk:
            raise Hangup()
        self.pending += chunk

    def take_cancel(self):
        """True (and the line consumed) when the owner asked to stop the running command."""
        at = self.pending.find(CANCEL)
        if at < 0 or (at > 0 and self.pending[at - 1:at] != b"\n"):
            return False
        del self.pending[at:at + len(CANCEL)]
        return True

    def readline(self):
        while b"\n" not in self.pending:
            self.fill()
        end = self.pending.index(b"\n") + 1
        line = bytes(self.pending[:end])
        del self.pending[:end]
        return line


#: The helper's requests: its stdin.
incoming = Requests(sys.stdin.fileno())


def reply(message):
    data = (json.dumps(message) + "\n").encode("utf-8")
    _out.write(data)
    _out.flush()

