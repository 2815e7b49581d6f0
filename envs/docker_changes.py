"""What a container's set-up wrote: the paths its writable layer holds, for the seal.

Docker's own answer (``docker diff``) compares the container's filesystem with its image's.
Storage drivers without a native diff (fuse-overlayfs, the driver of rootless and nested
Docker) walk the whole image for it: seconds per sandbox (4.7 s on a 650 MB image here). Where
the daemon runs on this machine and its layer folders are readable (root, overlay2 or
fuse-overlayfs), the container's upper folder IS its writable layer: a listing of it is the
same answer in milliseconds, read by the host, not by anything in the container. Elsewhere
(a remote daemon, another user, another driver) ``docker diff`` answers.

Not counted as written: ``/tmp`` itself and the helper's folder (pgs's own files, shipped to
every container the same way), and Docker's init binary, which Docker places at
``/usr/sbin/docker-init`` of a container started with ``init`` (fuse-overlayfs shows it in the
writable layer): with the folders above them, which change only because those did. Nor, in the
listing, runc's passing ``/.pivot_root<n>`` folder (``docker diff`` never shows it).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Docker's init, bind-mounted into a container started with ``init=True``.
DOCKER_INIT = "/usr/sbin/docker-init"
#: The folder runc makes (and removes) at the root while it starts a process in the container.
RUNC_PIVOT = re.compile(r"\.pivot_root\d+")


def upper_dir(container: Any) -> Path | None:
    """The container's writable layer as a folder of this machine, when it is one we can read."""
    data = ((container.attrs or {}).get("GraphDriver") or {}).get("Data") or {}
    upper = data.get("UpperDir")
    if not isinstance(upper, str) or not upper:
        return None
    path = Path(upper)
    try:
        return path if path.is_dir() and os.access(path, os.R_OK | os.X_OK) else None
    except OSError:
        return None


def changed_paths(container: Any) -> list[str]:
    """Every path of ``container``'s writable layer (added, changed or deleted), absolute."""
    upper = upper_dir(container)
    if upper is None:
        return sorted(str(change["Path"]) for change in container.diff() or [])
    found = []
    for folder, dirs, files in os.walk(upper):
        rel = os.path.relpath(folder, upper)
        at = "/" if rel == "." else "/" + rel
        for name in [*dirs, *files]:
            # A folder made opaque (".wh..opq", ".wh..wh..opq") is listed itself; a deletion is
            # a 0/0 device of the same name or a ".wh.<name>" file.
            if name == ".wh..opq" or name.startswith(".wh..wh."):
                continue
            if at == "/" and RUNC_PIVOT.fullmatch(name):
                continue
            found.append(posixpath.join(at, name.removeprefix(".wh.")))
    return sorted(set(found))


def written_by_setup(changes: Iterable[str], own: Iterable[str]) -> list[str]:
    """``changes`` less pgs's and Docker's own (``own``: folders whose whole tree is pgs's, plus
    ``/tmp``, :data:`DOCKER_INIT` and the folders above each of them)."""
    trees = [d.rstrip("/") for d in own]
    ignored = {"/tmp", DOCKER_INIT, *trees}
    above = {parent for path in ignored for parent in _parents(path)}

    def ours(path: str) -> bool:
        path = path.rstrip("/") or "/"
        return path in ignored or path in above or any(path.startswith(t + "/") for t in trees)

    return [path for path in changes if not ours(path)]


def _parents(path: str) -> list[str]:
    out = []
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        out.append(path)
    return out
