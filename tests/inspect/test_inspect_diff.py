"""The diffs of ``pgs inspect`` (agent/inspect/diff.py), by property: the change between two
candidates turns one into the other, and a parsed diff counts and numbers its lines."""

from __future__ import annotations

import difflib
import re

from hypothesis import given
from hypothesis import strategies as st

from agent.inspect.diff import interdiff, parse_diff

LINES = st.lists(st.sampled_from(["a", "b", "c", "d", ""]), max_size=25)


def unified(old: list[str], new: list[str]) -> str:
    lines = difflib.unified_diff(old, new, "a/f.py", "b/f.py", n=3, lineterm="")
    text = "\n".join(lines)
    return text + "\n" if text else ""


def apply(lines: list[str], patch: str) -> list[str]:
    """A patch applied by the line numbers it states (what git apply does without fuzz)."""
    diff = parse_diff(patch)
    out = list(lines)
    for file in diff.files:
        for hunk in reversed(file.hunks):
            start = int(re.match(r"@@ -(\d+),(\d+)", hunk.header).group(1))  # type: ignore[union-attr]
            source = [line.text for line in hunk.lines if line.kind in ("context", "removed")]
            target = [line.text for line in hunk.lines if line.kind in ("context", "added")]
            at = start - 1 if source else start
            assert out[at : at + len(source)] == source
            out[at : at + len(source)] = target
    return out


@given(base=LINES, first=LINES, second=LINES)
def test_the_change_between_two_candidates_turns_one_into_the_other(
    base: list[str], first: list[str], second: list[str]
) -> None:
    change = interdiff(unified(base, first), unified(base, second))
    assert apply(first, change) == second
    if first == second:
        assert change == ""


@given(old=LINES, new=LINES)
def test_a_parsed_diff_counts_and_numbers_its_lines(old: list[str], new: list[str]) -> None:
    diff = parse_diff(unified(old, new))
    assert diff.error is None
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    if old == new:
        assert diff.empty and diff.files == []
        return
    added = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag in ("insert", "replace"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag in ("delete", "replace"))
    assert (diff.added, diff.removed) == (added, removed)
    for line in (x for f in diff.files for h in f.hunks for x in h.lines):
        if line.old is not None:
            assert old[line.old - 1] == line.text
        if line.new is not None:
            assert new[line.new - 1] == line.text
