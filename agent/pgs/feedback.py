"""Feedback: pick ONE failure from a check and say it in a few lines (PGS §4.2, Appendix A.1).

Three steps, one function each:

- :func:`~agent.pgs.tokens.get_counter` — how tokens are counted: the model's own tokenizer
  when it can be had (tiktoken for OpenAI names, a Hugging Face ``tokenizer.json``, a vLLM or
  SGLang server's ``/tokenize``), else
  :class:`~agent.pgs.tokens.SimpleCounter` (module :mod:`agent.pgs.tokens`, re-exported here).
- :func:`select_failure` — which failure to show. Property modes choose among every failing
  INPUT of every failed test (:meth:`agent.record.check.TestResult.failing_inputs`: a property whose
  explicit ``@example`` fails holds its generated, shrunk counterexample too). A repository
  test broken by the patch comes first (ground truth outranks a property: soundness before
  priority), then the first category of :data:`agent.record.check.PRIORITY` with a failure
  (property violation, wrong answer, runtime error, timeout). ``property-min`` then picks the
  input with the fewest tokens (the paper's Table 1: the minimal token count is the best
  proxy); ``property`` the first one (an arbitrary failing example, Table 7's "no
  minimisation" row); ``io`` the first failing test whatever its category (Self-Edit's plain
  execution feedback: an issue example test when one fails, :data:`IO_MODES`), ``io-min``
  the failing test whose input has the fewest tokens (an issue example's input as its mark
  states it: Table 7's "+ structural minimisation" row on raw I/O feedback).
  :class:`Selection` records the test, the input chosen and why.
- :func:`render_feedback` — the message for the Generator, from a jinja2 template
  (:data:`PROPERTY_TEMPLATE`, :data:`IO_TEMPLATE`; a caller may pass its own): the rule, the
  test's node id, the input in full, what the code returned or raised, a few lines of trace,
  the issue's own example in one line when it fails too, and the command that reruns the test
  alone when the caller gives one.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict, Field

from agent.core.prompts import default_prompt
from agent.errors import TokenizerUnavailable
from agent.pgs.tokens import (
    ChosenCounter,
    EndpointCounter,
    HfCounter,
    SimpleCounter,
    TiktokenCounter,
    TokenCounter,
    TokenizerName,
    VllmCounter,
    get_counter,
    tokenize_url,
)
from agent.record.check import PRIORITY, Category, CheckReport, FailingInput, TestResult

__all__ = [
    "IO_MODES",
    "IO_TEMPLATE",
    "MAX_FIELD_CHARS",
    "MAX_IO_CHARS",
    "MAX_ISSUE_EXAMPLE_CHARS",
    "MAX_TRACE_LINES",
    "PROPERTY_TEMPLATE",
    "ChosenCounter",
    "EndpointCounter",
    "FeedbackMode",
    "HfCounter",
    "Selection",
    "SimpleCounter",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerName",
    "TokenizerUnavailable",
    "VllmCounter",
    "failure_input",
    "get_counter",
    "render_feedback",
    "select_failure",
    "tokenize_url",
]

logger = logging.getLogger(__name__)

FeedbackMode = Literal["io", "io-min", "property", "property-min"]
#: The modes of Self-Edit's raw I/O feedback: the failing test's own output.
IO_MODES = ("io", "io-min")

#: Lines of traceback shown in property feedback (the last ones: where it failed).
MAX_TRACE_LINES = 10
#: Characters kept of one field (input, returned, exception, a trace line) in property feedback.
MAX_FIELD_CHARS = 2000
#: Characters kept of the raw pytest output in io feedback; only a runaway output is cut.
MAX_IO_CHARS = 20_000
#: Characters kept of the issue's own example when it is shown beside the chosen input.
MAX_ISSUE_EXAMPLE_CHARS = 300


# --------------------------------------------------------------------------- selection


class Selection(BaseModel):
    """The one failure fed back, and why it was chosen (recorded in the trajectory)."""

    model_config = ConfigDict(extra="forbid")

    result: TestResult
    chosen: FailingInput = Field(
        description="the failing input chosen: one of the result's failing inputs"
    )
    category: Category
    mode: FeedbackMode
    input: str = Field(description="the failing input as counted: the example's arguments")
    tokens: int = Field(description="tokens of `input`, by `counter`")
    counter: str = Field(description="the token counter's name, e.g. simple or tiktoken:o200k")
    candidates: int = Field(description="failing inputs (io: failing tests) chosen among")
    why: str
    issue_example: str | None = Field(
        None,
        description="the arguments of a failing explicit @example (the issue's own) when it is "
        "not the chosen input",
    )


_LABELS: dict[Category, tuple[str, str]] = {
    "property_violation": ("property violation", "property violations"),
    "wrong_answer": ("wrong answer", "wrong answers"),
    "runtime_error": ("runtime error", "runtime errors"),
    "timeout": ("timeout", "timeouts"),
    "pass": ("pass", "passes"),
}
_REGRESSION_LABELS = ("repository test broken by the patch", "repository tests broken by the patch")
_CALL = re.compile(r"^[\w.]+\((.*)\)$", re.DOTALL)
_FALSIFYING = re.compile(r"^Falsifying (explicit )?example:\s*")


def _arguments(example: str) -> str:
    text = _FALSIFYING.sub("", example.strip())
    match = _CALL.match(text)
    if match is None:
        return text
    lines = [line.strip() for line in match.group(1).splitlines()]
    return " ".join(line for line in lines if line).rstrip(",").strip()


def failure_input(result: TestResult, chosen: FailingInput | None = None) -> str:
    """The input a failure is measured (and shown) by.

    The arguments of the falsifying example, ``test_f(xs=[0, 0])`` → ``xs=[0, 0]`` (Hypothesis'
    multi-line form too): of ``chosen`` when given (one of the result's failing inputs), else
    of the result's own example; for a test without an example, its node id.
    """
    example = chosen.example if chosen is not None else result.example
    return _arguments(example) if example else result.nodeid


def _rank(result: TestResult, failing: FailingInput) -> int:
    """0 for a repository test broken by the patch (ground truth outranks a property), then
    the place of the input's category in :data:`PRIORITY`."""
    if result.regressed:
        return 0
    if failing.category in PRIORITY:
        return 1 + PRIORITY.index(failing.category)
    return 1 + len(PRIORITY)


def _plural(category: Category, n: int, regressed: bool = False) -> str:
    one, many = _REGRESSION_LABELS if regressed else _LABELS[category]
    return f"{n} {one if n == 1 else many}"


def _collection_failure(report: CheckReport) -> TestResult:
    """A check whose tests could not even be collected is a runtime error, not a pass."""
    error = report.errors[0]
    first = next((line for line in reversed(error.splitlines()) if line.strip()), error)
    return TestResult(
        nodeid="<collection>",
        outcome="error",
        category="runtime_error",
        exception=first.strip(),
        trace=error,
        output="\n\n".join(report.errors),
    )


def select_failure(
    report: CheckReport, mode: FeedbackMode, counter: TokenCounter | None = None
) -> Selection | None:
    """The failure to feed back, or None when nothing failed.

    Property modes choose among every failing INPUT of every failed test (a property whose
    explicit ``@example`` fails also holds its generated, shrunk counterexample): first by rank
    (a repository test broken by the patch, then :data:`~agent.record.check.PRIORITY`), then
    ``property-min`` by the fewest tokens of input, ``property`` by report order.

    When the counter fails part-way (a tokenize server went away), every candidate is counted
    again with :class:`SimpleCounter` so that the counts compared are of one kind.
    """
    failures = report.failures()
    if not failures and report.errors:
        failures = [_collection_failure(report)]
    if not failures:
        return None
    counter = counter or SimpleCounter()
    try:
        return _select(failures, mode, counter)
    except TokenizerUnavailable as exc:
        logger.warning("counting tokens with the simple rule: %s", exc)
        return _select(failures, mode, SimpleCounter())


def issue_example(result: TestResult) -> str | None:
    """The statement of an issue example test (the extraction turn's: a concrete test, no
    Hypothesis input, whose ``pgs_issue`` mark names the input and the output the issue states),
    or None for any other test."""
    if result.kind == "issue" and result.rule and not result.example:
        return result.rule.strip()
    return None


def io_input(result: TestResult) -> str:
    """The input of a failing test in the io modes: an issue example's input, its statement
    (:func:`issue_example`) up to `` should `` (the extraction prompt's form, ``median([1, 2])
    should return 1.5``; the whole statement when it has no such word), else
    :func:`failure_input`."""
    statement = issue_example(result)
    if statement is not None:
        return statement.split(" should ", 1)[0].strip() or statement
    return failure_input(result, result.failing_inputs()[0])


def _select(failures: list[TestResult], mode: FeedbackMode, counter: TokenCounter) -> Selection:
    if mode in IO_MODES:
        # io-min: among the failing issue examples when one fails (Self-Edit's example
        # tests), else among the failing tests; io: the first in report order.
        examples = [r for r in failures if issue_example(r) is not None]
        if mode == "io-min" and examples:
            failures = examples
        texts = [io_input(r) for r in failures]
        if mode == "io-min":
            counts = [counter.count(text) for text in texts]
            best = min(range(len(failures)), key=lambda i: (counts[i], len(texts[i]), i))
            tokens = counts[best]
            how = f"chose the one whose input has {tokens} tokens ({counter.name} counter)"
        else:
            best, tokens = 0, counter.count(texts[0])
            how = "chose the first in report order (io feedback)"
        chosen = failures[best]
        return Selection(
            result=chosen,
            chosen=chosen.failing_inputs()[0],
            category=chosen.category,
            mode=mode,
            input=texts[best],
            tokens=tokens,
            counter=counter.name,
            candidates=len(failures),
            why=f"{len(failures)} failing tests; {how}",
        )
    if mode not in ("property", "property-min"):
        raise ValueError(
            f"unknown feedback mode {mode!r}: use io, io-min, property or property-min"
        )
    every = [(r, f) for r in failures for f in r.failing_inputs()]
    top = min(_rank(r, f) for r, f in every)
    pool = [(r, f) for r, f in every if _rank(r, f) == top]
    inputs = [failure_input(r, f) for r, f in pool]
    if mode == "property-min":
        counts = [counter.count(text) for text in inputs]
        best = min(
            range(len(pool)),
            key=lambda i: (counts[i], len(inputs[i]), pool[i][0].nodeid, i),
        )
        how = f"chose the one whose input has {counts[best]} tokens ({counter.name} counter)"
        tokens = counts[best]
    else:
        best = 0
        tokens = counter.count(inputs[0])
        how = f"chose the first in report order (input has {tokens} tokens, {counter.name} counter)"
    result, failing = pool[best]
    issue = next(
        (failure_input(r, f) for r, f in every if f.explicit and f.example and f != failing),
        None,
    )
    return Selection(
        result=result,
        chosen=failing,
        category=failing.category,
        mode=mode,
        input=inputs[best],
        tokens=tokens,
        counter=counter.name,
        candidates=len(pool),
        why=f"{_plural(failing.category, len(pool), top == 0)}; {how}",
        issue_example=None if issue == inputs[best] else issue,
    )


# --------------------------------------------------------------------------- rendering

#: Property feedback (modes property and property-min): one failing input, the Appendix A.1
#: strategy of its category. Variables: round, rounds, category, label, nodeid, rule, input,
#: has_example, has_rule, explicit, kind, regressed, returned, exception, trace_lines,
#: duration, issue_example, rerun.
PROPERTY_TEMPLATE = default_prompt("pgs", "property_template")

#: io feedback (Self-Edit's execution feedback): the failing test, its raw pytest output
#: (input, expected and actual as pytest shows them), and Self-Edit's instruction; for an issue
#: example test, the example as the issue states it (input and expected output) first.
#: Variables: round, rounds, nodeid, output, category, example (None for a repository test).
IO_TEMPLATE = default_prompt("pgs", "io_template")

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
    autoescape=False,
)


def _clip(text: str | None, limit: int = MAX_FIELD_CHARS) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more chars]"


def _rule_in_words(result: TestResult) -> str:
    if result.rule:
        return result.rule.strip()
    name = result.nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
    words = name.removeprefix("test_").replace("_", " ").strip()
    return words or name


_FRAME = re.compile(r"^(\S+):\d+ in \S+")
_PYTEST_NOISE = re.compile(r"^\s*(Use -v to get more diff|Full diff:.*)?\s*$")


def _is_test_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith(".pgs/") or name.startswith("test_") or name.endswith("_test.py")


def _trace_lines(failing: FailingInput) -> list[str]:
    """At most 10 lines; none when the trace only shows the test's own failing assertion
    (the message already holds it), so the lines left point into the code under test."""
    if not failing.trace:
        return []
    lines = [line.rstrip() for line in failing.trace.strip().splitlines() if line.strip()]
    frames = [m.group(1) for line in lines if (m := _FRAME.match(line.strip()))]
    if (
        failing.category in ("property_violation", "wrong_answer")
        and frames
        and all(_is_test_path(f) for f in frames)
    ):
        return []
    # Clipped but not stripped: a source line stays indented under its frame.
    return [line if len(line) <= 200 else line[:200] + " …" for line in lines[-MAX_TRACE_LINES:]]


def _returned(failing: FailingInput) -> str | None:
    """The assertion message whole (the test's own ``returned ..., expected ...`` first, then
    pytest's explanation) without pytest's hints and blank lines."""
    if not failing.returned:
        return None
    lines = [ln.rstrip() for ln in failing.returned.splitlines() if not _PYTEST_NOISE.match(ln)]
    return _clip("\n".join(lines))


def render_feedback(
    selection: Selection,
    mode: FeedbackMode,
    round: int,
    rounds: int,
    template: str | None = None,
    rerun: str | None = None,
) -> str:
    """The feedback message for round ``round`` of ``rounds`` (plain text, no trailing space).

    Property modes: the rule, the test's node id, the chosen input in full, what the code
    returned or raised, a few lines of trace, the issue's own example in one line when it fails
    too and is another input, and ``rerun`` (the command that reruns the test alone) when
    given. io modes: Self-Edit's execution feedback, the raw pytest output of the chosen
    failing test, after the issue's example (its input and stated output) when the test is one
    (``rerun`` is not shown: the baseline gets the execution result only).
    ``template`` replaces the default of the mode (:data:`PROPERTY_TEMPLATE` or
    :data:`IO_TEMPLATE`); it sees the same variables.
    """
    if not 1 <= round <= rounds:
        raise ValueError(f"round {round} is not within 1..{rounds}")
    result = selection.result
    if mode in IO_MODES:
        raw = result.output or result.trace or result.returned or result.exception or ""
        raw = raw.rstrip()
        if len(raw) > MAX_IO_CHARS:  # a runaway output only: keep its end, where pytest reports
            raw = f"[… {len(raw) - MAX_IO_CHARS} chars cut]\n" + raw[-MAX_IO_CHARS:]
        variables: dict[str, Any] = {
            "round": round,
            "rounds": rounds,
            "nodeid": result.nodeid,
            "output": raw,
            "category": selection.category,
            "example": issue_example(result),
        }
        source = template if template is not None else IO_TEMPLATE
    else:
        failing = selection.chosen
        variables = {
            "round": round,
            "rounds": rounds,
            "category": selection.category,
            "label": "regression" if result.regressed else _LABELS[selection.category][0],
            "nodeid": result.nodeid,
            "rule": _rule_in_words(result),
            "has_rule": bool(result.rule),
            "input": _clip(selection.input),
            "has_example": bool(failing.example),
            "explicit": failing.explicit,
            "kind": result.kind,
            "regressed": result.regressed,
            "returned": _returned(failing),
            "exception": _clip(failing.exception),
            "trace_lines": _trace_lines(failing),
            "duration": result.duration,
            "issue_example": _clip(selection.issue_example, MAX_ISSUE_EXAMPLE_CHARS),
            "rerun": rerun,
        }
        source = template if template is not None else PROPERTY_TEMPLATE
    text = _ENV.from_string(source).render(**variables)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
