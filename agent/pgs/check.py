"""Checking a candidate: the kept properties, the issue tests and the related repository tests
against the code in the sandbox, counting only what the candidate is responsible for.

The host side of the PGS feedback loop (DESIGN.md §2). The parts, one module each:

- :mod:`agent.pgs.runner` runs pytest (with the plugin) or the test command in the sandbox;
- :mod:`agent.pgs.validate` is PGS's soundness filter, on a report of the ORIGINAL code;
- :mod:`agent.pgs.related` finds the repository test files that import what a patch changed;
- :mod:`agent.pgs.baseline` caches the repository tests' results on the original code per
  commit, and runs what fits the time budget, remembering what it left out;
- :func:`original_tests` (here) puts the repository's test files the check relies on back as
  they are at the base commit for the duration of a check, and says which the candidate
  changed;
- :func:`check_candidate` (here) runs the kept properties, the issue tests and the related
  tests against a candidate, leaves out what the baseline left out (and says so in the
  report's ``cut``), and counts only what the candidate is responsible for
  (:func:`against_baseline`), and records how much of the check ran (the report's
  ``coverage``, :mod:`agent.pgs.coverage`: only the base commit's test files count, and only
  those whose tests ran); a check that could not run at all raises
  :class:`~agent.errors.CheckNotRun`.
"""

from __future__ import annotations

import configparser
import posixpath
import shlex
import tomllib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent.errors import CheckError
from agent.pgs.baseline import belongs_to, cut_targets, describe_cut
from agent.pgs.coverage import (
    at_base,
    compare_test_cmd,
    is_test_cmd,
    preflight,
    raise_if_not_run,
    related_coverage,
)
from agent.pgs.guard import SAFE_GIT
from agent.pgs.runner import CheckSettings, run_pytest, run_test_cmd, tail
from agent.record.check import CheckReport, Coverage, TestResult
from agent.record.pgs import GuardedChange
from envs.sandbox import SCRATCH_DIRS, Sandbox

#: Files pytest reads in every folder from the repository's root down to a test file: each is
#: part of what the check runs. The first are read whole; the others only for their pytest
#: section (:data:`PYTEST_SECTIONS`): a candidate may change a package's metadata there.
PYTEST_FILES = (
    "conftest.py",
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
)
PYTEST_SECTION_FILES = ("setup.cfg", "pyproject.toml")
#: Where pytest reads its configuration in each kind of file.
PYTEST_SECTIONS = {"tox.ini": "pytest", "setup.cfg": "tool:pytest"}

#: Run in the sandbox with the base commit and the paths: ``<base blob|-> <now blob|-|symlink|
#: other> <path>`` per path (``--no-filters``: the bytes as they are, as git stores them).
_COMPARE = r"""
base=$1; shift
for p in "$@"; do
  b=$(git rev-parse -q --verify "$base:$p" 2>/dev/null) || b=-
  if [ -L "$p" ]; then w=symlink
  elif [ -f "$p" ]; then w=$(git hash-object --no-filters -- "$p")
  elif [ -e "$p" ]; then w=other
  else w=-; fi
  printf '%s %s %s\n' "$b" "$w" "$p"
done
"""


def _ancestors(path: str) -> list[str]:
    """The folders from the repository's root down to ``path``'s own ('' is the root)."""
    parts = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
    return ["", *("/".join(parts[: i + 1]) for i in range(len(parts)))]


def _in_scratch(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SCRATCH_DIRS)


def relied_on(targets: Sequence[str], tests: Sequence[str]) -> list[str]:
    """The files a pytest run of ``targets`` (files or node ids) relies on besides the code:
    the repository test files ``tests``, and every conftest.py and pytest configuration file
    in the folders from the root down to each target (present or not: one the candidate adds
    counts too). The scratch folder is :mod:`agent.pgs.guard`'s."""
    files = [t.split("::", 1)[0] for t in targets]
    out = list(dict.fromkeys(t.split("::", 1)[0] for t in tests))
    for folder in dict.fromkeys(f for t in files for f in _ancestors(t) if not _in_scratch(f)):
        for name in (*PYTEST_FILES, *PYTEST_SECTION_FILES):
            path = posixpath.join(folder, name) if folder else name
            if path not in out:
                out.append(path)
    return out


def _pytest_section(name: str, text: str | None) -> Any:
    """The pytest configuration a setup.cfg or pyproject.toml holds (None: none, or the file
    does not parse, which counts as a change when the other side parses)."""
    if text is None:
        return None
    try:
        if name == "pyproject.toml":
            return tomllib.loads(text).get("tool", {}).get("pytest")
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        section = PYTEST_SECTIONS[name]
        return dict(parser[section]) if parser.has_section(section) else None
    except (tomllib.TOMLDecodeError, configparser.Error, AttributeError):
        return ("unparsable", text)


def _read(sandbox: Sandbox, command: str) -> str | None:
    done = sandbox.run(command)
    return done.output if done.ok else None


@contextmanager
def original_tests(
    sandbox: Sandbox, base: str, targets: Sequence[str], *, tests: Sequence[str] = ()
) -> Iterator[list[GuardedChange]]:
    """The files a run of ``targets`` relies on (:func:`relied_on`) as they are at ``base``
    for the duration, whatever the candidate in the sandbox did to them; yields what it
    changed (``modified``, ``deleted``, ``added``), the candidate's versions put back after.

    ``tests``: the repository test files among the targets (the others, the properties, are
    :mod:`agent.pgs.guard`'s). One the candidate adds (absent at ``base``) is its own and
    stays; a conftest.py or configuration file it adds is taken out. A setup.cfg or
    pyproject.toml counts only when its pytest section changed.
    """
    paths = relied_on(targets, tests)
    script = f"bash -c {shlex.quote(_COMPARE)} compare {shlex.quote(base)} "
    done = sandbox.run(script + " ".join(shlex.quote(p) for p in paths))
    if not done.ok:
        raise CheckError(
            f"cannot compare the test files with the base commit:\n{tail(done.output)}"
        )
    changed: list[GuardedChange] = []
    own = set(tests)
    for line in done.output.splitlines():
        fields = line.split(" ", 2)
        if len(fields) != 3 or fields[0] == fields[1]:
            continue
        was, now, path = fields
        name = posixpath.basename(path)
        if was == "-" and (path in own or now == "-"):
            continue  # a test file the candidate adds is its own
        if name in PYTEST_SECTION_FILES:
            before = _read(sandbox, f"git show {shlex.quote(f'{base}:{path}')}")
            after = _read(sandbox, f"cat -- {shlex.quote(path)}") if now != "-" else None
            if _pytest_section(name, before) == _pytest_section(name, after):
                continue
        change = "added" if was == "-" else "deleted" if now == "-" else "modified"
        changed.append(GuardedChange(path=path, change=change))
    if not changed:
        yield changed
        return
    quoted = " ".join(shlex.quote(c.path) for c in changed)
    kept = f"/tmp/pgs-candidate-tests-{uuid.uuid4().hex[:8]}.tar"
    at_base = " ".join(shlex.quote(c.path) for c in changed if c.change != "added")
    # The candidate's versions aside (tar keeps symlinks as links), then the base's in place.
    put = sandbox.run(
        f"tar -cf {kept} --ignore-failed-read -- {quoted} 2>/dev/null; rm -rf -- {quoted}"
        + (f" && {SAFE_GIT} checkout -q {shlex.quote(base)} -- {at_base}" if at_base else "")
        + (f" && {SAFE_GIT} reset -q -- {at_base}" if at_base else "")
    )
    if not put.ok:
        raise CheckError(f"cannot restore the original test files:\n{tail(put.output)}")
    try:
        yield changed
    finally:
        back = sandbox.run(f"rm -rf -- {quoted} && tar -xf {kept} && rm -f {kept}")
        if not back.ok:
            raise CheckError(
                f"cannot put the candidate's test files back (kept in {kept}):\n"
                + tail(back.output)
            )


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
    regression (see :func:`regressions`). The test command is one such repository result,
    compared test by test when both outputs are pytest's
    (:func:`~agent.pgs.coverage.compare_test_cmd`; the coverage's ``test_cmd_baseline``)."""
    if baseline is None:
        return now
    before = baseline.by_id()
    regressed = {r.nodeid: r for r in regressions(baseline, now)}
    old_errors = {e.split(": ", 1)[0] for e in baseline.errors}
    results, not_counted = [], []
    command: str | None = None
    for result in now.results:
        old = before.get(result.nodeid)
        if result.kind == "repo" and result.failed and old is not None and old.failed:
            if is_test_cmd(result):
                counted, command = compare_test_cmd(result, old)
                if counted is not None:
                    results.append(counted)
                    continue
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
        update={"not_counted": list(dict.fromkeys(not_counted)), "test_cmd_baseline": command}
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
    base: str | None = None,
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
    The report's ``coverage`` says how much ran (:class:`~agent.record.check.Coverage`).

    ``base``: the base commit; a related test file it does not have (the patch adds it) runs
    but never counts as a related file that ran (None: every file counts). A related file
    counts as run only when one of its tests passed or failed
    (:func:`~agent.pgs.coverage.related_coverage`).

    With ``settings.test_cmd`` the ``baseline`` holds the command's run on the original code
    (:class:`~agent.pgs.baseline.Baseline` runs it like a test file): a command that fails
    there too is compared test by test when its output is pytest's, else its failure is not
    counted and the verdict is at best ``partial``; ``coverage`` says which.

    Raises :class:`~agent.errors.CheckNotRun` when nothing could run: pytest or Hypothesis
    missing, pgs's plugin not loading (:func:`~agent.pgs.coverage.check_not_run`; asked of the
    sandbox first when there is no property to show it).
    """
    if not properties:
        preflight(sandbox, settings)
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
    raise_if_not_run(report)
    cut = {t: left_out[t] for t in repo_tests if t in left_out}
    related = related_coverage(
        [] if settings.test_cmd else repo_tests,
        report,
        baseline,
        base_files=None if base is None else at_base(sandbox, base, repo_tests),
        cut=list(cut),
    )
    report = against_baseline(report, baseline)
    report.cut = describe_cut(cut, len(repo_tests), settings.budget)
    report.coverage = (report.coverage or Coverage()).model_copy(
        update={
            **related.model_dump(include={n for n in Coverage.model_fields if "related" in n}),
            "properties": len(properties),
            "issue_tests": len(issue_tests),
            "test_cmd": settings.test_cmd or None,
        }
    )
    return report
