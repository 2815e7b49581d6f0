"""Model prices from litellm's bundled cost map, read offline.

litellm ships its cost map (`model_prices_and_context_window_backup.json`, thousands of models
of every provider) inside its package. It is read here as a file, without importing litellm
(its import takes seconds and may fetch the map from the network) and never fetched: the
prices are the ones of the installed litellm. Without litellm installed, nothing is found.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

__all__ = ["LITELLM_MISSING", "cost_map_path", "litellm_installed", "litellm_price"]

logger = logging.getLogger(__name__)

#: What to run to get the optional extra, said wherever it is missing.
LITELLM_MISSING = "pip install 'pgs-agent[litellm]'"

_COST_MAP = "model_prices_and_context_window_backup.json"


@functools.cache
def cost_map_path() -> Path | None:
    """The cost map file of the installed litellm, or None (litellm not installed)."""
    try:
        spec = importlib.util.find_spec("litellm")  # finds it, does not import it
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / _COST_MAP
    return path if path.is_file() else None


def litellm_installed() -> bool:
    return importlib.util.find_spec("litellm") is not None


@functools.cache
def _cost_map() -> dict[str, Any]:
    path = cost_map_path()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # a broken install: priced as if absent
        logger.warning("cannot read litellm's cost map %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def litellm_price(name: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for `name` in litellm's cost map, or None.

    Looked up as named (`deepseek/deepseek-chat`, `claude-sonnet-4-5-20250929`), then without
    a provider prefix that the entry's own provider confirms (`anthropic/claude-...` as
    `claude-...` of provider anthropic; `openai/gpt-4o` as `gpt-4o`)."""
    table = _cost_map()
    candidates: list[tuple[str, str | None]] = [(name, None)]
    prefix, slash, rest = name.partition("/")
    if slash and rest:
        candidates.append((rest, prefix))
    for key, provider in candidates:
        entry = table.get(key)
        if not isinstance(entry, dict) or entry.get("mode", "chat") not in ("chat", "responses"):
            continue
        if provider is not None and not str(entry.get("litellm_provider", "")).startswith(provider):
            continue
        price = _per_million(entry)
        if price is not None:
            return price
    return None


def _per_million(entry: dict[str, Any]) -> tuple[float, float] | None:
    sent, received = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (sent, received)):
        return None
    # The map's figures are per token; ours per 1M. Rounded to drop float noise (3e-06 * 1e6).
    return round(float(sent) * 1_000_000, 6), round(float(received) * 1_000_000, 6)  # type: ignore[arg-type]
