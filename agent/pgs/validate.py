"""PGS's soundness filter: which properties to keep, judged on a run of the ORIGINAL code.

:func:`validate_properties` keeps an issue property that fails by its assertion (or by an
exception the issue names, or by the time limit when the issue is about a hang) and a
regression property that passes; everything else is dropped with its reason
(:class:`Dropped`): files that do not import, bad strategies, properties that raise by
themselves, unmarked tests. :func:`drop_contradictions` then drops a regression property
that asserts on an input an issue property states as a case of the bug (the same
``@example``): it pins the behaviour the issue asks to change.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict

from agent.pgs.report import CheckReport, TestResult

#: Exceptions by which Hypothesis says the property, not the code, is at fault.
BAD_STRATEGY = {"InvalidArgument", "InvalidDefinition", "ResolutionFailed"}
NO_INPUTS = {"Unsatisfiable", "FailedHealthCheck"}
#: Words by which an issue says it is about speed or a hang (then a timeout shows the bug).
SLOW_WORDS = re.compile(
    r"\b(hangs?|hanging|hung|infinite|forever|freezes?|slow|timeout|times? out|never returns?)\b",
    re.IGNORECASE,
)


class Dropped(BaseModel):
    """A property the soundness filter removed, and why."""

    model_config = ConfigDict(extra="forbid")
    nodeid: str
    reason: str


def _exception_type(result: TestResult) -> str:
    return (result.exception or "").split(":", 1)[0].strip()


def _raised_in_test(result: TestResult) -> bool:
    """True when the innermost frame of the trace is in the property's own file."""
    frames = [line for line in (result.trace or "").splitlines() if not line.startswith(" ")]
    if not frames:
        return False
    return frames[-1].split(":", 1)[0] == result.nodeid.split("::", 1)[0]


def _mentions(text: str, word: str) -> bool:
    return bool(word) and re.search(rf"\b{re.escape(word)}\b", text) is not None


def _shown(result: TestResult) -> str:
    shown = result.example or result.returned or result.exception or result.category
    return shown.splitlines()[0] if shown else result.category


def _unusable(result: TestResult) -> str | None:
    """Why a property cannot be used whatever its kind, or None."""
    error = _exception_type(result)
    if result.outcome == "error":
        if "::" not in result.nodeid:
            return f"the file does not import: {result.exception}"
        return f"it errors before it runs: {result.exception}"
    if error in BAD_STRATEGY:
        return f"bad strategy ({error}): {result.exception}"
    if error in NO_INPUTS:
        return f"its strategy cannot produce enough valid inputs ({error}): {result.exception}"
    if error in ("Flaky", "FlakyFailure") and result.category != "timeout":
        return f"flaky on the original code: {result.exception}"
    if result.category == "runtime_error" and _raised_in_test(result):
        return f"the property itself raised {result.exception}"
    if result.kind == "repo":
        return "it has neither a pgs_issue nor a pgs_regression marker"
    if result.outcome == "skipped":
        return "skipped on the original code"
    return None


def _issue_verdict(result: TestResult, issue_text: str) -> str | None:
    """None to keep an issue property (it shows the bug on the original), else the reason."""
    if result.category in ("property_violation", "wrong_answer"):
        return None
    if result.category == "pass":
        return "passes on the original code: does not capture the bug"
    if result.category == "timeout":
        if SLOW_WORDS.search(issue_text):
            return None
        return "times out on the original code, and the issue is not about speed or a hang"
    error = _exception_type(result)
    if _mentions(issue_text, error):
        return None
    return f"fails on the original code by {error or 'an error'}, which the issue does not mention"


def validate_properties(report: CheckReport, issue_text: str) -> tuple[list[str], list[Dropped]]:
    """PGS's soundness filter, on a run of the properties alone against the ORIGINAL code.

    Keeps an issue property that fails by its assertion, by an exception the issue names, or
    (when the issue is about a hang or slowness) by the time limit; keeps a regression property
    that passes. Drops the rest with a reason; a file that does not import is dropped as a whole
    (its node id is the file). Returns the kept node ids, in report order, and the dropped.
    """
    kept: list[str] = []
    dropped: list[Dropped] = []
    for result in report.results:
        reason = _unusable(result)
        if reason is None and result.kind == "issue":
            reason = _issue_verdict(result, issue_text)
        elif reason is None and result.failed:  # a regression property must hold on the original
            reason = f"unsound: fails on the original code ({result.category}: {_shown(result)})"
        if reason is None:
            kept.append(result.nodeid)
        else:
            dropped.append(Dropped(nodeid=result.nodeid, reason=reason))
    known = {r.nodeid for r in report.results}
    for error in report.errors:  # collection errors not already a result (older reports)
        nodeid = error.split(": ", 1)[0]
        if nodeid not in known:
            dropped.append(Dropped(nodeid=nodeid, reason=f"the file does not import: {error}"))
    return kept, dropped


# -- regression properties that contradict the issue ---------------------------------------


def property_decorators(files: dict[str, str]) -> Iterator[tuple[str, str, ast.expr]]:
    """``(test function name, decorator name, decorator)`` for every decorator of every
    function of the property files (``@example(...)`` gives ``example``; ``@pytest.mark.
    pgs_issue(...)`` gives ``pgs_issue``). Files that do not parse are skipped."""
    for source in files.values():
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    name = getattr(target, "attr", None) or getattr(target, "id", None)
                    if name:
                        yield node.name, str(name), deco


def explicit_examples(files: dict[str, str]) -> dict[str, set[str]]:
    """``{test function name: {arguments of each @example}}`` of property files (by ``ast``)."""
    found: dict[str, set[str]] = {}
    for function, name, deco in property_decorators(files):
        if name == "example" and isinstance(deco, ast.Call):
            args = [ast.unparse(a) for a in deco.args]
            args += sorted(f"{k.arg}={ast.unparse(k.value)}" for k in deco.keywords)
            found.setdefault(function, set()).add(", ".join(args))
    return found


def _function(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1].split("[", 1)[0]


def drop_contradictions(
    kept: list[str], original: CheckReport, files: dict[str, str]
) -> tuple[list[str], list[dict[str, str]]]:
    """Drop regression properties that assert on an input an issue property states as a case
    of the bug (the same ``@example``): they pin the behaviour the issue asks to change, so
    they would punish the right fix. Returns what stays kept and the dropped, with reasons."""
    examples = explicit_examples(files)
    by_id = original.by_id()
    issue_cases: dict[str, str] = {}
    for nodeid in kept:
        if by_id[nodeid].kind == "issue":
            for case in sorted(examples.get(_function(nodeid), ())):
                issue_cases.setdefault(case, nodeid)
    out: list[str] = []
    dropped: list[dict[str, str]] = []
    for nodeid in kept:
        cases = (
            examples.get(_function(nodeid), set()) if by_id[nodeid].kind == "regression" else set()
        )
        shared = sorted(c for c in cases if c in issue_cases)
        if shared:
            reason = (
                f"contradicts the issue: its example ({shared[0]}) is a case of the bug in "
                f"{issue_cases[shared[0]]}, where it asserts the original behaviour"
            )
            dropped.append({"nodeid": nodeid, "reason": reason})
        else:
            out.append(nodeid)
    return out, dropped
