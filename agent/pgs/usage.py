"""What a run used, from its record: the tokens and the cost of the Generator (the ``.traj``'s
``info.model_stats``) and of every Tester turn (``pgs.tester``, ``pgs.tester_2``, ...: each
conversation's ``info.model_stats``). A run being written and one read back from its file count
alike: :func:`agent.run.outputs.usage` for a run's result, ``pgs report`` and ``--attempts`` for
a ``.traj`` on disk."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.pgs.records import PGSRecord

#: The keys of :func:`recorded_usage`, in this order.
KEYS = ("tokens_sent", "tokens_received", "instance_cost", "tester_cost")


def recorded_usage(trajectory: Mapping[str, Any]) -> dict[str, float]:
    """Tokens and cost of the whole run whose ``.traj`` content is ``trajectory``: the
    Generator's ``model_stats`` plus every Tester turn's; ``tester_cost``: the Tester's alone."""
    out = dict.fromkeys(KEYS, 0.0)
    pgs = PGSRecord.model_validate(trajectory.get("pgs") or {})
    testers = [c.info.get("model_stats") for c in pgs.conversations().values()]
    info = trajectory.get("info") or {}
    runs = [(info.get("model_stats"), False), *((t, True) for t in testers)]
    for stats, is_tester in runs:
        for key in ("tokens_sent", "tokens_received", "instance_cost"):
            out[key] += float((stats or {}).get(key, 0) or 0)
        if is_tester:
            out["tester_cost"] += float((stats or {}).get("instance_cost", 0) or 0)
    return out
