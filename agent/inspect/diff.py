"""Diffs for the inspector: a unified diff parsed into files, hunks and lines (with ``unidiff``),
and the diff between two candidates of the same base (:func:`interdiff`).

Two candidate patches P1 and P2 were both made against the original code, so the change from
P1 to P2 is not in either. :func:`interdiff` rebuilds it from the patches alone: every hunk
shows the original lines it covers (context and removed lines), so for each region of a file
that either patch touches, both versions of that region are known; regions neither patch
touches are the same in both. Renames and binary files are not rebuilt (an
:class:`InterdiffError` says so, and a view shows the two patches instead).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import unidiff

from agent.errors import InterdiffError
from agent.inspect.model import Diff, DiffLine, FileDiff, Hunk

_PREFIX = re.compile(r"^[ab]/")
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_KINDS = {"+": "added", "-": "removed", " ": "context"}


def _clean_path(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip()
    if name == "/dev/null":
        return None
    return _PREFIX.sub("", name)


def _line_text(value: str) -> str:
    return value[:-1] if value.endswith("\n") else value


def parse_diff(text: str | None) -> Diff:
    """``text`` as files, hunks and lines; an unparseable diff keeps its text and says why."""
    text = text or ""
    diff = Diff(text=text)
    if not text.strip():
        return diff
    try:
        patch = unidiff.PatchSet(text)
    except unidiff.UnidiffParseError as e:
        diff.error = f"not a unified diff unidiff can read ({e})"
        return diff
    for patched in patch:
        old = _clean_path(patched.source_file)
        new = _clean_path(patched.target_file)
        if patched.is_binary_file:
            status = "binary"
        elif old is None:
            status = "added"
        elif new is None:
            status = "removed"
        elif old != new:
            status = "renamed"
        else:
            status = "modified"
        path = new or old or _clean_path(patched.path) or "?"
        file = FileDiff(
            path=path,
            old_path=old if status == "renamed" else None,
            status=status,
            added=patched.added,
            removed=patched.removed,
        )
        for hunk in patched:
            header = (
                f"@@ -{hunk.source_start},{hunk.source_length} "
                f"+{hunk.target_start},{hunk.target_length} @@"
            )
            if hunk.section_header:
                header += f" {hunk.section_header.strip()}"
            lines = [
                DiffLine(
                    kind=_KINDS.get(line.line_type, "note"),  # type: ignore[arg-type]
                    text=_line_text(line.value),
                    old=line.source_line_no,
                    new=line.target_line_no,
                )
                for line in hunk
            ]
            file.hunks.append(Hunk(header=header, lines=lines))
        diff.files.append(file)
    if not diff.files:
        diff.error = "no file diffs in it"
    return diff


# -- interdiff ------------------------------------------------------------------------------------


@dataclass
class _Hunk:
    lo: int  # first original line it covers (1-based); lo == hi: an insertion before lo
    hi: int  # one past the last
    source: list[str]
    target: list[str]


@dataclass
class _File:
    added: bool
    removed: bool
    hunks: list[_Hunk]


def _files(text: str) -> dict[str, _File]:
    if not text.strip():
        return {}
    try:
        patch = unidiff.PatchSet(text)
    except unidiff.UnidiffParseError as e:
        raise InterdiffError(f"a candidate is not a unified diff ({e})") from None
    out: dict[str, _File] = {}
    for patched in patch:
        old, new = _clean_path(patched.source_file), _clean_path(patched.target_file)
        if patched.is_binary_file or (old and new and old != new):
            raise InterdiffError(f"{old or new} is renamed or binary in a candidate")
        hunks = []
        for hunk in patched:
            kept = [line for line in hunk if line.line_type in _KINDS]
            source = [_line_text(x.value) for x in kept if x.line_type != "+"]
            target = [_line_text(x.value) for x in kept if x.line_type != "-"]
            lo = hunk.source_start if source else hunk.source_start + 1
            hunks.append(_Hunk(lo, lo + len(source), source, target))
        hunks.sort(key=lambda h: (h.lo, h.hi))
        path = new or old or "?"
        out[path] = _File(added=old is None, removed=new is None, hunks=hunks)
    return out


def _regions(hunks: list[_Hunk]) -> list[tuple[int, int]]:
    regions: list[list[int]] = []
    for h in sorted(hunks, key=lambda h: (h.lo, h.hi)):
        if regions and h.lo <= regions[-1][1]:
            regions[-1][1] = max(regions[-1][1], h.hi)
        else:
            regions.append([h.lo, h.hi])
    return [(lo, hi) for lo, hi in regions]


def _version(hunks: list[_Hunk], base: dict[int, str], lo: int, hi: int) -> list[str]:
    out: list[str] = []
    pos = lo
    for h in hunks:
        if h.lo < lo or h.hi > hi:
            continue
        out.extend(base[i] for i in range(pos, h.lo))
        out.extend(h.target)
        pos = h.hi
    out.extend(base[i] for i in range(pos, hi))
    return out


def _offset(hunks: list[_Hunk], before: int) -> int:
    """How many lines a patch added before original line ``before``."""
    return sum(len(h.target) - len(h.source) for h in hunks if h.hi <= before and h.lo < before)


def _shift(header: str, old: int, new: int) -> str:
    match = _HUNK_HEADER.match(header)
    if match is None:
        return header
    a, alen, b, blen, rest = match.groups()
    alen = "1" if alen is None else alen
    blen = "1" if blen is None else blen
    return f"@@ -{int(a) + old},{alen} +{int(b) + new},{blen} @@{rest}"


def interdiff(previous: str, current: str) -> str:
    """The unified diff from candidate ``previous`` to candidate ``current`` (both against the
    same original code); '' when they make the same change."""
    a_files, b_files = _files(previous), _files(current)
    out: list[str] = []
    for path in sorted(set(a_files) | set(b_files)):
        a = a_files.get(path, _File(False, False, []))
        b = b_files.get(path, _File(False, False, []))
        base: dict[int, str] = {}
        for h in [*a.hunks, *b.hunks]:
            for i, line in enumerate(h.source, start=h.lo):
                if base.setdefault(i, line) != line:
                    raise InterdiffError(
                        f"the candidates disagree on line {i} of {path} of the original code"
                    )
        hunks: list[str] = []
        for lo, hi in _regions([*a.hunks, *b.hunks]):
            old = _version(a.hunks, base, lo, hi)
            new = _version(b.hunks, base, lo, hi)
            if old == new:
                continue
            a_start = lo + _offset(a.hunks, lo)
            b_start = lo + _offset(b.hunks, lo)
            for line in difflib.unified_diff(old, new, n=3, lineterm=""):
                if line.startswith(("---", "+++")):
                    continue
                if line.startswith("@@"):
                    line = _shift(line, a_start - 1, b_start - 1)
                hunks.append(line)
        if not hunks:
            continue
        base_has = not (a.added or b.added)
        in_a = a.added or (base_has and not a.removed)
        in_b = b.added or (base_has and not b.removed)
        out.append(f"--- {'a/' + path if in_a else '/dev/null'}")
        out.append(f"+++ {'b/' + path if in_b else '/dev/null'}")
        out.extend(hunks)
    return "\n".join(out) + "\n" if out else ""
