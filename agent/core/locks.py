"""Writers of one output folder, serialised: ``pgs run`` and ``pgs batch`` processes (and the
threads of one batch) that share an ``--output-dir`` never lose each other's results.

Two kinds of lock, both ``fcntl.flock`` on files under ``OUTPUT_DIR/.pgs-locks/``, so that a
process that dies (a crash, SIGKILL) releases them with its file descriptors: no stale claim
ever blocks the next run.

- :func:`folder_lock`: held briefly around a read-merge-write of a shared file (``preds.json``);
  waits for the other writer.
- :func:`claim`: held for the whole run of one instance; taken without waiting, so a second
  writer of the same instance is told at once (:class:`Claimed`). flock locks belong to an open
  file, not to a process, so two threads of one process exclude each other too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

#: The folder of the lock files, inside the output folder.
LOCKS = ".pgs-locks"


class Claimed(RuntimeError):
    """Another process (or thread) is running this instance into this folder now."""


def _open(output_dir: Path, name: str) -> int:
    folder = Path(output_dir) / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    return os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)


@contextlib.contextmanager
def folder_lock(output_dir: Path, name: str = "preds.lock") -> Iterator[None]:
    """Exclusive lock ``name`` of ``output_dir``, waiting for it; released on exit."""
    fd = _open(output_dir, name)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def claim(output_dir: Path, instance_id: str) -> Iterator[None]:
    """Hold ``instance_id`` in ``output_dir`` for the block: :class:`Claimed` (naming the
    holder's pid) when another writer holds it now."""
    fd = _open(output_dir, f"{instance_id}.lock")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            by = f" (pid {holder})" if holder.isdigit() else ""
            raise Claimed(
                f"another pgs process{by} is running {instance_id} into {output_dir} now"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
