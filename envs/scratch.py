"""Temporary trees that name their owner, and the removal of those whose owner has ended.

A process killed with SIGKILL cleans nothing up: its working trees (``$TMPDIR/pgs-<id>-*`` of a
batch, a local sandbox's copy) and its image build folders (``~/.cache/pgs/build/clone-*``, a
full copy of the repository, and ``ctx-*``) stay. So every such tree is made here, by
:func:`mkdtemp` or :func:`temporary_directory`, with its owner in its name, as containers carry
theirs in labels (:func:`envs.docker_util.container_labels`): the suffix
``.owner-<host>-<pid>-<start>`` (the host as a short hash of its name, the start time in clock
ticks after boot, so a reused pid is told apart). ``pgs`` removes the trees whose owner has
ended (:func:`envs.docker_util.owner_gone`) on start-up (:func:`reap_at_startup`: ``$TMPDIR``
and the build folder of the cache), and the first tree a process makes in any folder does the
same there. A tree whose owner is alive, is on another host, or whose name carries no owner is
never touched, nor one with something mounted inside it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from envs.docker_util import HOST_LABEL, PID_LABEL, STARTED_LABEL, container_labels, owner_gone

__all__ = [
    "cache_dir",
    "mkdtemp",
    "owner_suffix",
    "reap_at_startup",
    "reap_trees",
    "remove_tree",
    "temporary_directory",
]

logger = logging.getLogger(__name__)

_OWNER = re.compile(r"\.owner-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-(?P<started>\d+)$")
_reaped: set[Path] = set()
_reaped_lock = threading.Lock()


def _host_tag(host: str) -> str:
    return hashlib.sha256(host.encode()).hexdigest()[:8]


def owner_suffix() -> str:
    """The end of a tree's name that names this process as its owner."""
    me = container_labels()
    return f".owner-{_host_tag(me[HOST_LABEL])}-{me[PID_LABEL]}-{me.get(STARTED_LABEL, '0')}"


def _owner_gone(name: str) -> bool:
    found = _OWNER.search(name)
    if found is None or found["host"] != _host_tag(socket.gethostname()):
        return False  # no owner in the name, or another host's: cannot be told
    owner = {HOST_LABEL: socket.gethostname(), PID_LABEL: found["pid"]}
    if found["started"] != "0":  # 0: the owner's start time was unknown (no /proc)
        owner[STARTED_LABEL] = found["started"]
    return owner_gone(owner)


def reap_trees(folder: Path) -> list[Path]:
    """Remove the trees in ``folder`` whose owner has ended; the paths removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and _owner_gone(entry.name):
            remove_tree(Path(entry.path))
            removed.append(Path(entry.path))
    if removed:
        logger.info("removed %d temporary tree(s) of ended pgs runs in %s", len(removed), folder)
    return removed


def _reap_once(folder: Path) -> None:
    """The first tree a process makes in ``folder`` cleans up after ended owners there; a
    failure is logged, never raised: it must not cost the run."""
    with _reaped_lock:
        if folder in _reaped:
            return
        _reaped.add(folder)
    try:
        reap_trees(folder)
    except Exception as e:
        logger.warning("could not remove the temporary trees of ended pgs runs: %s", e)


def cache_dir() -> Path:
    """Where pgs caches what it builds and fetches: ``$PGS_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/pgs``, else ``~/.cache/pgs`` (here, not in :mod:`envs.images`, which
    imports this module)."""
    if os.environ.get("PGS_CACHE_DIR"):
        return Path(os.environ["PGS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgs"


def reap_at_startup() -> None:
    """Remove the trees of ended owners where pgs makes them: ``$TMPDIR`` and the cache's
    build folder (clones and build contexts of repository images)."""
    for folder in (Path(tempfile.gettempdir()), cache_dir() / "build"):
        _reap_once(folder.resolve())


def mkdtemp(prefix: str, dir: str | Path | None = None) -> Path:
    """A new temporary folder, named ``<prefix><random><owner suffix>`` (in ``dir``, else
    ``$TMPDIR``); the caller removes it (:func:`remove_tree`)."""
    folder = Path(dir) if dir is not None else Path(tempfile.gettempdir())
    _reap_once(folder.resolve())
    return Path(tempfile.mkdtemp(prefix=prefix, suffix=owner_suffix(), dir=folder))


@contextmanager
def temporary_directory(prefix: str, dir: str | Path | None = None) -> Iterator[str]:
    """:func:`mkdtemp` as ``tempfile.TemporaryDirectory`` is used: yields its path, removes it."""
    path = mkdtemp(prefix, dir)
    try:
        yield str(path)
    finally:
        remove_tree(path)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything in it, folders a command made read-only included. A tree
    with something mounted below it is left whole (with a warning): removing it would empty
    what is mounted there (a host folder bound in, a debootstrap's /dev)."""
    mounted = _mount_points_below(path)
    if mounted:
        logger.warning(
            "left %s: %s is mounted inside it (umount it, then remove it)", path, mounted[0]
        )
        return

    def open_up(folder: str) -> None:
        with suppress(OSError):
            os.chmod(folder, os.stat(folder, follow_symlinks=False).st_mode | stat.S_IRWXU)

    if not path.is_symlink():
        open_up(str(path))
    for folder, subfolders, _ in os.walk(path):  # each subfolder opened before walk reads it
        for name in subfolders:
            if not os.path.islink(os.path.join(folder, name)):
                open_up(os.path.join(folder, name))
    shutil.rmtree(path, ignore_errors=True)


def _mount_points_below(path: Path) -> list[str]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    prefix = str(Path(path).resolve()) + "/"
    # /proc/mounts writes a space in a path as \040.
    points = [line.split()[1].replace("\\040", " ") for line in lines if len(line.split()) > 1]
    return [p for p in points if p.startswith(prefix)]
