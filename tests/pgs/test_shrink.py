"""Shrinking follows the ablation: the rows of the PGS paper's Table 7 before structural
minimisation (``--feedback property``, ``io``) feed back the first failing input Hypothesis
generates, unshrunk; ``property-min`` the shrunk one. Real pytest and Hypothesis on the host's
Python through a local sandbox; the ladder test (tests/cli/test_ladder.py) shows the same
through whole runs in Docker."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.pgs.config import PGSConfig, ablation, shrinks
from agent.pgs.feedback import select_failure
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.tokens import SimpleCounter
from agent.record.check import CheckReport
from envs.local import LocalSandbox

PATH = ".pgs/properties/test_median.py"
#: A median that takes the middle values of the unsorted list for an even count.
PROPERTY = """\
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (values[middle - 1] + values[middle]) / 2


@pytest.mark.pgs_issue("the mean of the two middle values of the sorted list")
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=10))
def test_median_of_even_count(values):
    assume(len(values) % 2 == 0)
    ordered = sorted(values)
    middle = len(ordered) // 2
    assert median(values) == (ordered[middle - 1] + ordered[middle]) / 2
"""


@pytest.fixture
def local(small_repo: Path) -> Iterator[Any]:
    with LocalSandbox(small_repo) as sandbox:
        sandbox.write_file(PATH, PROPERTY)
        yield sandbox


def _check(sandbox: Any, config: PGSConfig) -> CheckReport:
    settings = CheckSettings(python=sys.executable, test_timeout=10, shrink=shrinks(config))
    return run_pytest(sandbox, [PATH], settings=settings, timeout=120)


def _values(text: str) -> list[int]:
    name, _, value = text.partition("=")
    assert name == "values", text
    parsed: list[int] = ast.literal_eval(value)
    return parsed


def test_without_minimisation_the_feedback_is_the_first_failing_input_unshrunk(
    local: Any,
) -> None:
    unshrunk = PGSConfig(feedback="property")
    minimal = PGSConfig(feedback="property-min")
    assert (ablation(unshrunk).shrink, ablation(minimal).shrink) == (False, True)

    fed: dict[str, str] = {}
    for config in (unshrunk, minimal):
        chosen = select_failure(_check(local, config), config.feedback, SimpleCounter())
        assert chosen is not None and chosen.category == "property_violation"
        fed[config.feedback] = str(chosen.input)
    first, shrunk = _values(fed["property"]), _values(fed["property-min"])
    # Hypothesis's shrunk counterexample: four small values (one of them out of order).
    assert len(shrunk) == 4 and set(shrunk) <= {0, 1}
    # The first failing input generated: not shrunk, so not the small one.
    assert first != shrunk and max(abs(v) for v in first) > 1
    # Derandomised: the same unshrunk input on a second run.
    again = select_failure(_check(local, unshrunk), "property", SimpleCounter())
    assert again is not None and again.input == fed["property"]


def test_a_set_shrink_wins_over_the_mode() -> None:
    config = PGSConfig(feedback="property", check=CheckSettings(shrink=True))
    assert shrinks(config) and ablation(config).shrink is True
    assert ablation(PGSConfig(feedback="none")).shrink is None
