"""How much of a check really ran: what ``passed`` may rest on, and what it may not.

A verdict says how much of the check ran (:class:`~agent.record.check.Coverage`), and a check
that ran fewer than half of its related test files is ``partial``. What counts:

- only test files the base commit has: a file the patch adds is run (its failures count against
  the patch) but is the patch's own evidence, never part of the share that ran (twelve empty
  ``test_pad_*.py`` turned "0 of 6 related test files" into "12 of 18" before);
  :func:`at_base` asks git of the base commit, not the working tree;
- a file counts as run only when one of its tests passed or failed on the patch: a file that
  fails to import on the original code and on the patch alike ran nothing, and is named with
  that reason (:func:`related_coverage`);
- a ``--test-cmd`` that fails on the original code too is compared test by test when its output
  is pytest's (:func:`compare_test_cmd`, :func:`pytest_failures`), else its failure is left
  out and the verdict is at best ``partial``.

And when nothing could run (no pytest or no Hypothesis in the sandbox, pgs's plugin that does
not load), there is no verdict to give: :func:`check_not_run` names what is missing in one
line, :func:`preflight` asks the sandbox before a check that would run no property, and both
end in :class:`~agent.errors.CheckNotRun` (exit code 3), never in "every check passes".
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from agent.errors import CheckError, CheckNotRun
from agent.pgs.baseline import belongs_to
from agent.pgs.guard import SAFE_GIT
from agent.pgs.runner import CheckSettings, tail
from agent.record.check import (
    TEST_CMD_PREFIX,
    CheckReport,
    Coverage,
    TestCmdBaseline,
    TestResult,
)
from envs.sandbox import Sandbox

#: A test's outcome that shows it ran (a skip, a setup error or a collection error does not).
RAN = ("passed", "failed")
#: What pytest prints when it is not installed, and what a module that is not prints.
_NO_PYTEST = re.compile(r"No module named '?pytest'?$", re.MULTILINE)
_NO_HYPOTHESIS = re.compile(r"No module named '?hypothesis[.'\s]", re.MULTILINE)
#: The start of :func:`~agent.pgs.runner.run_pytest`'s error when pytest wrote no report.
NO_REPORT = "pytest wrote no report"
#: How every :class:`~agent.errors.CheckNotRun` starts.
NOT_RUN = "the check could not run: "
#: pytest's exit codes for its own failures: internal error, usage error (a bad option).
_PYTEST_OWN_FAILURE = {3: "an internal error", 4: "a usage error"}


# -- nothing could run --------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def check_not_run(report: CheckReport) -> str | None:
    """What kept ``report``'s run from checking anything, in one line (None: it ran).

    pytest missing, Hypothesis missing (a property file, or any test file, that cannot import
    it), pgs's plugin that did not load, pytest failing by itself (exit code 3 or 4) before
    writing a report. A run that wrote no report for another reason (the code under test
    crashed the interpreter) is the code's failure, not this: it stays an error of the check.
    """
    texts = [*report.errors, *(r.exception or "" for r in report.results if r.outcome == "error")]
    for text in texts:
        if _NO_HYPOTHESIS.search(text + "\n"):
            return (
                "hypothesis is not installed in the sandbox (the properties cannot import it: "
                f"{_last_line(text)})"
            )
    for error in report.errors:
        if not error.startswith(NO_REPORT):
            continue
        output = error.split("\n", 1)[1] if "\n" in error else ""
        if _NO_PYTEST.search(output):
            return f"pytest is not installed in the sandbox ({_last_line(output)})"
        if "pgs_pytest_plugin" in output:
            return f"pgs's pytest plugin did not load ({_last_line(output)})"
        if report.exit_code in _PYTEST_OWN_FAILURE:
            what = _PYTEST_OWN_FAILURE[report.exit_code]
            return f"pytest stopped with {what} before running a test ({_last_line(output)})"
        if report.exit_code in (126, 127):
            return f"the sandbox's Python cannot be started ({_last_line(output)})"
    return None


#: Run in the sandbox with the Python: each module pgs's check needs that does not import.
_PREFLIGHT = (
    "import importlib, sys\n"
    "for name in ('pytest', 'hypothesis'):\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except Exception as e:\n"
    "        print(name, type(e).__name__ + ': ' + str(e))\n"
)


def preflight(sandbox: Sandbox, settings: CheckSettings) -> None:
    """Raise :class:`~agent.errors.CheckNotRun` when the sandbox's Python cannot import
    pytest or Hypothesis (one command, about 0.3 s: asked only before a check that runs no
    property, where a missing module would leave no trace in the report)."""
    python = shlex.quote(settings.python)
    done = sandbox.run(f"{python} -c {shlex.quote(_PREFLIGHT)}", timeout=60)
    if done.exit_code in (126, 127):
        raise CheckNotRun(
            f"{NOT_RUN}the sandbox's Python ({settings.python}) cannot be started "
            f"({_last_line(done.output)})"
        )
    for line in done.output.splitlines():
        name, _, why = line.partition(" ")
        if name in ("pytest", "hypothesis") and why:
            raise CheckNotRun(
                f"{NOT_RUN}{name} is not installed in the sandbox ({settings.python}: "
                f"{why.strip()})"
            )


def raise_if_not_run(report: CheckReport) -> None:
    """:class:`~agent.errors.CheckNotRun` with :func:`check_not_run`'s line, if it has one."""
    missing = check_not_run(report)
    if missing is not None:
        raise CheckNotRun(NOT_RUN + missing)


# -- which related files count ----------------------------------------------------------------


def at_base(sandbox: Sandbox, base: str, paths: Sequence[str]) -> set[str]:
    """The ``paths`` (files or node ids) whose file the ``base`` commit has, asked of git's
    tree of that commit (replace refs ignored), not of the working tree the patch changed."""
    files = sorted({p.split("::", 1)[0] for p in paths})
    if not files:
        return set()
    quoted = " ".join(shlex.quote(f) for f in files)
    command = f"{SAFE_GIT} --no-replace-objects ls-tree -r --name-only --full-tree"
    done = sandbox.run(f"{command} {shlex.quote(base)} -- {quoted}")
    if not done.ok:
        raise CheckError(f"cannot list the test files of the base commit:\n{tail(done.output)}")
    present = set(done.output.splitlines())
    return {p for p in paths if p.split("::", 1)[0] in present}


def _error_targets(report: CheckReport | None) -> set[str]:
    """The node ids (files) of a report's collection errors."""
    if report is None:
        return set()
    return {e.split(": ", 1)[0] for e in report.errors}


def _fails_to_import(target: str, errors: set[str]) -> bool:
    return any(belongs_to(e, target) or belongs_to(target, e) for e in errors)


def related_coverage(
    repo_tests: Sequence[str],
    now: CheckReport,
    baseline: CheckReport | None,
    *,
    base_files: set[str] | None,
    cut: Sequence[str] = (),
) -> Coverage:
    """The related test files' part of a check's coverage, from the candidate's run ``now``
    (before :func:`~agent.pgs.check.against_baseline` leaves anything out).

    ``base_files``: the targets the base commit has (:func:`at_base`; None: unknown, every
    target counts). ``cut``: the targets a time budget left out. A counted target ran when one
    of its tests passed or failed in ``now``; one that ran none is ``related_broken`` when it
    fails to import in ``now`` and in ``baseline`` alike, else ``related_idle``.
    """
    added = [t for t in repo_tests if base_files is not None and t not in base_files]
    counted = [t for t in repo_tests if t not in added]
    errors_now, errors_before = _error_targets(now), _error_targets(baseline)
    ran = 0
    broken: list[str] = []
    idle: list[str] = []
    for target in counted:
        if target in cut:
            continue
        if any(belongs_to(r.nodeid, target) and r.outcome in RAN for r in now.results):
            ran += 1
        elif _fails_to_import(target, errors_now) and _fails_to_import(target, errors_before):
            broken.append(target)
        else:
            idle.append(target)
    return Coverage(
        related_found=len(counted),
        related_run=ran,
        related_cut=len([t for t in counted if t in cut]),
        related_broken=broken,
        related_idle=idle,
        related_added=added,
    )


# -- a test command that fails on the original code ------------------------------------------

#: A line of pytest's short test summary: ``FAILED a.py::t - message``, ``ERROR a.py``.
_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)
#: pytest's last line: ``1 failed, 2 passed, 1 error in 0.05s`` (between = signs without -q).
_COUNTS_LINE = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s(?: \([^)]*\))?\s*=*\s*$")


def _counts(output: str) -> dict[str, int] | None:
    for line in reversed(output.splitlines()):
        match = _COUNTS_LINE.match(line.strip())
        if match:
            pairs = (p.split(" ", 1) for p in match[1].split(", "))
            return {word.rstrip("s") if word == "errors" else word: int(n) for n, word in pairs}
    return None


def pytest_failures(output: str | None) -> set[str] | None:
    """The node ids a pytest run's output says failed or errored, when the output is pytest's
    and complete: its last line counts as many failures and errors as its short summary
    names, and at least one test ran. None otherwise (not pytest's output, cut, or `-r`
    options that leave the summary out: then there is nothing to compare test by test)."""
    if not output:
        return None
    counts = _counts(output)
    if counts is None or counts.get("passed", 0) + counts.get("failed", 0) == 0:
        return None
    named = {m[2].strip() for m in _SUMMARY_LINE.finditer(output)}
    if len(named) != counts.get("failed", 0) + counts.get("error", 0):
        return None
    return named


def compare_test_cmd(
    now: TestResult, before: TestResult
) -> tuple[TestResult | None, TestCmdBaseline]:
    """The test command's result ``now`` against its run on the original code ``before``,
    both failing: the result to count (None: nothing the candidate is responsible for) and how
    they were compared.

    ``by test`` when both outputs are pytest's (:func:`pytest_failures`) and name the tests
    the command fails by (a command that fails with every test passing fails by something
    else, which cannot be compared test by test): the command counts
    as failing only by the tests that fail now and did not on the original code, named in its
    ``returned``. ``whole`` otherwise: its failure is not counted, and the coverage makes the
    verdict ``partial`` at best."""
    failing_now, failing_before = pytest_failures(now.output), pytest_failures(before.output)
    if not failing_now or not failing_before:  # not pytest's, or it fails by something else
        return None, "whole"
    new = sorted(failing_now - failing_before)
    if not new:
        return None, "by test"
    shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
    returned = (
        f"{now.returned or 'the command failed'}; failing now and not on the original code: {shown}"
    )
    return now.model_copy(update={"returned": returned}), "by test"


def is_test_cmd(result: TestResult) -> bool:
    return result.nodeid.startswith(TEST_CMD_PREFIX)
