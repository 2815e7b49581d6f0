"""The Tester's properties are the host's, not the working tree's.

The Tester writes its properties into the sandbox (``.pgs/properties``), where the Generator
works too, and the folder is no part of the patch: nothing there may change what a check runs.
:class:`PropertyGuard` keeps on the host every file the Tester left in the folder (its bytes,
sha256 and mode; :meth:`PropertyGuard.take`, at the end of each Tester turn). Before every
check (:meth:`PropertyGuard.restore`) it

1. inspects the scratch folder, the properties folder and the plugin folder without following
   a symlink, and lists what differs from the host's copies as :class:`GuardedChange`
   (``edited``, ``deleted``, ``added``, ``mode 644 -> 600``, ``replaced by a symlink``, ...);
2. removes the properties folder whatever it is (a folder, a file, a symlink: the link, never
   its target), ``.pgs`` itself when it is not a real folder, anything else in ``.pgs``, and the
   plugin folder;
3. writes the host's copies back (and the plugin, by :func:`~agent.pgs.runner.install_plugin`).

Before the Tester's first turn the host has no copy: anything in the folder is the
Generator's, reported as ``added`` and removed. ``.pgs/.gitignore`` (``*``: ``git add -A``
skips the folder) is written anew, never reported. ``__pycache__`` folders are removed but never
reported (pytest writes them when the Generator reruns a property). The restored files stay
after the check, so the feedback's rerun command works for the Generator.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex

from agent.pgs.runner import PLUGIN_FILES, install_plugin, plugin_dir
from agent.record.pgs import GuardedChange
from envs.sandbox import Sandbox

#: git for pgs's own commands in the sandbox: the repository's hooks and fsmonitor are the
#: Generator's to write (.git is in its reach), so none of them runs when pgs restores files.
SAFE_GIT = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false"

#: Run in the sandbox: ``{"root": kind, "props": kind, "extra": [...], "files": {path:
#: [kind, sha256, mode]}, "plugin": kind, "plugin_files": {name: [kind, sha256, mode]}}``.
_INVENTORY = r"""
import hashlib, json, os, stat, sys
root, props, plugin = sys.argv[1:4]
def kind(path):
    try:
        st = os.lstat(path)
    except OSError:
        return "missing", None
    if stat.S_ISLNK(st.st_mode):
        return "symlink", st
    if stat.S_ISDIR(st.st_mode):
        return "dir", st
    return ("file" if stat.S_ISREG(st.st_mode) else "other"), st
def entry(path):
    k, st = kind(path)
    if k != "file":
        return [k, "", 0]
    with open(path, "rb") as f:
        return [k, hashlib.sha256(f.read()).hexdigest(), stat.S_IMODE(st.st_mode)]
def tree(top):
    found = {}
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in sorted(files) + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            found[os.path.join(d, name)] = entry(os.path.join(d, name))
        dirs[:] = [x for x in dirs if not os.path.islink(os.path.join(d, x))]
    return found
out = {"root": kind(root)[0], "props": "missing", "extra": [], "files": {}}
if out["root"] == "dir":
    out["extra"] = sorted(os.path.join(root, n) for n in os.listdir(root)
                          if os.path.join(root, n) != props and n != ".gitignore")
    out["props"] = kind(props)[0]
    if out["props"] == "dir":
        out["files"] = tree(props)
out["plugin"] = kind(plugin)[0]
out["plugin_files"] = {}
if out["plugin"] == "dir":
    out["plugin_files"] = {n: entry(os.path.join(plugin, n)) for n in os.listdir(plugin)}
print(json.dumps(out))
"""

#: What may be in the plugin folder besides the plugin (its reports and Hypothesis's storage).
_PLUGIN_SCRATCH = ("hypothesis", "report-", "candidate-", "__pycache__")


def _what(kind: str) -> str:
    return {
        "symlink": "replaced by a symlink",
        "missing": "deleted",
        "dir": "replaced by a folder",
    }.get(kind, "replaced by something else")


class PropertyGuard:
    """The Tester's property files as the host keeps them, restored before every check."""

    def __init__(self, properties_dir: str, python: str = "python3") -> None:
        self.properties_dir = properties_dir.rstrip("/")
        self.scratch = self.properties_dir.split("/", 1)[0]
        self.python = python
        #: {path: (bytes, mode)} of every file the Tester left; empty before its first turn.
        self.files: dict[str, tuple[bytes, int]] = {}

    def sha256(self) -> dict[str, str]:
        return {p: hashlib.sha256(data).hexdigest() for p, (data, _) in self.files.items()}

    def _inventory(self, sandbox: Sandbox) -> dict[str, object] | None:
        script = shlex.quote(_INVENTORY)
        args = " ".join(
            shlex.quote(a) for a in (self.scratch, self.properties_dir, plugin_dir(sandbox))
        )
        done = sandbox.run(f"{shlex.quote(self.python)} -c {script} {args}")
        try:
            data = json.loads(done.output.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return None
        return data if isinstance(data, dict) else None

    def take(self, sandbox: Sandbox) -> None:
        """Keep what the Tester left in the folder (its regular files; ``__pycache__`` and
        symlinks are not kept): the copies every later check restores."""
        found = self._inventory(sandbox) or {}
        files = found.get("files")
        self.files = {}
        for path, (kind, _, mode) in sorted((files or {}).items()):  # type: ignore[attr-defined]
            if kind == "file":
                self.files[path] = (sandbox.read_file(path), int(mode))

    def changes(self, sandbox: Sandbox) -> list[GuardedChange]:
        """What differs from the host's copies in the sandbox, file by file."""
        found = self._inventory(sandbox)
        if found is None:
            return [GuardedChange(path=self.properties_dir, change="could not be inspected")]
        out: list[GuardedChange] = []

        def add(path: str, change: str) -> None:
            out.append(GuardedChange(path=path, change=change))

        root, props = str(found["root"]), str(found["props"])
        if root != "dir":
            add(self.scratch, _what(root))
        elif props != "dir" and (self.files or props != "missing"):
            add(self.properties_dir, _what(props))
        for path in found.get("extra") or []:  # type: ignore[attr-defined]
            add(str(path), "added")
        files: dict[str, list[object]] = found.get("files") or {}  # type: ignore[assignment]
        if root == "dir" and props == "dir":
            for path, (data, mode) in self.files.items():
                now = files.get(path)
                if now is None:
                    add(path, "deleted")
                elif now[0] != "file":
                    add(path, _what(str(now[0])))
                elif now[1] != hashlib.sha256(data).hexdigest():
                    add(path, "edited")
                elif now[2] != mode:
                    add(path, f"mode {mode:o} -> {int(str(now[2])):o}")
            for path, now in files.items():
                if path not in self.files:
                    add(path, "added" if now[0] == "file" else f"added ({now[0]})")
        out += self._plugin_changes(sandbox, found)
        return out

    @staticmethod
    def _plugin_changes(sandbox: Sandbox, found: dict[str, object]) -> list[GuardedChange]:
        folder = plugin_dir(sandbox)
        kind = str(found.get("plugin"))
        if kind == "missing":
            return []
        if kind != "dir":
            return [GuardedChange(path=folder, change=_what(kind))]
        ours = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in PLUGIN_FILES}
        out = []
        entries: dict[str, list[object]] = found.get("plugin_files") or {}  # type: ignore[assignment]
        for name, (kind_now, sha, _) in sorted(entries.items()):
            path = posixpath.join(folder, name)
            if name in ours:
                if kind_now != "file" or sha != ours[name]:
                    change = "edited" if kind_now == "file" else _what(str(kind_now))
                    out.append(GuardedChange(path=path, change=change))
            elif not name.startswith(_PLUGIN_SCRATCH) or kind_now not in ("file", "dir"):
                out.append(GuardedChange(path=path, change="added"))
        return out

    def restore(self, sandbox: Sandbox) -> list[GuardedChange]:
        """Report what differs (:meth:`changes`), then put exactly the host's copies (and a
        fresh plugin folder) in place; returns the changes."""
        changes = self.changes(sandbox)
        scratch, props = shlex.quote(self.scratch), shlex.quote(self.properties_dir)
        plugin = shlex.quote(plugin_dir(sandbox))
        # The scratch folder first: through a symlinked .pgs, rm would reach the link's target.
        done = sandbox.run(
            f"if [ -L {scratch} ] || {{ [ -e {scratch} ] && [ ! -d {scratch} ]; }}; then "
            f"rm -f -- {scratch}; fi && "
            f"find {scratch} -mindepth 1 -maxdepth 1 ! -path {props} -exec rm -rf -- {{}} + "
            f"2>/dev/null; rm -rf -- {props} {plugin} && mkdir -p -- {props}"
        )
        if not done.ok:
            raise RuntimeError(f"could not restore the Tester's properties: {done.output[-500:]}")
        for path, (data, mode) in self.files.items():
            sandbox.write_file(path, data, mode=mode)
        sandbox.write_file(posixpath.join(self.scratch, ".gitignore"), "*\n")
        install_plugin(sandbox)
        return changes


def describe(changes: list[GuardedChange]) -> str:
    """``.pgs/properties/test_x.py (edited), ...``"""
    return ", ".join(f"{c.path} ({c.change})" for c in changes)
