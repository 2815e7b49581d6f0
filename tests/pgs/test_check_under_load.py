"""A check's feedback does not depend on how loaded the machine is: a property whose test stalls
once (as a process descheduled on a busy machine does) gets the same report as without the
stall, with the default settings. Hypothesis's per-example deadline used to turn such a stall
into a ``timeout`` on another input (tests/cli/test_ladder.py saw two rows shrink to different
inputs under load); the per-test time limit (``test_timeout``) still stops a test that hangs."""

from __future__ import annotations

import sys
from pathlib import Path

from agent.pgs.runner import CheckSettings, run_pytest
from agent.record.check import CheckReport
from envs.local import LocalSandbox

#: The ladder's issue property over a median that takes the middle of the UNSORTED list; the
#: first input that passes stalls {stall} seconds (longer than the old 1 s deadline allowed).
PROPERTY = """\
import time

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

STALL = {stall}
stalled = []


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (values[middle - 1] + values[middle]) / 2


@pytest.mark.pgs_issue("for an even count the median is the mean of the two middle sorted values")
@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=10))
@example([1, 2, 3, 4])
def test_median_of_even_count(values):
    assume(len(values) % 2 == 0)
    ordered = sorted(values)
    middle = len(ordered) // 2
    assert median(values) == (ordered[middle - 1] + ordered[middle]) / 2
    if STALL and not stalled:
        stalled.append(values)
        time.sleep(STALL)
"""


def check(repo: Path, stall: float) -> CheckReport:
    settings = CheckSettings(python=sys.executable, max_examples=50)
    with LocalSandbox(repo) as sandbox:
        sandbox.write_file("test_median.py", PROPERTY.replace("{stall}", repr(stall)))
        return run_pytest(sandbox, ["test_median.py"], settings=settings, timeout=120)


def test_a_stalled_example_changes_nothing_in_the_report(small_repo: Path) -> None:
    calm = check(small_repo, 0).results
    loaded = check(small_repo, 1.5).results
    assert [(r.outcome, r.category, r.example) for r in loaded] == [
        (r.outcome, r.category, r.example) for r in calm
    ]
    (result,) = calm
    assert (result.category, result.example) == (
        "property_violation",
        "test_median_of_even_count(values=[0, 0, 1, 0])",
    )
