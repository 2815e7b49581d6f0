"""The run record's JSON schema, as published in ``docs/trajectory-format.schema.json``.

``python -m agent.record.schema`` writes it (``--check``: exit 1 when the file is stale).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.record.trajectory import TRAJECTORY_FORMAT, RunRecord

PUBLISHED = Path(__file__).parents[2] / "docs" / "trajectory-format.schema.json"


def schema_text() -> str:
    """The schema of :class:`~agent.record.trajectory.RunRecord` (what a reader may rely on)."""
    schema = RunRecord.model_json_schema()
    schema["$id"] = f"pgs-trajectory-{TRAJECTORY_FORMAT}"
    return json.dumps(schema, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = schema_text()
    if "--check" in argv:
        current = PUBLISHED.read_text(encoding="utf-8") if PUBLISHED.exists() else ""
        return 0 if current == text else 1
    PUBLISHED.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
