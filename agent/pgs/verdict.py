"""The verdict on one check of a candidate, and why, in one sentence (docs/pgs.md, "The
verdict"): :func:`judge` on the report, :func:`flagged` for what the check did not take from the
working tree (test files the patch changes, property files the Generator changed)."""

from __future__ import annotations

from agent.pgs.coverage import check_not_run
from agent.pgs.guard import describe
from agent.record.check import CheckReport
from agent.record.pgs import GuardedChange, Verdict


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def judge(report: CheckReport, shows_bug: set[str]) -> tuple[Verdict, str]:
    """The verdict on one check of a candidate, and why, in one sentence.

    ``shows_bug``: node ids of the kept issue properties that failed on the original code.
    A report of a run that could not check anything (:func:`check_not_run`) is ``unchecked``;
    one whose coverage is partial (:meth:`~agent.record.check.Coverage.partial_reason`) is
    ``partial`` at best.
    """
    failures = report.failures()
    cut = f" ({report.cut})" if report.cut else ""
    if report.coverage is not None:  # how much ran, in every verdict's reason
        cut = f"; {report.coverage.describe()}{cut}"
    missing = check_not_run(report)
    if missing is not None:
        return "unchecked", f"the check could not run: {missing}{cut}"
    if failures or report.errors:
        shown = failures[0].nodeid if failures else report.errors[0].split(": ", 1)[0]
        count = len(failures) or len(report.errors)
        return "failed", f"{_plural(count, 'check')} failing on the patch, first {shown}{cut}"
    ran = [r for r in report.results if r.outcome == "passed"]
    issue = [r for r in ran if r.nodeid in shows_bug]
    regression = [r for r in ran if r.kind == "regression"]
    repo = [r for r in ran if r.kind == "repo"]
    holds = (
        f"{_plural(len(regression), 'regression property', 'regression properties')} and "
        f"{_plural(len(repo), 'related repository test')} pass"
    )
    if issue:
        fixed = _plural(len(issue), "issue property", "issue properties")
        why = f"{fixed} that failed on the original code pass on the patch; {holds}{cut}"
        partial = report.coverage.partial_reason() if report.coverage is not None else None
        if partial is not None:
            return "partial", f"{partial}; {why}"
        return "passed", why
    if regression or repo:
        return "tests-only", f"no issue property took part; {holds}{cut}"
    return "unchecked", f"nothing ran: no property and no related repository test{cut}"


def flagged(
    verdict: Verdict,
    why: str,
    *,
    tests_changed: list[GuardedChange],
    tampered: list[GuardedChange],
) -> tuple[Verdict, str]:
    """:func:`judge`'s verdict with what the check did not take from the working tree:
    ``tests-changed`` instead of ``passed``, ``partial`` or ``tests-only`` when the patch
    changes a test file the check relies on; the reason names those files and the property files the
    Generator changed (the check ran the base commit's and the Tester's versions)."""
    if tests_changed:
        files = describe(tests_changed)
        if verdict in ("passed", "partial", "tests-only"):
            verdict, why = (
                "tests-changed",
                (
                    f"the patch changes test files the check relies on: {files}; the check ran "
                    f"them as at the base commit, where {why}"
                ),
            )
        else:
            why += f"; the patch also changes {files} (the check ran the base commit's version)"
    if tampered:
        why += f"; the Generator changed {describe(tampered)}; the check ran the Tester's version"
    return verdict, why
