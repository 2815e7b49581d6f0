"""Writers of one output folder, serialised: ``pgs run`` and ``pgs batch`` processes (and the
threads of one batch) that share an ``--output-dir`` never lose each other's results.

Both locks are ``fcntl.flock`` on the folders themselves, so they add no file to the results,
and a process that dies (a crash, SIGKILL) releases them with its file descriptors: no stale
claim ever blocks the next run. flock locks belong to an open file, not to a process, so two
threads of one process exclude each other too. (On NFS, where flock needs a file open for
writing, the lock fails: keep output folders on a local disk.)

- :func:`folder_lock`: on ``OUTPUT_DIR``, held briefly around a read-merge-write of a shared
  file (``preds.json``); waits for the other writer.
- :func:`claim`: on ``OUTPUT_DIR/<id>``, held for the whole run of one instance, taken
  without waiting, so a second writer of the same instance is told at once (:class:`Claimed`).
  A folder the run left empty is removed as the claim is released.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from agent.errors import Claimed


@contextlib.contextmanager
def folder_lock(output_dir: Path) -> Iterator[None]:
    """Exclusive lock on ``output_dir`` (which must exist), waiting for it; released on
    exit."""
    fd = os.open(output_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def claim(output_dir: Path, instance_id: str) -> Iterator[None]:
    """Hold ``output_dir/<instance_id>`` (made if missing) for the block; :class:`Claimed` when
    another writer holds it now."""
    folder = Path(output_dir) / instance_id
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            message = f"another pgs process is running {instance_id} into {output_dir} now"
            raise Claimed(message) from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(folder).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)  # its last holder removed it (empty) meanwhile: claim the new one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # not empty: the run's results stay
            folder.rmdir()
        os.close(fd)
