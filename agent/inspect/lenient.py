"""Readers shared by the inspector's loaders: lenient field conversions and reading JSON.

A foreign or older file may hold any JSON where a field is expected: these return a value of
the expected type or None (an empty dict or list), never raise. Only :func:`read_json` raises,
:class:`InspectError`, for a file that cannot be read or is not JSON.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from agent.errors import InspectError
from agent.inspect.model import UsageView
from agent.record.foreign import TRAJECTORY_KEYS
from agent.record.steps import ModelStats
from agent.record.steps import Usage as StepUsage

#: What the three kinds of PATH look like, for error messages.
KINDS = "a .traj file, a run folder (<id>/<id>.traj) or a batch folder (preds.json, <id>/<id>.traj)"
#: A trajectory has at least one of these keys (:data:`agent.record.foreign.TRAJECTORY_KEYS`).
TRAJ_KEYS = TRAJECTORY_KEYS


def as_text(value: Any) -> str:
    """A message content or a field as text: strings as they are, lists of parts joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in value]
        return "\n".join(str(p) for p in parts)
    return json.dumps(value, ensure_ascii=False, default=str)


def as_float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def as_int(value: Any) -> int | None:
    number = as_float(value)
    return None if number is None else int(number)


def as_dict(value: Any) -> dict[str, Any]:
    """A dict, or a JSON object held in a string (SWE-agent writes ``replay_config`` so)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            try:  # older SWE-agent states: a Python dict's repr
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def usage_of(stats: ModelStats | StepUsage | None) -> UsageView | None:
    """A record's model stats (``info.model_stats``) or a step's usage as shown: each number
    the file holds, None for each it does not; None when it holds none."""
    if stats is None:
        return None
    given = stats.model_fields_set

    def held(name: str) -> Any:
        return getattr(stats, name) if name in given else None

    cost = held("instance_cost") if isinstance(stats, ModelStats) else held("cost")
    usage = UsageView(
        tokens_sent=held("tokens_sent"),
        tokens_received=held("tokens_received"),
        cost=None if cost is None else float(cost),
        api_calls=held("api_calls") if isinstance(stats, ModelStats) else None,
    )
    return None if usage == UsageView() else usage


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InspectError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InspectError(f"{path} is not a text file: pass {KINDS}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InspectError(f"{path} is not JSON ({e}): pass {KINDS}") from None


def is_demo(message: dict[str, Any]) -> bool:
    """A demonstration in SWE-agent's history (not part of the run)."""
    return message.get("is_demo") in (True, "True", "true")
