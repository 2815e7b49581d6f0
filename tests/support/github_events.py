"""The event payloads GitHub documents, as tests/github/data holds them (an ``issues`` ``labeled``
event and an ``issue_comment`` ``created`` one, trimmed), and copies of them with a change."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parents[1] / "github" / "data"
LABELED = json.loads((DATA / "issues-labeled.json").read_text())
COMMENTED = json.loads((DATA / "issue_comment-created.json").read_text())


def edited(payload: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``payload`` with ``changes`` at paths joined by ``__``
    (``comment__author_association="NONE"``)."""
    out = copy.deepcopy(payload)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = out
        for key in parents:
            node = node[key]
        node[last] = value
    return out
