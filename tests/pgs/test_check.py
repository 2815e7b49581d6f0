"""Checking in a real sandbox: the pytest plugin's report, the soundness filter, related tests,
the baseline and the check of a candidate, on the planted-bug repositories of example_repos.

The repository images run Python 3.9 (``.pgs.yaml`` of each example), so the plugin is tested
on an older interpreter, pytest and Hypothesis than the host's.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.pgs import pgs_pytest_plugin_results as plugin_results
from agent.pgs.baseline import CUT_NOTE, Baseline, cut_targets, describe_cut, next_batch
from agent.pgs.check import against_baseline, check_candidate, regressions
from agent.pgs.related import (
    changed_files,
    import_statements,
    imported_modules,
    module_names,
    related_tests,
    statement_imports,
)
from agent.pgs.report import CheckReport, TestResult
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.validate import validate_properties
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from tests.repos import make_repo
from tests.support.example_repos import DEDUPE, RLE, ExampleRepo

SETTINGS = CheckSettings(test_timeout=3, run_timeout=120)
VALIDATED = [
    "issue_sound",
    "issue_generated",
    "regression_sound",
    "issue_unsound_passes",
    "regression_unsound_fails",
    "name_error",
    "import_error",
    "bad_strategy",
]

# -- no Docker needed ---------------------------------------------------------------------------


def test_parse_example_reads_old_and_new_hypothesis_formats() -> None:
    old = "Falsifying example: test_f(\n    xs=[0, 0],\n)\n"
    new = "E       Failing explicit example: test_f(\nE           xs=[1, 2, 1],\nE       )"
    one_line = "Falsifying example: test_g(s='a)b', n=3)"
    commented = "Failing test case: test_h(\n    n=0,  # or any other generated value\n)"
    assert plugin_results.parse_example(old) == ("test_f(xs=[0, 0])", False)
    assert plugin_results.parse_example(new) == ("test_f(xs=[1, 2, 1])", True)
    assert plugin_results.parse_example(one_line) == ("test_g(s='a)b', n=3)", False)
    assert plugin_results.parse_example(commented) == ("test_h(n=0)", False)
    assert plugin_results.parse_example("assert 1 == 2") == (None, False)


_ARGS = st.dictionaries(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.one_of(st.integers(), st.text(), st.lists(st.integers(), max_size=5)),
    min_size=1,
    max_size=4,
)


@given(args=_ARGS, prefixed=st.booleans())
def test_parse_example_gives_back_any_multi_line_call_on_one_line(
    args: dict[str, Any], prefixed: bool
) -> None:
    lines = ["Falsifying example: test_p(", *(f"    {k}={v!r}," for k, v in args.items()), ")"]
    if prefixed:
        lines = [f"E       {line}" for line in lines]
    example, explicit = plugin_results.parse_example("\n".join(["some output", *lines, "after"]))
    assert example == "test_p(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
    assert not explicit


def test_changed_files_lists_modified_new_and_removed_paths() -> None:
    patch = (
        DEDUPE.correct_patch
        + "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n"
        "@@ -0,0 +1 @@\n+x = 1\n"
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-y = 2\n"
    )
    assert changed_files(patch) == ["listutils/core.py", "new.py", "old.py"]


def test_module_names_and_imports_match_by_dotted_path_or_top_level_name() -> None:
    assert module_names("src/pkg/mod.py") == {"src.pkg.mod", "pkg.mod"}
    assert module_names("pkg/__init__.py") == {"pkg"}
    assert module_names("misc.py") == {"misc"}
    assert module_names("pkg/utils.py") == {"pkg.utils"}  # not a bare `import utils`
    source = "import os, pkg.mod as m\nfrom pkg import other\nfrom .helpers import h\n"
    found = imported_modules(source, "tests/unit/test_x.py")
    assert {"os", "pkg.mod", "pkg", "pkg.other", "tests.unit.helpers"} <= found
    assert "pkg.other" in imported_modules("from pkg import (\n  other)\n", "t.py")
    assert "pkg.mod" in imported_modules("from pkg.mod import f\nprint 'py2'\n", "test_a.py")


def test_only_import_statements_are_parsed_and_a_bad_one_spoils_only_itself() -> None:
    source = (
        '"""A long test file."""\n'
        "from pkg.core.numbers import (Float,\n    Rational)\n"
        "from pkg.matrices import \\\n    sparse\n"
        "import os, pkg.util as u\n"
        "def test_x():\n"
        "    from pkg.lazy import late\n"
        "    assert late(1) == 'import pkg.never'\n"
        "print 'python 2'\n"
    )
    statements = import_statements(source)
    assert "def test_x" not in statements and "print" not in statements
    found = statement_imports(statements, "pkg/tests/test_x.py")
    assert {"pkg.core.numbers", "pkg.matrices.sparse", "os", "pkg.util", "pkg.lazy"} <= found
    assert "pkg.never" not in found
    spoiled = statement_imports("from a import (b,\n c)\nimport 3x\n", "t.py")
    assert {"a.b", "a.c"} <= spoiled


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
    baseline = CheckReport(results=[_result("tests/test_a.py::t", "pass"), marker])
    assert cut_targets(baseline) == {"tests/test_b.py": "did not finish within 40 s"}
    assert cut_targets(None) == {}


_BIG_REPO = {
    "pkg/__init__.py": "",
    "pkg/core/__init__.py": "",
    "pkg/core/numbers.py": "ONE = 1\n",
    "pkg/core/other.py": "TWO = 2\n",
    "pkg/core/tests/test_numbers.py": "import pkg\n\ndef test_one():\n    assert pkg\n",
    "pkg/core/tests/test_big.py": "from pkg.core.numbers import ONE\n" + "# padding\n" * 50,
    "pkg/core/tests/test_small.py": "from pkg.core import (other,\n    numbers)\n",
    "pkg/poly/tests/test_numbers.py": "from pkg.core.other import TWO\n",
    "pkg/poly/tests/test_far.py": "from pkg.core.numbers import ONE\n",
    "tests/test_top.py": "import pkg.core.numbers as n\n",
    "tests/test_unrelated.py": "from pkg.core.other import TWO  # numbers\n",
    "pkg/core/tests/helper_numbers.py": "from pkg.core.numbers import ONE\n",
}


def test_related_tests_come_most_related_first(tmp_path: Path) -> None:
    from envs.local import LocalSandbox

    repo = make_repo(tmp_path / "big", _BIG_REPO)
    with LocalSandbox(repo) as sandbox:
        found = related_tests(sandbox, ["pkg/core/numbers.py", "pkg/core/tests/test_big.py"])
    assert found == [
        "pkg/core/tests/test_big.py",  # changed by the patch
        "pkg/core/tests/test_numbers.py",  # the module's own tests, by name and place
        "pkg/core/tests/test_small.py",  # imports it, same folders, smallest
        "pkg/poly/tests/test_far.py",  # imports it, shares only pkg/
        "tests/test_top.py",  # imports it, shares no folder
    ]


def _result(nodeid: str, category: str, kind: str = "repo") -> TestResult:
    outcome = "passed" if category == "pass" else "failed"
    return TestResult.model_validate(
        {"nodeid": nodeid, "kind": kind, "outcome": outcome, "category": category}
    )


def test_failures_the_original_had_are_not_counted_regressions_are() -> None:
    before = CheckReport(
        results=[
            _result("t.py::old_bug", "wrong_answer"),
            _result("t.py::fine", "pass"),
            _result("t.py::crashes", "pass"),
        ],
        errors=["broken_test.py: ImportError"],
    )
    now = CheckReport(
        results=[
            _result("t.py::old_bug", "wrong_answer"),
            _result("t.py::fine", "wrong_answer"),
            _result("t.py::crashes", "runtime_error"),
            _result("t.py::new_test", "runtime_error"),
            _result(".pgs/properties/test_p.py::test_p", "property_violation", "issue"),
        ],
        errors=["broken_test.py: ImportError", "other_test.py: SyntaxError"],
    )
    found = regressions(before, now)
    assert [(r.nodeid, r.category, r.note) for r in found] == [
        ("t.py::fine", "wrong_answer", "passed before the patch"),
        ("t.py::crashes", "wrong_answer", "passed before the patch"),
    ]
    counted = against_baseline(now, before)
    assert [r.nodeid for r in counted.failures()] == [
        "t.py::fine",
        "t.py::crashes",
        "t.py::new_test",
        ".pgs/properties/test_p.py::test_p",
    ]
    assert counted.errors == ["other_test.py: SyntaxError"]
    assert against_baseline(now, None) == now


def test_settings_reject_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        CheckSettings.model_validate({"max_example": 5})


_MORE_OUTCOMES = """\
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture
def broken():
    raise RuntimeError("no database")


def test_needs_fixture(broken):
    pass


def test_repo_style():
    assert sorted([2, 1]) == [2, 1]


@pytest.mark.pgs_regression("answers within the deadline")
@settings(max_examples=2)
@given(st.just(0))
def test_slow(n):
    time.sleep(0.3)


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


def test_setup_errors_deadlines_and_repository_assertions_on_the_hosts_python(
    small_repo: Path,
) -> None:
    from envs.local import LocalSandbox

    settings = CheckSettings(deadline_ms=100, python=sys.executable)
    with LocalSandbox(small_repo) as sandbox:
        sandbox.write_file("test_more.py", _MORE_OUTCOMES)
        report = run_pytest(sandbox, ["test_more.py"], settings=settings, timeout=60)
        left = sandbox.run("git status --porcelain --ignored --untracked-files=all").output
        assert left.strip() == "?? test_more.py"  # no .hypothesis/, no __pycache__/
    results = {r.nodeid.split("::")[1]: r for r in report.results}
    setup = results["test_needs_fixture"]
    assert (setup.outcome, setup.category) == ("error", "runtime_error")
    assert setup.exception == "RuntimeError: no database"
    repo = results["test_repo_style"]
    assert (repo.kind, repo.category, repo.example) == ("repo", "wrong_answer", None)
    assert repo.returned and repo.returned.startswith("assert [1, 2] == [2, 1]")
    slow = results["test_slow"]
    assert (slow.category, slow.example) == ("timeout", "test_slow(n=0)")
    assert slow.exception and slow.exception.startswith("DeadlineExceeded")
    assert (results["test_skipped"].outcome, results["test_skipped"].category) == (
        "skipped",
        "pass",
    )


# -- in a container -----------------------------------------------------------------------------


def _image(repo: ExampleRepo, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from envs.images import build_repo_image

    path = repo.make(tmp_path_factory.mktemp(repo.name) / repo.name)
    return path, build_repo_image(path).tag


@pytest.fixture(scope="session")
def dedupe_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _image(DEDUPE, tmp_path_factory)[1]


@pytest.fixture(scope="session")
def rle_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _image(RLE, tmp_path_factory)[1]


@pytest.fixture
def dedupe(dedupe_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(DockerSandboxConfig(image=dedupe_image)) as sandbox:
        yield sandbox


@pytest.fixture
def rle(rle_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(DockerSandboxConfig(image=rle_image)) as sandbox:
        yield sandbox


def _write(sandbox: DockerSandbox, repo: ExampleRepo, *roles: str) -> list[str]:
    paths = []
    for role in roles:
        sandbox.write_file(repo.property_path(role), repo.properties[role])
        paths.append(repo.property_path(role))
    return paths


def _apply(sandbox: DockerSandbox, patch: str) -> None:
    sandbox.write_file("/tmp/candidate.patch", patch)
    assert sandbox.run("git apply /tmp/candidate.patch").ok


def _by_role(report: CheckReport, repo: ExampleRepo) -> dict[str, TestResult]:
    """Results of files with one property, by role."""
    by_file = {r.nodeid.split("::")[0]: r for r in report.results}
    return {
        role: by_file[repo.property_path(role)]
        for role in repo.properties
        if repo.property_path(role) in by_file
    }


def test_plugin_reports_each_category_on_python_3_9(dedupe: DockerSandbox) -> None:
    assert "Python 3.9" in dedupe.run("python3 -V").output
    targets = _write(dedupe, DEDUPE, "issue_generated", "issue_sound", "categories")
    started = time.monotonic()
    report = run_pytest(dedupe, [*targets, "tests/test_core.py"], settings=SETTINGS, timeout=60)
    took = time.monotonic() - started
    results = report.by_id()
    shrunk = results[f"{targets[0]}::test_no_repeats_generated"]
    assert (shrunk.kind, shrunk.rule) == ("issue", "the result holds no element twice")
    assert (shrunk.category, shrunk.example, shrunk.explicit) == (
        "property_violation",
        "test_no_repeats_generated(xs=[0, 0])",
        False,
    )
    assert shrunk.returned is not None and shrunk.returned.startswith("assert 2 == 1")
    assert "where 2 = len([0, 0])" in shrunk.returned
    assert shrunk.output and "test_no_repeats_generated" in shrunk.output
    explicit = results[f"{targets[1]}::test_no_repeats"]
    assert (explicit.category, explicit.example, explicit.explicit) == (
        "wrong_answer",
        "test_no_repeats(xs=[1, 2, 1])",
        True,
    )
    crash = results[f"{targets[2]}::test_first_element"]
    assert (crash.category, crash.exception) == (
        "runtime_error",
        "IndexError: list index out of range",
    )
    assert crash.example == "test_first_element(xs=[])" and crash.returned is None
    assert crash.trace and len(crash.trace.splitlines()) <= 10
    assert "assert dedupe(xs)[0] == xs[0]" in crash.trace
    spin = results[f"{targets[2]}::test_spins"]
    assert (spin.outcome, spin.category, spin.example) == ("timeout", "timeout", "test_spins(n=0)")
    assert spin.duration < SETTINGS.test_timeout + 2 and took < 30
    assert results[f"{targets[2]}::test_single"].category == "pass"
    repo_test = results["tests/test_core.py::test_dedupe_example"]
    assert (repo_test.kind, repo_test.category, repo_test.rule) == ("repo", "pass", None)
    assert report.errors == [] and report.exit_code == 1
    assert dedupe.diff() == ""  # nothing left behind in the repository (.hypothesis, caches)


def test_two_runs_give_the_same_report(dedupe: DockerSandbox) -> None:
    targets = _write(dedupe, DEDUPE, *VALIDATED)

    def run() -> str:
        data = run_pytest(dedupe, targets, settings=SETTINGS, timeout=60).model_dump()
        data.pop("duration")
        for result in data["results"]:
            result.pop("duration")
        return json.dumps(data, indent=1)

    first = run()
    assert first == run()
    assert "xs=[0, 0]" in first


def test_validation_keeps_sound_properties_and_says_why_it_drops_the_rest(
    dedupe: DockerSandbox,
) -> None:
    targets = _write(dedupe, DEDUPE, *VALIDATED)
    report = run_pytest(dedupe, targets, settings=SETTINGS, timeout=60)
    kept, dropped = validate_properties(report, DEDUPE.issue)
    assert kept == [  # in the order of the targets
        f"{DEDUPE.property_path('issue_sound')}::test_no_repeats",
        f"{DEDUPE.property_path('issue_generated')}::test_no_repeats_generated",
        f"{DEDUPE.property_path('regression_sound')}::test_order_of_first_occurrence",
    ]
    reasons = {d.nodeid.split("::")[0]: d.reason for d in dropped}
    path = DEDUPE.property_path
    assert set(reasons) == {
        path(r)
        for r in (
            "issue_unsound_passes",
            "regression_unsound_fails",
            "name_error",
            "import_error",
            "bad_strategy",
        )
    }
    assert "does not capture the bug" in reasons[path("issue_unsound_passes")]
    assert reasons[path("regression_unsound_fails")].startswith("unsound: fails on the original")
    assert "xs=[0, 0]" in reasons[path("regression_unsound_fails")]
    assert "itself raised NameError" in reasons[path("name_error")]
    assert reasons[path("import_error")].startswith("the file does not import: ImportError")
    assert "unique_everseen" in reasons[path("import_error")]
    assert reasons[path("bad_strategy")].startswith("bad strategy (InvalidArgument)")


def test_validation_keeps_an_issue_property_failing_by_the_issues_exception(
    rle: DockerSandbox,
) -> None:
    targets = _write(rle, RLE, "issue_sound", "issue_generated", "regression_sound")
    targets += _write(rle, RLE, "issue_other_exception")
    report = run_pytest(rle, targets, settings=SETTINGS, timeout=60)
    roles = _by_role(report, RLE)
    generated = roles["issue_generated"]
    assert generated.category == "runtime_error"
    assert generated.exception == "IndexError: string index out of range"
    assert generated.example == "test_round_trip_generated(s='aaaaaaaaaa')"
    assert generated.trace and generated.trace.splitlines()[-2].startswith("rle/__init__.py:")
    kept, dropped = validate_properties(report, RLE.issue)
    assert {k.split("::")[0] for k in kept} == {
        RLE.property_path(r) for r in ("issue_sound", "issue_generated", "regression_sound")
    }
    assert [d.reason for d in dropped] == [
        "fails on the original code by ValueError, which the issue does not mention"
    ]


def test_related_tests_are_the_files_importing_the_changed_module(
    dedupe: DockerSandbox, rle: DockerSandbox
) -> None:
    _write(dedupe, DEDUPE, "issue_sound")  # imports the module too, but is not a repo test
    assert related_tests(dedupe, changed_files(DEDUPE.correct_patch)) == [DEDUPE.related_test]
    assert related_tests(rle, changed_files(RLE.wrong_patch)) == [RLE.related_test]
    assert related_tests(rle, ["misc.py", "README.md"]) == [RLE.unrelated_test]
    assert related_tests(rle, ["docs/conf.py"]) == []


def test_a_wrong_fix_breaking_a_passing_test_is_a_regression(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    properties = _write(dedupe, DEDUPE, "issue_sound", "regression_sound")
    _apply(dedupe, DEDUPE.wrong_patch)
    commit = dedupe.run("git rev-parse HEAD").output.strip()
    tests = related_tests(dedupe, changed_files(dedupe.diff()))
    cache = Baseline(tmp_path / "baseline.json")
    baseline = cache.ensure(dedupe, commit, tests, settings=SETTINGS)
    assert [r.category for r in baseline.results] == ["pass", "pass"]  # the original's results
    assert "sorted(set(xs))" in dedupe.read_file(DEDUPE.module).decode()  # candidate restored
    report = check_candidate(
        dedupe, properties=properties, repo_tests=tests, baseline=baseline, settings=SETTINGS
    )
    failures = {r.nodeid: r for r in report.failures()}
    assert set(failures) == {
        "tests/test_core.py::test_dedupe_example",
        f"{properties[1]}::test_order_of_first_occurrence",
    }
    regression = failures["tests/test_core.py::test_dedupe_example"]
    assert (regression.category, regression.note) == ("wrong_answer", "passed before the patch")
    violated = failures[f"{properties[1]}::test_order_of_first_occurrence"]
    assert violated.category == "property_violation"  # shrunk: two elements out of order
    assert re.fullmatch(
        r"test_order_of_first_occurrence\(xs=\[-?\d+, -?\d+\]\)", violated.example or ""
    )
    # Once per commit: a new cache on the same file answers without running anything.
    assert Baseline(tmp_path / "baseline.json").get(commit, tests) == baseline


def test_the_correct_fix_passes_everything(dedupe: DockerSandbox) -> None:
    properties = _write(dedupe, DEDUPE, "issue_sound", "issue_generated", "regression_sound")
    commit = dedupe.run("git rev-parse HEAD").output.strip()
    _apply(dedupe, DEDUPE.correct_patch)
    tests = related_tests(dedupe, changed_files(DEDUPE.correct_patch))
    baseline = Baseline().ensure(dedupe, commit, tests, settings=SETTINGS)
    report = check_candidate(
        dedupe, properties=properties, repo_tests=tests, baseline=baseline, settings=SETTINGS
    )
    assert report.failures() == [] and report.errors == []
    assert len(report.results) == 5


def test_a_wrong_fix_that_hangs_is_a_timeout_with_its_input(rle: DockerSandbox) -> None:
    properties = _write(rle, RLE, "issue_generated", "regression_sound")
    _apply(rle, RLE.wrong_patch)
    report = check_candidate(
        rle, properties=properties, repo_tests=[RLE.related_test], baseline=None, settings=SETTINGS
    )
    (failure,) = report.failures()
    assert (failure.kind, failure.category) == ("issue", "timeout")
    assert failure.example and failure.example.startswith("test_round_trip_generated(s=")


def test_a_user_test_command_replaces_the_related_tests(dedupe: DockerSandbox) -> None:
    _apply(dedupe, DEDUPE.wrong_patch)
    settings = SETTINGS.model_copy(update={"test_cmd": "python3 -m pytest -q tests/test_core.py"})
    report = check_candidate(
        dedupe, properties=[], repo_tests=["tests/test_text.py"], baseline=None, settings=settings
    )
    (result,) = report.results
    assert (result.nodeid, result.category) == (f"test_cmd: {settings.test_cmd}", "wrong_answer")
    assert result.output and "1 failed, 1 passed" in result.output


def test_a_run_over_its_time_limit_or_without_a_report_says_so(dedupe: DockerSandbox) -> None:
    targets = _write(dedupe, DEDUPE, "categories")
    slow = SETTINGS.model_copy(update={"test_timeout": 60})
    report = run_pytest(dedupe, targets, settings=slow, timeout=5)
    (result,) = report.results
    assert (result.outcome, result.category, result.nodeid) == ("timeout", "timeout", targets[0])
    assert "time limit of 5 s" in (result.exception or "")
    broken = SETTINGS.model_copy(update={"python": "/no/such/python"})
    report = run_pytest(dedupe, targets, settings=broken, timeout=30)
    assert report.results == [] and report.exit_code == 127
    assert report.errors[0].startswith("pytest wrote no report (exit code 127)")


_SLOW = (
    "import time\n\nfrom listutils.core import dedupe\n\n\n"
    "def test_slow():\n    time.sleep(3)\n    assert dedupe([]) == []\n\n\n"
    "def test_broken_before_any_patch():\n    assert dedupe([1]) == []\n"
)
_ISSUE_TEST = (
    "import pytest\n\nfrom listutils.core import dedupe\n\n\n"
    '@pytest.mark.parametrize("xs", [[1, 2, 1]])\n'
    "def test_no_repeat_at_the_end(xs):\n    assert dedupe(xs) == [1, 2]\n"
)


def _commit(sandbox: DockerSandbox, files: dict[str, str]) -> str:
    for path, text in files.items():
        sandbox.write_file(path, text)
    done = sandbox.run("git add -A && git -c user.name=t -c user.email=t@t commit -qm extra")
    assert done.ok, done.output
    return sandbox.run("git rev-parse HEAD").output.strip()


def test_a_budget_leaves_out_the_least_related_files_the_same_on_both_sides(
    dedupe: DockerSandbox, tmp_path: Path
) -> None:
    commit = _commit(dedupe, {"tests/test_slow_a.py": _SLOW, "tests/test_slow_b.py": _SLOW})
    _apply(dedupe, DEDUPE.wrong_patch)
    tests = related_tests(dedupe, changed_files(DEDUPE.wrong_patch))
    assert tests[0] == DEDUPE.related_test and len(tests) == 3  # its own test file first
    tight = SETTINGS.model_copy(update={"budget": 2})
    cache = Baseline(tmp_path / "baseline.json")
    baseline = cache.ensure(dedupe, commit, tests, settings=tight)
    assert set(cut_targets(baseline)) == {"tests/test_slow_a.py", "tests/test_slow_b.py"}
    assert baseline.cut and baseline.cut.startswith("budget 2 s: 2 of 3 related test files")
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


def test_issue_tests_count_though_the_original_failed_them_and_new_files_have_no_baseline(
    dedupe: DockerSandbox,
) -> None:
    commit = _commit(dedupe, {"tests/test_issue.py": _ISSUE_TEST})
    dedupe.write_file(
        "tests/test_added.py", "from listutils import core\n\ndef test_a():\n    pass\n"
    )
    tests = related_tests(dedupe, [DEDUPE.module, "tests/test_added.py"])
    assert tests[:2] == ["tests/test_added.py", DEDUPE.related_test]
    assert "tests/test_issue.py" in tests
    baseline = Baseline().ensure(dedupe, commit, tests, settings=SETTINGS)
    assert dedupe.run("test -f tests/test_added.py").ok  # put back after the original's run
    assert not any(r.nodeid.startswith("tests/test_added.py") for r in baseline.results)
    issue = ["tests/test_issue.py::test_no_repeat_at_the_end"]

    def check() -> CheckReport:
        return check_candidate(
            dedupe,
            properties=[],
            repo_tests=tests,
            baseline=baseline,
            settings=SETTINGS,
            issue_tests=issue,
        )

    (failure,) = check().failures()  # the original code: the issue test still fails
    assert failure.nodeid == issue[0] + "[xs0]" and failure.kind == "issue"
    _apply(dedupe, DEDUPE.correct_patch)
    report = check()
    assert report.failures() == [] and report.cut is None
    assert report.by_id()[issue[0] + "[xs0]"].kind == "issue"
    assert "tests/test_added.py::test_a" in report.by_id()
