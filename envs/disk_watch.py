"""The disk limit of a Docker sandbox where the storage driver gives no quota: the size of the
container's writable layer, measured while a command runs (:class:`DiskWatch`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

logger = logging.getLogger(__name__)


class DiskWatch:
    """Stops a command that grows the container's writable layer past ``limit`` bytes, for
    storage drivers without a quota.

    A thread measures the layer (``measure``) while a command runs, at most every
    ``interval`` seconds (the clock runs across commands, so a run of short ones is checked
    too). Over the limit and grown since the previous measure, the running command is stopped
    (``cancel``); over the limit but not growing (``rm``, reading), it runs on. ``begin`` and
    ``end`` bracket a command; ``end`` returns the size measured when it was stopped."""

    def __init__(
        self, measure: Callable[[], int], limit: int, interval: float, cancel: Callable[[], None]
    ) -> None:
        self._measure, self.limit, self.interval, self._cancel = measure, limit, interval, cancel
        self._cond = threading.Condition()
        self._running = 0  # the ticket of the running command, 0 when none runs
        self._tickets = 0
        self._stopped: dict[int, int] = {}
        self._closed = False
        self.used: int | None = None
        threading.Thread(target=self._loop, name="pgs-disk-watch", daemon=True).start()

    def begin(self) -> int:
        with self._cond:
            self._tickets += 1
            self._running = self._tickets
            self._cond.notify_all()
            return self._running

    def end(self, ticket: int) -> int | None:
        with self._cond:
            self._running = 0
            return self._stopped.pop(ticket, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _moved_on(self, ticket: int) -> bool:
        return self._closed or self._running != ticket

    def _loop(self) -> None:
        last = time.monotonic()
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._running != 0)
                if self._closed:
                    return
                ticket = self._running
                delay = last + self.interval - time.monotonic()
                if delay > 0:
                    # The clock keeps running for the next command if this one ends first.
                    self._cond.wait_for(partial(self._moved_on, ticket), delay)
                    continue
            try:
                used = self._measure()
            except Exception as e:  # the daemon is busy or the container is going away
                logger.debug("could not measure the sandbox's disk use: %s", e)
                last = time.monotonic()
                continue
            last = time.monotonic()
            with self._cond:
                grew = self.used is None or used > self.used
                self.used = used
                if used > self.limit and grew and self._running == ticket:
                    self._stopped[ticket] = used
                    # Under the lock: `end` cannot pass before the cancel is on its way, so it
                    # never reaches the next command.
                    self._cancel()


def megabytes(size: int) -> str:
    return f"{size / 1e6:.0f} MB"
