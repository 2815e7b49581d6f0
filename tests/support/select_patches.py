"""Patches for the tests of ``pgs select``'s parts that need no container: a one-line change as git
writes it, and two candidate fixes of the same file."""

from __future__ import annotations


def diff(path: str, old: str = "a = 1", new: str = "a = 2") -> str:
    """A one-line change of ``path`` as git writes it."""
    return (
        f"diff --git a/{path} b/{path}\n"
        "index 1111111..2222222 100644\n"
        f"--- a/{path}\n"
        f"+++ b/{path}\n"
        "@@ -1 +1 @@\n"
        f"-{old}\n"
        f"+{new}\n"
    )


FIX = diff("textkit/core.py")
OTHER = diff("textkit/core.py", new="a = 3")
