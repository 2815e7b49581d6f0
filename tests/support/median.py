"""The bundled median example's (agent/examples/median) property files, as the scripted Testers
of the ladder's, the attempts' and the config's tests write them: written out once here.

The median's bug: for an even count it returns one middle value, not the mean of the two."""

from __future__ import annotations

#: The issue property alone (even counts), with its imports and strategy.
EVEN = """\
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from stats import median

values_lists = st.lists(st.integers(-1000, 1000), min_size=1, max_size=10)


@pytest.mark.pgs_issue("for an even count the median is the mean of the two middle sorted values")
@given(values_lists)
@example([1, 2, 3, 4])
def test_median_of_even_count(values):
    assume(len(values) % 2 == 0)
    ordered = sorted(values)
    middle = len(ordered) // 2
    assert median(values) == (ordered[middle - 1] + ordered[middle]) / 2
"""

#: The issue property and a regression property (odd counts): ``test_median.py``.
MEDIAN = (
    EVEN
    + """

@pytest.mark.pgs_regression("for an odd count the median is the middle sorted value")
@given(values_lists)
def test_median_of_odd_count(values):
    assume(len(values) % 2 == 1)
    assert median(values) == sorted(values)[len(values) // 2]
"""
)

#: A regression property a fresh probe adds: ``test_median_bounds.py``.
BOUNDS = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stats import median


@pytest.mark.pgs_regression("the median lies between the smallest and the largest value")
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=10))
def test_median_within_bounds(values):
    assert min(values) <= median(values) <= max(values)
"""
