"""PGS's soundness filter: which properties to keep, judged on a run of the ORIGINAL code.

:func:`validate_properties` keeps an issue property that fails by its own check (an assertion,
``pytest.raises``, ``pytest.fail``), by an exception the issue names that the code under test
raised (in the repository's code, or in a library the repository's code called: the plugin
records where each exception was raised, :class:`~agent.record.check.Origin`), or by the time
limit when the issue is about a hang; and a regression property that passes. Everything else
is dropped with its reason (:class:`~agent.record.pgs.DroppedProperty`, the one shape of a
dropped property, the record's too): files that do not import, bad strategies,
properties that raise by themselves or by misusing an API (an exception raised in a library
the property called directly), unmarked tests. :func:`kept_reasons` says why each kept one
was kept. :func:`drop_contradictions` then drops a regression property
that asserts on an input an issue property states as a case of the bug (the same
``@example``): it pins the behaviour the issue asks to change. :func:`keep_failing_examples`
keeps, of the issue's examples as tests (the extraction turn), only those that show the bug.

The issue's examples are also the filter's public tests (the paper checks each property
against the public tests' known outputs): :func:`drop_contradicting_examples` drops an issue
property that failed in the oracle run, where every call it made was answered with the output
the issue states (:mod:`agent.pgs.pgs_pytest_plugin_oracle`). :func:`drop_failing_everywhere`
(``pgs.drop_failing_everywhere``, off by default) drops an issue property that failed on every
input its pool pass ran on the original code while another kept issue property holds on some:
the code is right on most inputs, by that one's account, so a rule no input satisfies may
assert more than the issue asks; but a property whose strategy draws only the bug's own inputs
("every negative x raises") fails everywhere too, and is right.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

from agent.record.check import CheckReport, TestResult
from agent.record.pgs import DroppedProperty

#: Exceptions by which Hypothesis says the property, not the code, is at fault.
BAD_STRATEGY = {"InvalidArgument", "InvalidDefinition", "ResolutionFailed"}
NO_INPUTS = {"Unsatisfiable", "FailedHealthCheck"}
#: Words by which an issue says it is about speed or a hang (then a timeout shows the bug).
SLOW_WORDS = re.compile(
    r"\b(hangs?|hanging|hung|infinite|forever|freezes?|slow|timeout|times? out|never returns?)\b",
    re.IGNORECASE,
)


def _exception_type(result: TestResult) -> str:
    return (result.exception or "").split(":", 1)[0].strip()


def _raised_in_test(result: TestResult) -> bool:
    """True when the exception was raised in the property's own code: by the plugin's
    :class:`~agent.record.check.Origin`, or (older reports) when the innermost frame of the
    trace is in the property's own file."""
    if result.origin is not None:
        return result.origin.where == "test"
    frames = [line for line in (result.trace or "").splitlines() if not line.startswith(" ")]
    if not frames:
        return False
    return frames[-1].split(":", 1)[0] == result.nodeid.split("::", 1)[0]


#: Where installed code lives: the standard library's folder, or site-packages.
INSTALLED = re.compile(r"/(?:(?:site|dist)-packages|lib/python\d+(?:\.\d+)?)(?=/)")


def _module(path: str) -> str:
    """The module of a file: ``rle/__init__.py`` -> ``rle``, ``src/pkg/mod.py`` ->
    ``src.pkg.mod``, ``/usr/lib/python3.9/json/decoder.py`` -> ``json.decoder``; any other
    path as it is."""
    installed = list(INSTALLED.finditer(path))
    if installed:
        path = path[installed[-1].end() + 1 :]
    if path.startswith("/") or not path.endswith(".py"):
        return path
    dotted = path[: -len(".py")].replace("/", ".")
    return dotted.removesuffix(".__init__")


def _raised_from_code(result: TestResult, error: str) -> tuple[bool, str]:
    """Whether an issue property's exception (named by the issue) comes from the code under
    test, and why: raised in the repository's code, or outside it (the standard library, a
    dependency) with a repository frame between the property and the raise. Raised outside
    with no repository frame on the way is the property's own misuse of an API."""
    origin = result.origin
    if origin is None:
        return False, f"fails by {error}, but where it was raised is not recorded"
    at = f"{_module(origin.file)} ({origin.function})"
    if origin.where == "repo":
        return True, f"raises {error} from repo module {at}, named by the issue"
    if origin.via is not None:
        via_file, _, rest = origin.via.partition(":")
        function = rest.split(" in ", 1)[-1]
        return True, (
            f"raises {error} in {at}, called from repo module {_module(via_file)} "
            f"({function}), named by the issue"
        )
    return False, (
        f"raises {error} inside {at}, reached from the property with no repository code on "
        "the way: the property's own use of the API, not the code under test"
    )


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
        where = f" (at {result.origin.file}:{result.origin.line})" if result.origin else ""
        return f"the property itself raised {result.exception}{where}"
    if result.kind == "repo":
        return "it has neither a pgs_issue nor a pgs_regression marker"
    if result.outcome == "skipped":
        return "skipped on the original code"
    return None


def _own_check(result: TestResult) -> str:
    """Why an issue property that failed by its own check shows the bug."""
    origin = result.origin
    if origin is not None and origin.type == "Failed":
        how = "its own check (pytest.raises or pytest.fail)"
    else:
        how = "its assertion"
    return f"fails by {how} on the original code: {_shown(result)}"


def _asserted_in_code(result: TestResult) -> bool:
    """An AssertionError raised in the repository's code (not the property's own check): the
    plugin reports it as a ``runtime_error``; a report written before it did says so only by
    its ``origin``."""
    origin = result.origin
    return origin is not None and origin.type == "AssertionError" and origin.where != "test"


def _issue_verdict(result: TestResult, issue_text: str) -> tuple[bool, str]:
    """Whether to keep an issue property (it shows the bug on the original), and why."""
    if result.category in ("property_violation", "wrong_answer") and not _asserted_in_code(result):
        return True, _own_check(result)
    if result.category == "pass":
        return False, "passes on the original code: does not capture the bug"
    if result.category == "timeout":
        if SLOW_WORDS.search(issue_text):
            return True, "times out on the original code, and the issue is about a hang or speed"
        return False, "times out on the original code, and the issue is not about speed or a hang"
    error = _exception_type(result) or ("AssertionError" if _asserted_in_code(result) else "")
    if not _mentions(issue_text, error):
        return False, (
            f"fails on the original code by {error or 'an error'}, which the issue does not mention"
        )
    return _raised_from_code(result, error)


def judge_property(result: TestResult, issue_text: str) -> tuple[bool, str]:
    """Whether the soundness filter keeps one property run on the original code, and why
    (for a kept one: "fails by its assertion ...", "raises ValueError from repo module x.y
    ...", "regression: passes on the original code")."""
    reason = _unusable(result)
    if reason is not None:
        return False, reason
    if result.kind == "issue":
        return _issue_verdict(result, issue_text)
    if result.failed:  # a regression property must hold on the original
        return False, f"unsound: fails on the original code ({result.category}: {_shown(result)})"
    return True, "regression: passes on the original code"


def kept_reasons(report: CheckReport, kept: list[str], issue_text: str) -> dict[str, str]:
    """``{node id: why it was kept}`` for the ``kept`` properties of a validation ``report``."""
    by_id = report.by_id()
    return {n: judge_property(by_id[n], issue_text)[1] for n in kept if n in by_id}


def validate_properties(
    report: CheckReport, issue_text: str
) -> tuple[list[str], list[DroppedProperty]]:
    """PGS's soundness filter, on a run of the properties alone against the ORIGINAL code.

    Keeps an issue property that fails by its own check (an assertion, ``pytest.raises`` or
    ``pytest.fail``), by an exception the issue names raised from the code under test (see
    :func:`_raised_from_code`), or (when the issue is about a hang or slowness) by the time
    limit; keeps a regression property that passes. Drops the rest with a reason; a file that
    does not import is dropped as a whole (its node id is the file). Returns the kept node ids,
    in report order, and the dropped (:func:`kept_reasons` says why each kept one was kept).
    """
    kept: list[str] = []
    dropped: list[DroppedProperty] = []
    for result in report.results:
        keep, reason = judge_property(result, issue_text)
        if keep:
            kept.append(result.nodeid)
        else:
            dropped.append(DroppedProperty(nodeid=result.nodeid, reason=reason))
    known = {r.nodeid for r in report.results}
    for error in report.errors:  # collection errors not already a result (older reports)
        nodeid = error.split(": ", 1)[0]
        if nodeid not in known:
            dropped.append(
                DroppedProperty(nodeid=nodeid, reason=f"the file does not import: {error}")
            )
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
) -> tuple[list[str], list[DroppedProperty]]:
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
    dropped: list[DroppedProperty] = []
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
            dropped.append(DroppedProperty(nodeid=nodeid, reason=reason))
        else:
            out.append(nodeid)
    return out, dropped


def keep_failing_examples(
    kept: list[str], original: CheckReport
) -> tuple[list[str], list[DroppedProperty]]:
    """The issue's examples as tests (the extraction turn) that :func:`validate_properties`
    kept and that FAIL on the original code: an example that passes there, or one marked as a
    regression, does not show the bug, so it cannot be the example test a fix must meet."""
    by_id = original.by_id()
    out: list[str] = []
    dropped: list[DroppedProperty] = []
    for nodeid in kept:
        if by_id[nodeid].kind == "issue" and by_id[nodeid].failed:
            out.append(nodeid)
        else:
            reason = (
                "not an example of the bug: an issue example must fail on the original code "
                f"(this one is a {by_id[nodeid].kind} test that passes there)"
            )
            dropped.append(DroppedProperty(nodeid=nodeid, reason=reason))
    return out, dropped


def drop_contradicting_examples(
    kept: list[str], oracle: CheckReport
) -> tuple[list[str], list[DroppedProperty]]:
    """Drop the kept issue properties that failed in the ``oracle`` run (their explicit
    examples run with the calls the issue's stated examples name answered as the issue
    says): with the fixed code's outputs, as the issue states them, they still fail."""
    by_id = oracle.by_id()
    out: list[str] = []
    dropped: list[DroppedProperty] = []
    for nodeid in kept:
        found = by_id.get(nodeid)
        contradiction = found.contradicts if found is not None else None
        if contradiction is None:
            out.append(nodeid)
            continue
        failure = contradiction.failure.splitlines()[0] if contradiction.failure else "failed"
        on = f" on {contradiction.input}" if contradiction.input else ""
        reason = (
            f"contradicts the issue's example {contradiction.example_test}: with "
            f"{contradiction.stated}, as the issue states, it fails{on}: {failure}"
        )
        dropped.append(DroppedProperty(nodeid=nodeid, reason=reason))
    return out, dropped


#: Inputs a pool pass must have run before failing on all of them says anything.
EVERYWHERE_AT_LEAST = 8


def _fails_everywhere(result: TestResult) -> bool:
    ran, failed = result.pool_ran or 0, result.pool_failed or 0
    own_check = result.category in ("property_violation", "wrong_answer")
    return own_check and ran >= EVERYWHERE_AT_LEAST and failed == ran


def _holds_somewhere(result: TestResult) -> bool:
    ran, failed = result.pool_ran or 0, result.pool_failed or 0
    return result.kind == "issue" and ran > 0 and failed < ran


def drop_failing_everywhere(
    kept: list[str], original: CheckReport, others: Sequence[TestResult] = ()
) -> tuple[list[str], list[DroppedProperty]]:
    """Drop a kept issue property that failed by its own check on every input (at least
    :data:`EVERYWHERE_AT_LEAST`) its pool pass ran on the original code, when another kept
    issue property (of this run, or ``others``, kept before) held on some: the bug is narrow
    by that one's account, so a rule that no input satisfies contradicts the code where the
    issue leaves it alone. Alone, or beside others failing everywhere too, it stays: the bug
    may really be everywhere (a wrong type returned for every input)."""
    by_id = original.by_id()
    results = [by_id[n] for n in kept if n in by_id]
    witness = next((r for r in [*results, *others] if _holds_somewhere(r)), None)
    if witness is None:
        return list(kept), []
    out: list[str] = []
    dropped: list[DroppedProperty] = []
    for nodeid in kept:
        result = by_id.get(nodeid)
        if result is None or result.kind != "issue" or not _fails_everywhere(result):
            out.append(nodeid)
            continue
        holds = (witness.pool_ran or 0) - (witness.pool_failed or 0)
        reason = (
            f"fails on every one of the {result.pool_ran} inputs it ran on the original code, "
            f"while {witness.nodeid} holds on {holds} of {witness.pool_ran}: a rule no input "
            "satisfies asserts more than the issue asks"
        )
        dropped.append(DroppedProperty(nodeid=nodeid, reason=reason))
    return out, dropped
