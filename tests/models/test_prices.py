"""Where a model's price comes from (`model.prices`, pgs's table, litellm's cost map read as a
file, offline, without importing litellm), and when a missing one refuses the model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import UnknownPrice
from agent.models import ModelConfig, Pricing, require_price
from agent.models.prices import cost_map_path
from tests.support.textutil import pgs_env

NAMES = st.text(st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=1, max_size=30)
PRICE = st.tuples(*[st.floats(0, 1000, allow_nan=False)] * 2)
LIMIT = st.sampled_from([0.0, 0.5, 3.0])


@pytest.mark.parametrize(
    ("name", "prices", "source"),
    [
        ("gpt-4o", {}, "table"),  # pgs's table wins over litellm's map
        ("gpt-4o", {"gpt-4o": (9.0, 9.0)}, "config"),  # and model.prices over both
        ("deepseek/deepseek-chat", {}, "litellm"),
        ("anthropic/claude-sonnet-4-5-20250929", {}, "litellm"),  # the prefix confirmed
        ("mistral/claude-sonnet-4-5-20250929", {}, None),  # not anthropic's entry
        ("my-local-model", {}, None),
    ],
)
def test_where_a_price_comes_from(name: str, prices: dict[str, Any], source: str | None) -> None:
    pricing = ModelConfig(name=name, prices=prices).pricing()
    assert (pricing and pricing.source) == source


def test_the_cost_map_is_read_offline_without_importing_litellm(tmp_path: Path) -> None:
    code = (
        "import sys; from agent.models import ModelConfig; "
        "p = ModelConfig(name='anthropic/claude-sonnet-4-5-20250929').pricing(); "
        "print(*p.per_million, p.source, 'litellm' in sys.modules)"
    )
    done = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", code],  # no network at all
        cwd=tmp_path,
        env=pgs_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode and "unshare" in done.stderr:  # no user namespaces here: with network
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=pgs_env(), capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = cost_map_path()
    assert path is not None, "litellm is not installed: pip install 'pgs-agent[litellm]'"
    entry = json.loads(path.read_text())["claude-sonnet-4-5-20250929"]  # anthropic's own
    price = (entry["input_cost_per_token"] * 1e6, entry["output_cost_per_token"] * 1e6)
    sent, received, source, imported = done.stdout.split()
    assert (float(sent), float(received)) == pytest.approx(price)
    assert (source, imported) == ("litellm", "False")


@given(name=NAMES, price=PRICE, per_instance=LIMIT, total=LIMIT)
def test_a_price_in_the_config_wins_and_is_never_refused(
    name: str, price: tuple[float, float], per_instance: float, total: float
) -> None:
    limits = {"per_instance_cost_limit": per_instance, "total_cost_limit": total}
    config = ModelConfig(name=name, prices={name: price}, **limits)
    assert require_price(config) == Pricing(price, "config")


@given(per_instance=LIMIT, total=LIMIT)
def test_no_price_is_refused_exactly_while_a_cost_limit_is_on(
    per_instance: float, total: float
) -> None:
    config = ModelConfig(
        name="my-local-model", per_instance_cost_limit=per_instance, total_cost_limit=total
    )
    if per_instance or total:
        with pytest.raises(UnknownPrice) as caught:
            require_price(config)
        message = str(caught.value)
        assert "\n" not in message
        for flag, on in (("per-instance", per_instance), ("total", total)):
            assert (f"--model.{flag}-cost-limit 0" in message) == bool(on)
    else:
        assert require_price(config) is None
