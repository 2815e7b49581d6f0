"""The shipped prompts: ``agent/config/default.yaml``, read once.

The pydantic configs take their template defaults from here, so a config built in Python and
one loaded from ``--config`` files start from the same text; a file overrides any key.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "default.yaml"


@functools.cache
def _defaults() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    return data


def default_prompt(*keys: str) -> str:
    """The template at ``keys`` in default.yaml (``default_prompt("agent", "system_template")``)."""
    node: Any = _defaults()
    for key in keys:
        node = node[key]
    if not isinstance(node, str):
        raise TypeError(f"{'.'.join(keys)} in {DEFAULT_CONFIG} is not a template")
    return node


#: ``json_schema_extra`` of a config field that has no command-line flag: a text set only in a
#: ``--config`` file (``agent.format_errors``, ``pgs.tester.retry_template``, ...).
CONFIG_ONLY: dict[str, Any] = {"config_only": True}


def config_only(extra: object) -> bool:
    """Whether a field whose ``json_schema_extra`` is ``extra`` has no flag."""
    return isinstance(extra, dict) and bool(extra.get("config_only"))
