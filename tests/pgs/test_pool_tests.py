"""``PGS_POOL_TESTS``: a failing plain (non-Hypothesis) test pools one input, itself, with the
three measures of Table 1, so that repository tests can stand in for properties
(``bench/strategies.py --verified``). Off by default: a plain test's result has no pool."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.pgs.feedback import select_failure
from agent.pgs.pool import STRATEGIES, candidates, choose, count_pool
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.tokens import SimpleCounter
from agent.record.check import CheckReport
from envs.local import LocalSandbox, LocalSandboxConfig
from tests.support.repos import make_repo

SETTINGS = CheckSettings(python=sys.executable, test_timeout=20, pool_tests=True)

CODE = """\
def clamp(x):
    if x > 7:
        y = x - 7
        return 7 + y
    return x
"""

#: Two failing tests that run different lines (9 takes the branch), one passing test.
TESTS = """\
import time

from calc import clamp


def test_small():
    assert clamp(5) <= 4, f"returned {clamp(5)!r}"


def test_large_and_slow():
    time.sleep(0.05)
    assert clamp(9) <= 4, f"returned {clamp(9)!r}"


def test_passes():
    assert clamp(1) == 1
"""


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Any]:
    repo = make_repo(tmp_path / "repo", {"calc.py": CODE, "tests/test_calc.py": TESTS})
    with LocalSandbox(repo, LocalSandboxConfig()) as sandbox:
        yield sandbox


def _check(sandbox: Any, settings: CheckSettings) -> CheckReport:
    report = run_pytest(sandbox, ["tests/test_calc.py"], settings=settings, timeout=300)
    count_pool(report, SimpleCounter())
    return report


def test_a_failing_plain_test_pools_itself_with_its_tokens_runtime_and_lines(local: Any) -> None:
    report = _check(local, SETTINGS)
    results = report.by_id()
    small = results["tests/test_calc.py::test_small"]
    large = results["tests/test_calc.py::test_large_and_slow"]
    assert not results["tests/test_calc.py::test_passes"].pool
    for result in (small, large):
        (pooled,) = result.pool
        assert pooled.source == "test" and pooled.example == result.nodeid
        # Classified as the test's own result: an assert in a repository test is a wrong answer.
        assert pooled.category == result.category == "wrong_answer"
        assert pooled.returned and pooled.returned.startswith("returned ")
        assert pooled.tokens == SimpleCounter().count(result.nodeid)
        assert result.pool_lines_by in ("coverage.py", "settrace") and result.pool_note is None
    # The same line counter as a Hypothesis input: the repository's lines, not the test's.
    assert small.pool[0].lines == 2 and large.pool[0].lines == 3
    assert small.pool[0].runtime is not None and large.pool[0].runtime is not None
    assert large.pool[0].runtime >= 0.05 > small.pool[0].runtime
    # Both tests are one pool, and each of Table 1's strategies chooses from it.
    pool = candidates(report)
    assert len(pool) == 2
    by = {(f, s): choose(pool, f, s) for f, s in STRATEGIES}
    assert by["lines", "max"] == by["runtime", "max"] == (large, large.pool[0])
    assert by["lines", "min"] == by["runtime", "min"] == (small, small.pool[0])
    chosen = select_failure(report, "property-min", SimpleCounter())
    assert chosen is not None and chosen.result is small  # the shorter node id


def test_off_by_default_a_plain_test_pools_nothing(local: Any) -> None:
    report = _check(local, SETTINGS.model_copy(update={"pool_tests": False}))
    failing = report.failures()
    assert len(failing) == 2 and not any(r.pool for r in failing)
    assert candidates(report) == []


UNITTEST = """\
import unittest

from calc import clamp


class TestClamp(unittest.TestCase):
    def test_large(self):
        self.assertLessEqual(clamp(9), 4)
"""


def test_a_failing_unittest_case_pools_itself_without_lines(local: Any) -> None:
    # A unittest case raises nothing in pytest's call: its failure is pooled when reported.
    local.write_file("tests/test_unit.py", UNITTEST)
    report = run_pytest(local, ["tests/test_unit.py"], settings=SETTINGS, timeout=300)
    (result,) = report.results
    (pooled,) = result.pool
    assert pooled.source == "test" and pooled.example == result.nodeid
    assert pooled.runtime is not None and pooled.lines is None
    assert result.pool_note and "unittest" in result.pool_note
    assert len(candidates(report)) == 1
