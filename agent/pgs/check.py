"""Checking a candidate: the kept properties, the issue tests and the related repository tests
against the code in the sandbox, counting only what the candidate is responsible for.

The host side of the PGS feedback loop (DESIGN.md §2). The parts, one module each:

- :mod:`agent.pgs.runner` runs pytest (with the plugin) or the test command in the sandbox;
- :mod:`agent.pgs.validate` is PGS's soundness filter, on a report of the ORIGINAL code;
- :mod:`agent.pgs.related` finds the repository test files that import what a patch changed;
- :mod:`agent.pgs.baseline` caches the repository tests' results on the original code per
  commit, and runs what fits the time budget, remembering what it left out;
- :func:`check_candidate` (here) runs the kept properties, the issue tests and the related
  tests against a candidate, leaves out what the baseline left out (and says so in the
  report's ``cut``), and counts only what the candidate is responsible for
  (:func:`against_baseline`), and records how much of the check ran (the report's
  ``coverage``: properties, related test files found, run and cut, the test command).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.pgs.baseline import belongs_to, cut_targets, describe_cut
from agent.pgs.report import CheckReport, Coverage, TestResult
from agent.pgs.runner import CheckSettings, run_pytest, run_test_cmd
from envs.sandbox import Sandbox


def regressions(baseline: CheckReport, now: CheckReport) -> list[TestResult]:
    """Tests that passed on the original code and fail now, as ``wrong_answer``."""
    before = baseline.by_id()
    found = []
    for result in now.results:
        old = before.get(result.nodeid)
        if result.failed and old is not None and not old.failed:
            found.append(
                result.model_copy(
                    update={"category": "wrong_answer", "note": "passed before the patch"}
                )
            )
    return found


def against_baseline(now: CheckReport, baseline: CheckReport | None) -> CheckReport:
    """``now`` without the repository failures the original code had too (named in its
    coverage's ``not_counted``); a test that passed before and fails now is marked a
    regression (see :func:`regressions`). The test command is one such repository result."""
    if baseline is None:
        return now
    before = baseline.by_id()
    regressed = {r.nodeid: r for r in regressions(baseline, now)}
    old_errors = {e.split(": ", 1)[0] for e in baseline.errors}
    results, not_counted = [], []
    for result in now.results:
        old = before.get(result.nodeid)
        if result.kind == "repo" and result.failed and old is not None and old.failed:
            not_counted.append(result.nodeid)  # not the candidate's doing
            continue
        results.append(regressed.get(result.nodeid, result))
    errors = []
    for error in now.errors:
        nodeid = error.split(": ", 1)[0]
        if nodeid in old_errors:
            not_counted.append(nodeid)
        else:
            errors.append(error)
    coverage = (now.coverage or Coverage()).model_copy(
        update={"not_counted": list(dict.fromkeys(not_counted))}
    )
    return now.model_copy(update={"results": results, "errors": errors, "coverage": coverage})


def _merged(first: CheckReport, second: CheckReport) -> CheckReport:
    return CheckReport(
        results=[*first.results, *second.results],
        errors=[*first.errors, *second.errors],
        exit_code=first.exit_code or second.exit_code,
        duration=first.duration + second.duration,
    )


def _stands_for(nodeid: str, target: str) -> bool:
    """``nodeid`` is ``target`` or one of its tests (a parametrized case included)."""
    return belongs_to(nodeid, target) or nodeid.startswith(target + "[")


def check_candidate(
    sandbox: Sandbox,
    *,
    properties: list[str],
    repo_tests: list[str],
    baseline: CheckReport | None,
    settings: CheckSettings,
    issue_tests: Sequence[str] = (),
) -> CheckReport:
    """Run the kept properties and the issue tests (one pytest run), then the related
    repository tests (another) against the code in the sandbox; with ``settings.test_cmd``,
    that command instead of the related tests.

    ``issue_tests`` are repository tests that stand for the issue (SWE-bench's FAIL_TO_PASS):
    they count as issue properties do (``kind`` "issue"), failing also when the original code
    failed them. Repository failures the ``baseline`` (the original code's report) shares are
    not counted. The related test files a time budget left out of the baseline are left out
    here too, and the report's ``cut`` names them; properties and issue tests always run. With
    a budget the run is stopped at twice the budget, or a minute past it if that is later.
    The report's ``coverage`` says how much ran (:class:`~agent.pgs.report.Coverage`).

    With ``settings.test_cmd`` the ``baseline`` holds the command's run on the original code
    (:class:`~agent.pgs.baseline.Baseline` runs it like a test file): a command that fails
    there too is not counted against the candidate, and ``coverage.not_counted`` says so.
    """
    left_out = cut_targets(baseline)
    files = [] if settings.test_cmd else [t for t in repo_tests if t not in left_out]
    timeout = settings.run_timeout
    if settings.budget:
        timeout = min(timeout, max(2 * settings.budget, settings.budget + 60))
    # Properties and issue tests first, in a run of their own: what the repository's tests do
    # to shared state before them cannot change their outcome (pytest's own test_unittest.py
    # made its issue test pass on the original code when the whole file ran first).
    first = [*properties, *issue_tests]
    report = run_pytest(sandbox, first, settings=settings, timeout=timeout)
    if files:
        rest = run_pytest(
            sandbox,
            files,
            settings=settings,
            timeout=timeout,
            deselect=[n for n in issue_tests if any(belongs_to(n, f) for f in files)],
        )
        report = _merged(report, rest)
    for result in report.results:
        if result.kind == "repo" and any(_stands_for(result.nodeid, n) for n in issue_tests):
            result.kind = "issue"
    if settings.test_cmd:
        command = run_test_cmd(sandbox, settings=settings)
        report.results.extend(command.results)
        report.duration += command.duration
        if command.exit_code and not report.exit_code:
            report.exit_code = command.exit_code
    report = against_baseline(report, baseline)
    cut = {t: left_out[t] for t in repo_tests if t in left_out}
    report.cut = describe_cut(cut, len(repo_tests), settings.budget)
    report.coverage = (report.coverage or Coverage()).model_copy(
        update={
            "properties": len(properties),
            "issue_tests": len(issue_tests),
            "related_found": len(repo_tests),
            "related_run": len(files),
            "related_cut": len(cut),
            "test_cmd": settings.test_cmd or None,
        }
    )
    return report
