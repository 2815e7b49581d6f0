"""The original code's results and the time budget (agent/pgs/baseline.py): batches, the
sentence naming what a budget left out, and the same files left out on both sides."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agent.pgs.baseline import CUT_NOTE, Baseline, cut_targets, describe_cut, next_batch
from agent.pgs.check import check_candidate
from agent.pgs.related import (
    changed_files,
    related_tests,
)
from agent.record.check import CheckReport, TestResult
from envs.docker_sandbox import DockerSandbox
from tests.support.checking import (
    SETTINGS,
    apply_patch,
    commit_files,
    result_of,
)
from tests.support.example_repos import DEDUPE

_SIZES = st.lists(st.integers(min_value=1, max_value=10**6), min_size=1, max_size=30)


@given(
    sizes=_SIZES,
    rate=st.none() | st.floats(min_value=1e-7, max_value=1.0),
    left=st.floats(min_value=0.001, max_value=1e4) | st.just(float("inf")),
)
def test_baseline_batches_run_the_files_in_order_each_within_half_the_time_left(
    sizes: list[int], rate: float | None, left: float
) -> None:
    queue = [f"t{i}.py" for i in range(len(sizes))]
    by_file = dict(zip(queue, sizes, strict=True))
    batch = next_batch(queue, by_file, rate, left)
    assert batch and batch == queue[: len(batch)]  # in order, never empty
    if left == float("inf"):
        assert batch == queue  # no budget: one run, as without budgets
    elif rate is None:
        assert batch == queue[:1]  # nothing known yet: the most related file alone
    elif len(batch) > 1:
        assert sum(rate * by_file[t] for t in batch) <= left / 2
    if left != float("inf"):
        assert len(next_batch(queue, by_file, rate, left, most=2)) <= 2


def test_a_cut_is_one_sentence_naming_every_file_left_out_and_why() -> None:
    cut = {
        "tests/test_b.py": "did not finish within 40 s",
        "tests/test_c.py": "not started, the budget was used",
        "tests/test_d.py": "not started, the budget was used",
    }
    assert describe_cut(cut, 9, 120) == (
        "budget 120 s: 3 of 9 related test files not run: did not finish within 40 s: "
        "tests/test_b.py; not started, the budget was used: tests/test_c.py, tests/test_d.py"
    )
    assert describe_cut({}, 9, 120) is None
    marker = TestResult(
        nodeid="tests/test_b.py",
        outcome="skipped",
        category="pass",
        note=CUT_NOTE + "did not finish within 40 s",
    )
    baseline = CheckReport(results=[result_of("tests/test_a.py::t", "pass"), marker])
    assert cut_targets(baseline) == {"tests/test_b.py": "did not finish within 40 s"}
    assert cut_targets(None) == {}


#: A test file whose first test outlasts the 6 s budget below, however fast the machine: it
#: sleeps 8 s, under per-test time limits (20 s, 60 s) that do not stop it first.
_SLOW = (
    "import time\n\nfrom listutils.core import dedupe\n\n\n"
    "def test_slow():\n    time.sleep(8)\n    assert dedupe([]) == []\n\n\n"
    "def test_broken_before_any_patch():\n    assert dedupe([1]) == []\n"
)


def test_a_budget_leaves_out_the_least_related_files_the_same_on_both_sides(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    commit = commit_files(dedupe, {"tests/test_slow_a.py": _SLOW, "tests/test_slow_b.py": _SLOW})
    apply_patch(dedupe, DEDUPE.wrong_patch)
    tests = related_tests(dedupe, changed_files(DEDUPE.wrong_patch))
    assert tests[0] == DEDUPE.related_test and len(tests) == 3  # its own test file first
    cache = Baseline(tmp_path / "baseline.json")
    # The own test file ran before (no budget): its time counts against the budget below, and
    # only the two slow files are left to run. Under a 6 s budget neither can finish, however
    # fast or loaded the machine (the first is stopped at the budget's end, the second never
    # starts, or is stopped too), and the own file is kept whatever its run took.
    own = cache.ensure(dedupe, commit, tests[:1], settings=SETTINGS)
    assert own.cut is None and own.results
    tight = SETTINGS.model_copy(update={"budget": 6, "test_timeout": 60})
    baseline = cache.ensure(dedupe, commit, tests, settings=tight)
    assert set(cut_targets(baseline)) == {"tests/test_slow_a.py", "tests/test_slow_b.py"}
    assert baseline.cut and baseline.cut.startswith("budget 6 s: 2 of 3 related test files")
    report = check_candidate(
        dedupe, properties=[], repo_tests=tests, baseline=baseline, settings=tight
    )
    assert report.cut == baseline.cut  # said in the candidate's report, never silent
    assert {r.nodeid.split("::")[0] for r in report.results} == {DEDUPE.related_test}
    (regression,) = report.failures()  # the cut broken file is no fake regression
    assert regression.nodeid == "tests/test_core.py::test_dedupe_example"
    # The same budget keeps the cut (no run per candidate); a larger one, or none, runs it.
    again = Baseline(tmp_path / "baseline.json")
    assert again.get(commit, tests, settings=tight) == baseline
    assert again.get(commit, tests, settings=SETTINGS.model_copy(update={"budget": 0})) is None
    full = again.ensure(dedupe, commit, tests, settings=SETTINGS.model_copy(update={"budget": 0}))
    assert full.cut is None and not cut_targets(full) and len(full.results) == 6
    report = check_candidate(
        dedupe, properties=[], repo_tests=tests, baseline=full, settings=SETTINGS
    )
    assert report.cut is None
    assert [r.nodeid for r in report.failures()] == ["tests/test_core.py::test_dedupe_example"]
