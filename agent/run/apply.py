"""``--apply``: the agent's patch applied to the user's working tree, checked first, all or
nothing; refused with one :class:`~agent.errors.InputError` that names the fix."""

from __future__ import annotations

import posixpath
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from agent.errors import InputError


def apply_patch(
    repo: Path,
    patch: str,
    *,
    exit_status: str = "submitted",
    force: bool = False,
    redacted: Sequence[str] = (),
    patch_file: Path | None = None,
) -> None:
    """Apply the agent's patch to the user's working tree (checked first, all or nothing).

    Refused, each with one :class:`InputError` naming the fix: an empty patch; a patch of a
    run whose ``exit_status`` is not ``submitted`` (a limit, an error, an interrupt ended it),
    unless ``force``; a patch whose secret values were redacted (``redacted``: the variables'
    names; it no longer holds what the agent wrote); a patch that makes a symbolic link point
    outside the repository (:func:`links_outside`)."""
    where = f" (the patch is in {patch_file})" if patch_file else ""
    if not patch.strip():
        raise InputError("the run produced an empty patch: nothing to apply")
    if exit_status != "submitted" and not force:
        raise InputError(
            f"the run ended with {exit_status}, not a submitted patch, so --apply left your "
            f"tree alone{where}: review it and pass --force with --apply to apply it anyway"
        )
    if redacted:
        raise InputError(
            f"the patch held the value of {', '.join(redacted)}, written as *** in its place, "
            f"so it is not applied{where}: put the value back by hand and apply it with "
            "`git apply`"
        )
    outside = links_outside(patch, repo)
    if outside:
        raise InputError(
            f"the patch makes the symbolic link {outside[0]} point outside the repository, so "
            f"it is not applied{where}: review it, remove that link and apply it with "
            "`git apply`"
        )
    for check in (True, False):
        args = ["git", "apply", "--whitespace=nowarn", *(["--check"] if check else []), "-"]
        done = subprocess.run(args, cwd=repo, input=patch, text=True, capture_output=True)
        if done.returncode != 0:
            raise InputError(
                f"the patch does not apply to {repo}: {done.stderr.strip()}; the patch file "
                "is kept, apply it by hand"
            )


_LINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000$|^index \S+ 120000$")


def links_outside(patch: str, repo: Path) -> list[str]:
    """``link -> target`` of each symbolic link the git patch makes (new, changed, renamed or
    copied) whose target lies outside the repository: absolute, or ``..`` past its top."""
    found = []
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        lines = section.splitlines()
        path = old = ""
        added = []
        for line in lines:
            if line.startswith("+++ "):
                path = _patch_path(line[4:])
            elif line.startswith(("rename to ", "copy to ")):
                path = _unquote(line.split(" to ", 1)[1])
            elif line.startswith(("rename from ", "copy from ")):
                old = _unquote(line.split(" from ", 1)[1])
            elif line.startswith("+") and not line.startswith("+++"):
                added.append(line[1:])
        to_file = any(re.match(r"(?:new file mode|new mode) 100", line) for line in lines)
        moved_link = bool(old) and (repo / old).is_symlink() and not to_file
        if not path or not (moved_link or any(_LINK_MODE.match(line) for line in lines)):
            continue
        if added:
            target = "\n".join(added)
        elif moved_link:  # renamed or copied as it is: the same target, from a new place
            target = str((repo / old).readlink())
        else:
            continue
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if posixpath.isabs(target) or inside == ".." or inside.startswith("../"):
            found.append(f"{path} -> {target}")
    return found


def _unquote(name: str) -> str:
    """A path as git writes it in a patch header (C-quoted when it holds special bytes)."""
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        name = name.encode("latin-1", "replace").decode("utf-8", "replace")
    return name


def _patch_path(header: str) -> str:
    """``b/PATH`` of a ``+++`` line, without the ``b/``."""
    name = _unquote(header.split("\t", 1)[0])
    return "" if name == "/dev/null" else name.removeprefix("b/")
