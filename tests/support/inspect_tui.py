"""A foreign run for the tests of ``pgs inspect --tui`` (tests/inspect/test_inspect_tui*.py): a
hand-written ``.traj`` in SWE-agent's layout with keys missing (no ``replay_config``, no
``model_stats``, no PGS record, steps without ``observation`` or ``execution_time``)."""

from __future__ import annotations

from typing import Any

FOREIGN_ID = "acme__widgets-7"
FOREIGN_ISSUE = "Widget.size() is negative for an empty widget"


def swe_agent_traj() -> dict[str, Any]:
    """SWE-agent's layout, as an older writer left it: no replay_config, no model_stats, no
    PGS record; the second step has no execution_time, the last no observation either."""
    issue = f"{FOREIGN_ISSUE}.\n\n`Widget().size()` returns -1; an empty widget has size 0."
    return {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": "find_file size.py",
                "observation": 'Found 1 matches for "size.py":\n/acme/widgets/size.py',
                "response": "Find the file first.\n\n```\nfind_file size.py\n```",
                "thought": "Find the file first.",
                "execution_time": 0.2,
                "state": '{"open_file": "n/a", "working_dir": "/acme"}',
            },
            {
                "action": "edit 3:3\n    return max(len(self.parts) - 1, 0)\nend_of_edit",
                "observation": "File updated. Edit the file again if changes are needed.",
                "response": "Clamp at zero.",
                "thought": "Clamp at zero.",
            },
            {"action": "submit", "response": "Done.", "thought": "Done."},
        ],
        "history": [
            {"role": "system", "content": "SETTING: You are an autonomous programmer."},
            {
                "role": "user",
                "content": f"<pr_description>\n{issue}\n</pr_description>\nFix it.",
            },
            {"role": "assistant", "content": "Find the file first.", "action": "find_file"},
        ],
        "info": {
            "swe_agent_version": "0.7.0",
            "exit_status": "submitted",
            "submission": "diff --git a/widgets/size.py b/widgets/size.py\n"
            "--- a/widgets/size.py\n+++ b/widgets/size.py\n@@ -3 +3 @@\n"
            "-    return len(self.parts) - 1\n+    return max(len(self.parts) - 1, 0)\n",
        },
    }
