"""pytest plugin that runs inside the sandbox and writes what happened as one JSON report.

It runs on the REPOSITORY's Python, so it uses the standard library, pytest (>= 7) and
Hypothesis only, and stays compatible with Python 3.8. The launcher beside it,
``pgs_pytest_plugin_start.py``, loads it by path and starts pytest with it
(:func:`agent.pgs.runner.install_plugin` copies the three files, the companion module
``pgs_pytest_plugin_results.py`` turns pytest's reports into results;
:func:`agent.pgs.runner.run_pytest` does the rest).

What it does:

- registers the markers ``pgs_issue(rule)`` and ``pgs_regression(rule)``: the Tester marks
  each property with one, the rule in one sentence;
- loads a Hypothesis profile that makes two runs give the same result: no example database,
  one failure per test (the minimal one; with ``PGS_SHRINK=0`` the first found, unshrunk), no
  reproduction blobs; derandomised, unless ``PGS_SEED`` is set: then every Hypothesis test
  runs with ``@seed`` of that seed mixed with its node id, so each check (a new seed) draws
  new inputs and the same seed the same ones;
- keeps every distinct input a Hypothesis test failed on while generating and shrinking (by
  wrapping its ``hypothesis.inner_test``), at most ``PGS_KEEP_INPUTS``, the shortest;
- stops a test that runs longer than ``PGS_TEST_TIMEOUT`` seconds (SIGALRM) and records the
  input it was running, when the test is a Hypothesis property;
- when a property fails on an explicit ``@example``, runs it once more with the explicit
  examples left out (Hypothesis stops at a failing explicit example and never generates or
  shrinks), within what is left of the same time limit and with the same settings otherwise,
  and records the generated, shrunk failing input beside the explicit one;
- keeps each failing input in a form it can feed again (``replay``: the test's drawn
  arguments, pickled, base64), and replays the inputs ``PGS_REPLAY`` (a JSON file
  ``{node id: [replay, ...]}`` the host writes) as ``@example`` cases beside the fresh inputs:
  the inputs a kept issue property failed on when it was validated on the original code are
  tried in every later check (the result's ``replayed`` says how many were fed; a replayed
  input that fails is reported like a generated one, ``from_replay`` on the failing input);
- builds each failing Hypothesis test's counterexample POOL (``pool`` in its result,
  :class:`agent.record.check.PoolInput`): every distinct failing input (by value) of its run
  and shrink, then of a pool pass that runs the test once more with every failure recorded
  and swallowed, so that Hypothesis runs all its inputs to the end (explicit, replayed and
  generated; no shrink, no reuse), within what is left of the time limit. Each pooled input
  has its ``source`` (generated, explicit, replayed, shrinking, shrunk), its ``runtime`` (the
  call, untraced) and ``lines``: the repository lines (not test files) a rerun of a copy of
  it (its unpickled replay form) runs, measured by coverage.py when it imports, else by
  ``sys.settrace``, neither under another tracer (``pool_lines_by``, ``pool_note`` say
  which, or why none). The host counts each one's tokens (``agent.pgs.pool.count_pool``);
- with ``PGS_SHRINK_ORDER=pick-then-shrink`` (and shrinking on), the run does not shrink;
  after the pool pass the generated input with the fewest tokens (by the simple rule of
  ``agent.pgs.tokens``: the plugin has no tokenizer) is replayed from its choices through a
  one-entry example database and shrunk by Hypothesis, and the input it shrinks to joins
  ``examples`` (second, after the reported one);
- writes ``PGS_REPORT`` (a :class:`agent.record.check.CheckReport` as JSON) at the end of the
  session.

Environment: ``PGS_REPORT`` (path; nothing is written without it), ``PGS_MAX_EXAMPLES`` (64),
``PGS_SEED`` (an integer; unset: derandomised), ``PGS_KEEP_INPUTS`` (16; ``0``: only the
reported input),
``PGS_DEADLINE_MS`` (unset, ``0`` or ``none``: no deadline, so that a loaded machine gets
the same report), ``PGS_TEST_TIMEOUT`` (20 seconds;
``0``: none), ``PGS_OUTPUT_CHARS`` (4000: cap on each test's raw output), ``PGS_SHRINK`` (1;
``0``: Hypothesis's shrink phase off), ``PGS_REPLAY`` (a path; unset: nothing replayed),
``PGS_SEARCH_EXAMPLES`` (inputs of the search after a failing explicit example; unset: as
``PGS_MAX_EXAMPLES``), ``PGS_POOL`` (1; ``0``: no pool, no pool pass), ``PGS_POOL_SIZE`` (256
distinct inputs per test), ``PGS_SHRINK_ORDER`` (``shrink-then-pick``, the default, or
``pick-then-shrink``).

The report::

    {"results": [{"nodeid": "...", "kind": "issue|regression|repo", "rule": "...",
                  "outcome": "passed|failed|error|skipped|timeout",
                  "category": "property_violation|wrong_answer|runtime_error|timeout|pass",
                  "example": "test_f(xs=[0, 0])", "explicit": false,
                  "returned": "assert 2 == 1 ...", "exception": "Type: message",
                  "trace": "<= 10 lines", "output": "raw, capped", "duration": 0.04,
                  "examples": [{"example": "...", "explicit": true, "category": "...",
                                "returned": "...", "exception": null, "trace": "..."}, ...]},
                 ...],
     "errors": ["<nodeid>: <collection error text>", ...], "exit_code": 1, "duration": 2.1,
     "imported": ["pkg", "pkg.mod", ...]}

``imported``: the repository's own modules loaded by the end of the run (by what the tests
imported, directly or not), so the host can tell whether a patch changes code they exercise.

A failing test has ``returned`` (AssertionError: its message whole, the test's own first, such
as ``returned [1, 1], expected [1]``, then pytest's explanation) or ``exception`` (anything
else), ``trace`` (innermost frames outside pytest and Hypothesis, ``path:line in function``
then the source line), ``origin`` (where it was raised: the frame's file, line and function,
whether that is the test's own code, the repository's or outside both, and the innermost
repository frame between the test and the raise; see ``pgs_pytest_plugin_results.origin``)
and ``output``. ``example`` is Hypothesis's shrunk falsifying example on
one line; for a test stopped by the time limit, the input it was running (not shrunk).
``examples`` (:class:`agent.record.check.FailingInput`) lists every failing input of a failed test:
first the one the fields above describe (what pytest reported), then, after a failing explicit
example, the generated one if the search found a different failing input, then the other
distinct inputs the test failed on while Hypothesis generated and shrank (shortest first).
Node ids are pytest's own: the search adds inputs, never tests.

Categories (the PGS paper's outcome classes): a Hypothesis test failing by AssertionError (or
pytest's ``Failed``: ``pytest.raises`` saying DID NOT RAISE, ``pytest.fail``) is a
``property_violation``, unless the failing input is an explicit ``@example`` (then, like an
unmarked repository test failing by AssertionError, a ``wrong_answer``); any other exception is
a ``runtime_error`` (an ``AssertionError`` raised in the repository's code, not in the
test's file, too: the code's own check broke); the time limit or Hypothesis's deadline is a
``timeout``. Setup errors and modules that fail to import are results with outcome
``error`` (collection errors are also listed in ``errors``).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import json
import os
import pickle
import re
import signal
import sys
import time
import zlib
from typing import TYPE_CHECKING, Any

import pytest

# On the host this is agent.pgs.pgs_pytest_plugin; in the sandbox a top-level module whose folder
# holds pgs_pytest_plugin_results.py too (runner.install_plugin copies both).
if TYPE_CHECKING or __package__:
    from . import pgs_pytest_plugin_oracle as oracles
    from . import pgs_pytest_plugin_results as results
else:
    import pgs_pytest_plugin_oracle as oracles
    import pgs_pytest_plugin_results as results

REPORT_ENV = "PGS_REPORT"
#: Inputs Hypothesis generates per property (the PGS paper: 64 test inputs per round).
DEFAULT_MAX_EXAMPLES = 64
#: Distinct failing inputs kept per test beyond the reported one (the shortest are kept).
DEFAULT_KEEP_INPUTS = 16
#: Distinct failing inputs pooled per test, with their measures (``PGS_POOL_SIZE``).
DEFAULT_POOL_SIZE = 256
#: ``PGS_SHRINK_ORDER``: Hypothesis shrinks its first failing input, then the host picks the
#: fewest-token input of the pool (shrunk ones too); or the fewest-token input of the pool
#: (the simple rule: the plugin has no tokenizer) is picked first, then shrunk.
SHRINK_ORDERS = ("shrink-then-pick", "pick-then-shrink")
#: Characters kept of what the code returned or raised on each of those inputs.
SEEN_CHARS = 2000
#: Longest replay form kept of one input (base64 characters); a longer input is not replayed.
REPLAY_CHARS = 8000


def _env_number(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value == "none":
        return 0.0
    return float(value)


def _hypothesis_profile() -> None:
    try:
        from hypothesis import HealthCheck, Phase, settings
    except ImportError:  # a repository without Hypothesis still gets its tests run
        return
    deadline_ms = _env_number("PGS_DEADLINE_MS", 0)
    # The explain phase traces every line (before Python 3.12): a time limit then fires in
    # the tracer at a different line each run, and its notes cost tokens for little. Without
    # shrinking (PGS_SHRINK=0, the ablation without minimisation) a failure is reported with
    # the first failing input found, as generated.
    left_out = {"explain"} if _env_number("PGS_SHRINK", 1) else {"explain", "shrink"}
    if _pick_then_shrink():
        left_out.add("shrink")  # the picked input is shrunk after the pool pass
    if oracles.enabled():  # the issue's own cases are the explicit examples: only those run
        left_out.update(phase.name for phase in Phase if phase.name != "explicit")
    options: dict[str, Any] = {
        # Without PGS_SEED every run draws the same inputs (derived from each test's source);
        # with it, _seeded() gives every Hypothesis test its seed, which Hypothesis puts first.
        "derandomize": True,
        "database": None,
        "max_examples": int(_env_number("PGS_MAX_EXAMPLES", DEFAULT_MAX_EXAMPLES)),
        "deadline": deadline_ms if deadline_ms > 0 else None,
        "print_blob": False,
        "report_multiple_bugs": False,
        # Timing-based health checks would make two runs disagree.
        "suppress_health_check": [HealthCheck.too_slow],
        "phases": [phase for phase in Phase if phase.name not in left_out],
    }
    settings.register_profile("pgs", **options)
    settings.load_profile("pgs")


def _pool_on() -> bool:
    return bool(_env_number("PGS_POOL", 1))


def _pick_then_shrink() -> bool:
    order = os.environ.get("PGS_SHRINK_ORDER", "").strip() or SHRINK_ORDERS[0]
    if order not in SHRINK_ORDERS:
        raise ValueError(f"PGS_SHRINK_ORDER={order!r}: use {' or '.join(SHRINK_ORDERS)}")
    return order == "pick-then-shrink" and _pool_on() and bool(_env_number("PGS_SHRINK", 1))


# -- the per-test time limit --------------------------------------------------------------------


class _Alarm:
    """SIGALRM after ``seconds``; the handler records the property's current input and raises."""

    def __init__(self, item: Any, seconds: float) -> None:
        self.item = item
        self.seconds = seconds
        self.example: str | None = None
        self.previous: Any = None

    def __enter__(self) -> _Alarm:
        if self.seconds > 0 and hasattr(signal, "setitimer"):
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)

    def _fire(self, signum: int, frame: Any) -> None:
        self.example = _current_input(self.item, frame)
        raise results.PgsTimeLimit(f"the test ran longer than the time limit of {self.seconds:g} s")


def _inner_function(item: Any) -> Any:
    obj = getattr(item, "obj", None)
    hypothesis = getattr(obj, "hypothesis", None)
    inner = getattr(hypothesis, "inner_test", None)
    return getattr(inner, "_pgs_wraps", inner)  # the test's own function under _Seen's wrapper


def _current_input(item: Any, frame: Any) -> str | None:
    """``test_f(x=...)`` for the Hypothesis input the interrupted test was running, if any."""
    inner = _inner_function(item)
    code = getattr(inner, "__code__", None)
    while frame is not None and code is not None:
        if frame.f_code is code:
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            fixtures = set(getattr(item, "fixturenames", ()))
            args = ", ".join(
                f"{name}={_short_repr(frame.f_locals.get(name))}"
                for name in names
                if name != "self" and name not in fixtures
            )
            return f"{code.co_name}({args})"
        frame = frame.f_back
    return None


def _short_repr(value: Any, limit: int = 1000) -> str:
    try:
        text = repr(value)
    except Exception as e:  # a broken __repr__ must not hide the timeout
        text = f"<unprintable {type(value).__name__}: {e}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- a seed per check, and every failing input the search saw ------------------------------------


def _test_seed(nodeid: str) -> int | None:
    """``PGS_SEED`` mixed with the node id (two properties over one strategy draw different
    inputs), or None without ``PGS_SEED``. The same seed and node id give the same inputs."""
    value = os.environ.get("PGS_SEED", "").strip()
    if not value:
        return None
    return (int(value) + zlib.crc32(nodeid.encode("utf-8"))) % (2**32)


def _seeded(item: Any) -> None:
    """Give a Hypothesis test the check's seed (``@seed``, which wins over ``derandomize``)."""
    seed = _test_seed(item.nodeid)
    if seed is None or _inner_function(item) is None:
        return
    try:
        from hypothesis import seed as hypothesis_seed
    except ImportError:
        return
    hypothesis_seed(seed)(getattr(item.obj, "__func__", item.obj))


class _Seen:
    """Wraps a Hypothesis test's inner function (``f.hypothesis.inner_test``, which Hypothesis
    reads at each call and documents as replaceable) to keep the inputs it failed on: while
    generating and shrinking, Hypothesis reports only the one it shrank to.

    The input is written down before the call (a test may change its arguments); at most
    ``limit`` distinct inputs are kept, the shortest; skips, the time limit and Hypothesis's
    own signals (``assume``) are not failures.
    """

    def __init__(self, item: Any, limit: int) -> None:
        self.item = item
        self.limit = limit
        self.inputs: dict[str, BaseException] = {}
        #: example text -> its replay form (every failing input whose arguments pickle).
        self.replay: dict[str, str] = {}
        #: The replay forms fed this run (``PGS_REPLAY``), and those of them that failed.
        self.replaying: set[str] = set()
        self.replay_failed: set[str] = set()
        #: The last failing input of the test's own run (not the search after an explicit
        #: example): the one Hypothesis reports.
        self.last: str | None = None
        self.first_failure_replayed = False
        self.searching = False
        self.failures = 0
        self.handle: Any = getattr(getattr(item, "obj", None), "hypothesis", None)
        self.inner: Any = getattr(self.handle, "inner_test", None)
        #: The pool: every distinct failing input (by its text without spaces), in the order
        #: first seen, with its measures (:meth:`_pooled`); at most ``pool_size``.
        self.pool: dict[str, dict[str, Any]] = {}
        self.pool_size = int(_env_number("PGS_POOL_SIZE", DEFAULT_POOL_SIZE))
        self.pool_on = _pool_on()
        self.pool_left_out = 0
        #: "run" (pytest's own run of the test), "search" (after a failing explicit example),
        #: "pool" (the pool pass: failures recorded and swallowed) or "shrink" (the picked input).
        self.phase = "run"
        self.phase_failures = 0
        self.last_failing: str | None = None
        self.lines: results.LineCounter | None = None
        #: Hypothesis's choices of each drawn input, kept to shrink the picked one
        #: (pick-then-shrink only: None otherwise).
        self.choices: dict[str, bytes] | None = None
        self.explicit_texts: set[str] = set()
        #: Inputs the pool pass ran to the end, and how many of them failed.
        self.pool_ran = 0
        self.pool_failed = 0
        #: Inputs that drew the input generator's shared hard inputs (``pgs_inputs.hard``).
        self.hard_inputs = 0
        #: With ``PGS_ORACLE``: the first input on which the test failed although the issue's
        #: stated examples answered every call it made (:mod:`pgs_pytest_plugin_oracle`).
        self.contradiction: dict[str, Any] | None = None

    def __enter__(self) -> _Seen:
        if self.inner is not None:

            def call(*args: Any, **kwargs: Any) -> Any:
                return self._call(*args, **kwargs)

            # Hypothesis names the test in its report by the inner function's name.
            wrapper: Any = functools.update_wrapper(call, self.inner)
            wrapper._pgs_wraps = self.inner
            self.handle.inner_test = wrapper
            function = getattr(self.item.obj, "__func__", self.item.obj)
            for given in getattr(function, "hypothesis_explicit_examples", ()):
                values = dict(getattr(given, "kwargs", None) or {})
                if values and not getattr(given, "args", None):
                    self.explicit_texts.add(_squeezed(self._example(values)))
            if _pick_then_shrink():
                self.choices = {}
        return self

    def __exit__(self, *exc: object) -> None:
        if self.inner is not None:
            self.handle.inner_test = self.inner

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        drawn = self._drawn(args, kwargs)
        example = None if drawn is None else self._example(drawn)
        blob = None if drawn is None else _replay_form(drawn)
        hard = _hard_drawn()
        self.hard_inputs += hard
        if self.phase == "pool":
            self.pool_ran += 1
        if _ORACLE is not None:
            _ORACLE.start()
        started = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        except (Exception, pytest.fail.Exception) as exc:
            took = time.perf_counter() - started
            if type(exc).__module__.startswith("hypothesis"):
                if self.phase == "pool":
                    self.pool_ran -= 1  # assume() or the like: not an input that ran
                raise
            if _ORACLE is not None and not self._contradicts(example, exc):
                return None  # not decided by the outputs: the next explicit example
            if example is not None:
                if self.phase != "pool":
                    self._failed(example, blob, exc)
                    self.phase_failures += 1
                    self.last_failing = example
                else:
                    self.pool_failed += 1
                self._pooled(example, blob, exc, took, args, kwargs, hard=bool(hard))
                if self.phase == "pool":
                    return None  # recorded; Hypothesis runs the next input
            raise

    def _contradicts(self, example: str | None, exc: BaseException) -> bool:
        """With the oracle: whether this failure is decided by the issue's stated outputs
        (every call the input made was answered by them); the first one is recorded."""
        assert _ORACLE is not None
        stated = _ORACLE.decided()
        if stated is None:
            return False
        if self.contradiction is None:
            found = _seen_input(example or "", exc, _repository(self.item), _test_file(self.item))
            failure = found.get("returned") or found.get("exception") or "failed"
            self.contradiction = {
                "stated": stated.describe(),
                "example_test": stated.nodeid,
                "input": example,
                "failure": results.cap(str(failure), SEEN_CHARS),
            }
        return True

    def _pooled(
        self,
        example: str,
        blob: str | None,
        exc: BaseException,
        took: float,
        args: Any,
        kw: Any,
        *,
        hard: bool = False,
    ) -> None:
        """Put a failing input in the pool (once per value) with its runtime (this call's,
        untraced) and the repository lines it runs (a traced rerun of a copy of it)."""
        if not self.pool_on:
            return
        key = _squeezed(example)
        source = self._source(example, blob)
        if hard and source == "generated":
            source = "hard"
        known = self.pool.get(key)
        if known is not None:
            if known["source"] in ("shrinking", "shrunk") and source not in ("shrinking",):
                known["source"] = source  # the pool's drawn inputs are complete
            return
        if len(self.pool) >= self.pool_size:
            self.pool_left_out += 1
            return
        entry: dict[str, Any] = {"example": example, "exc": exc, "runtime": took}
        entry.update(source=source, replayed=blob is not None and blob in self.replaying)
        entry["lines"] = self._lines_of(blob, args, kw)
        if self.choices is not None and source in ("generated", "hard"):
            found = _choices_now()
            if found is not None:
                self.choices[key] = found
        self.pool[key] = entry

    def _source(self, example: str, blob: str | None) -> str:
        if blob is not None and blob in self.replaying:
            return "replayed"
        if _squeezed(example) in self.explicit_texts:
            return "explicit"
        if self.phase == "pool":
            return "generated"
        # A run, or the search, shrinks its first failing input: those after it are shrinks.
        return "generated" if self.phase_failures == 1 and self.phase != "shrink" else "shrinking"

    def start(self, phase: str) -> None:
        """A new pass over the test: ``phase`` as :attr:`phase` says. The input the pass
        before it ended on, when it shrank, is the ``shrunk`` one."""
        last = self.pool.get(_squeezed(self.last_failing))
        if last is not None and last["source"] == "shrinking":
            last["source"] = "shrunk"
        self.phase, self.phase_failures, self.last_failing = phase, 0, None

    def _lines_of(self, blob: str | None, args: Any, kwargs: Any) -> int | None:
        """Lines of the repository's code a fresh copy of the input runs (None: no tracer, or
        the input does not copy: its arguments do not pickle)."""
        if self.lines is None:
            self.lines = results.LineCounter(_repository(self.item), _test_file(self.item))
        if self.lines.tool is None or blob is None:
            return None
        try:
            fresh = pickle.loads(base64.b64decode(blob))
        except Exception:
            return None
        code = self.inner.__code__
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        again = [fresh.get(n, a) for n, a in zip(names, args)] + list(args[len(names) :])  # noqa: B905
        again_kw = {k: fresh.get(k, v) for k, v in kwargs.items()}

        def call() -> None:
            try:
                self.inner(*again, **again_kw)
            except (KeyboardInterrupt, results.PgsTimeLimit):
                raise
            except BaseException:  # it failed before: the lines it ran are what counts
                pass

        return self.lines.measure(call)

    def pool_inputs(self, root: str) -> list[dict[str, Any]]:
        """The pool as the report writes it (:class:`agent.record.check.PoolInput`)."""
        test_file = _test_file(self.item)
        found = []
        for entry in self.pool.values():
            explicit = entry["source"] == "explicit"
            one = _seen_input(entry["example"], entry["exc"], root, test_file)
            if explicit:
                leaves = results.leaf_exceptions(entry["exc"])
                one["category"] = _classify(leaves, True, True, test_file)[1]
            one.update(explicit=explicit, source=entry["source"])
            one.update(runtime=round(entry["runtime"], 6), lines=entry["lines"])
            if entry["replayed"]:
                one["from_replay"] = True
            found.append(one)
        return found

    def pool_note(self, pass_note: str | None) -> str | None:
        notes = [] if pass_note is None else [pass_note]
        if self.lines is not None and self.lines.tool is None:
            notes.append(f"no line coverage: {self.lines.why}")
        if self.pool_left_out:
            notes.append(f"{self.pool_left_out} more failing inputs left out (PGS_POOL_SIZE)")
        return "; ".join(notes) or None

    def _failed(self, example: str, blob: str | None, exc: BaseException) -> None:
        replayed = blob is not None and blob in self.replaying
        if not self.searching:
            if self.failures == 0:
                self.first_failure_replayed = replayed
            self.failures += 1
            self.last = example
        if replayed:
            self.replay_failed.add(example)
        if blob is not None and (example in self.replay or len(self.replay) <= 4 * self.limit + 4):
            self.replay[example] = blob
        if self.limit > 0:
            self._keep(example, exc)

    def _drawn(self, args: Any, kwargs: Any) -> dict[str, Any] | None:
        """The test's arguments Hypothesis drew (not ``self``, not pytest's fixtures)."""
        code = getattr(self.inner, "__code__", None)
        if code is None:
            return None
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = dict(zip(names, args))  # noqa: B905 (Python 3.8 in the sandbox: no strict=)
        values.update(kwargs)
        fixtures = set(getattr(self.item, "fixturenames", ()))
        return {k: v for k, v in values.items() if k != "self" and k not in fixtures}

    def _example(self, drawn: dict[str, Any]) -> str:
        shown = ", ".join(f"{name}={_short_repr(value)}" for name, value in drawn.items())
        return f"{self.inner.__code__.co_name}({shown})"

    def _keep(self, example: str, exc: BaseException) -> None:
        if example in self.inputs:
            return
        self.inputs[example] = exc
        if len(self.inputs) > self.limit:
            longest = max(self.inputs, key=lambda text: (len(text), text))
            del self.inputs[longest]

    def failing_inputs(self, root: str, reported: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The kept inputs not among ``reported`` (compared without spaces), shortest first."""
        known = {_squeezed(r.get("example")) for r in reported}
        found = []
        for example in sorted(self.inputs, key=lambda text: (len(text), text)):
            if _squeezed(example) in known:
                continue
            found.append(_seen_input(example, self.inputs[example], root, _test_file(self.item)))
        return found

    def annotate(self, inputs: list[dict[str, Any]]) -> None:
        """Give each failing input its replay form, and say which were replayed inputs."""
        for index, found in enumerate(inputs):
            example = found.get("example")
            if index == 0 and self.last is not None:
                example = self.last  # Hypothesis's text of it may differ from ours
            blob = self.replay.get(example or "")
            found["replay"] = blob
            found["from_replay"] = (example in self.replay_failed) or None


#: The issue's stated examples, in place (``PGS_ORACLE``); set when the tests are collected.
_ORACLE: oracles.Oracle | None = None
#: The module the input generator's hard inputs are drawn through (written beside the
#: properties by pgs): it lists the names drawn for the input about to run.
HARD_INPUTS_MODULE = "pgs_inputs"


def _hard_drawn() -> int:
    """1 when the input about to run drew a shared hard input (the list is then emptied)."""
    module = sys.modules.get(HARD_INPUTS_MODULE)
    drawn = getattr(module, "DRAWN", None)
    if not isinstance(drawn, list) or not drawn:
        return 0
    del drawn[:]
    return 1


def _repository(item: Any) -> str:
    """The repository's root: pytest runs from it (the rootdir may be deeper)."""
    return str(item.config.invocation_params.dir)


def _choices_now() -> bytes | None:
    """The choices Hypothesis made for the input running now, as its database stores them
    (``choices_to_bytes`` since Hypothesis 6.1xx, the raw buffer before), or None."""
    try:
        from hypothesis.control import current_build_context

        data = current_build_context().data
    except Exception:  # not inside a Hypothesis test, or a version without it
        return None
    choices = getattr(data, "choices", None)
    if choices is not None:
        try:
            from hypothesis.database import choices_to_bytes
        except ImportError:
            return None
        return bytes(choices_to_bytes(choices))
    buffer = getattr(data, "buffer", None)
    return bytes(buffer) if buffer is not None else None


def _replay_form(drawn: dict[str, Any]) -> str | None:
    """The drawn arguments as the plugin can feed them again, or None (they do not pickle,
    or are too long). Only this plugin reads it back, in the sandbox."""
    try:
        text = base64.b64encode(pickle.dumps(drawn, protocol=4)).decode("ascii")
    except Exception:  # a lambda, a generator, a local class: not replayable
        return None
    return text if len(text) <= REPLAY_CHARS else None


def _replay_inputs() -> dict[str, list[str]]:
    path = os.environ.get("PGS_REPLAY", "").strip()
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {str(k): [str(b) for b in v] for k, v in data.items()}


@contextlib.contextmanager
def _replaying(item: Any, blobs: list[str], seen: _Seen) -> Any:
    """Feed ``blobs`` to a Hypothesis test as ``@example`` cases for this run (removed after:
    a parametrised test shares its function). Put before the test's own (Hypothesis runs the
    list from its end), they run after the Tester's explicit examples: those still fail first,
    as the report has always said. Yields how many were fed (an input that no longer unpickles
    is not)."""
    function: Any = getattr(item.obj, "__func__", item.obj)
    if not blobs or _inner_function(item) is None:
        yield 0
        return
    from hypothesis import example

    before = list(getattr(function, "hypothesis_explicit_examples", ()))
    function.hypothesis_explicit_examples = []
    fed = 0
    for blob in reversed(blobs):  # the first replayed runs first
        try:
            drawn = pickle.loads(base64.b64decode(blob))
        except Exception:
            continue
        example(**drawn)(function)
        seen.replaying.add(blob)
        fed += 1
    function.hypothesis_explicit_examples = [*function.hypothesis_explicit_examples, *before]
    try:
        yield fed
    finally:
        function.hypothesis_explicit_examples = before


def _poolable(exc: BaseException) -> bool:
    """A failure worth a pool pass: not the time limit (nothing is left of it), not a skip."""
    leaves = results.leaf_exceptions(exc)
    return not any(
        results.is_timeout(leaf) or isinstance(leaf, pytest.skip.Exception) for leaf in leaves
    )


def _squeezed(example: str | None) -> str:
    return re.sub(r"\s+", "", example or "")


def _seen_input(example: str, exc: BaseException, root: str, test_file: str) -> dict[str, Any]:
    leaves = results.leaf_exceptions(exc)
    _, category = _classify(leaves, True, False, test_file)
    found: dict[str, Any] = dict.fromkeys(_INPUT_FIELDS)
    found.update(example=example, explicit=False, category=category)
    leaf = leaves[0]
    if isinstance(leaf, AssertionError) and category != "runtime_error":
        found["returned"] = results.assertion_message(str(leaf) or "assertion failed")
    elif _check_failed(leaf, test_file):
        found["returned"] = str(leaf).strip() or "failed"
    else:
        message = str(leaf).strip().splitlines()
        found["exception"] = type(leaf).__name__ + (f": {message[0]}" if message else "")
    if exc.__traceback__ is not None:
        info = pytest.ExceptionInfo.from_exc_info((type(exc), exc, exc.__traceback__))
        found["trace"] = results.trace(info, root)
    for key in ("returned", "exception"):  # up to 16 of them per test: each kept short
        if found[key]:
            found[key] = results.cap(found[key], SEEN_CHARS)
    return found


# -- an explicit example hides the minimal counterexample ----------------------------------------

#: The fields of one failing input (``agent.record.check.FailingInput``).
_INPUT_FIELDS = ("example", "explicit", "category", "returned", "exception", "trace")


def _test_file(item: Any) -> str:
    return str(getattr(item, "path", None) or item.fspath)


def _check_failed(leaf: BaseException, test_file: str | None) -> bool:
    """The test's own check failed: an assert raised in the test's file (or a helper beside
    it), or pytest's ``Failed`` (``pytest.raises`` saying DID NOT RAISE, ``pytest.fail``),
    which says the code did not do what the test expects just as an assert does; anything else
    the code (or the test) raised is a runtime error, an ``AssertionError`` raised in the
    repository's code too (the code's own sanity check broke, not the property's)."""
    if isinstance(leaf, pytest.fail.Exception):
        return True
    if not isinstance(leaf, AssertionError):
        return False
    return test_file is None or results.raised_in_test(leaf, test_file)


def _classify(
    leaves: list[BaseException], given: bool, explicit: bool, test_file: str | None
) -> tuple[str, str]:
    """(outcome, category) of a failure, by the paper's outcome classes."""
    if any(results.is_timeout(leaf) for leaf in leaves):
        return "timeout", "timeout"
    if leaves and all(_check_failed(leaf, test_file) for leaf in leaves):
        return "failed", "property_violation" if given and not explicit else "wrong_answer"
    return "failed", "runtime_error"


def _failed_on_explicit_example(exc: BaseException) -> bool:
    if any(results.is_timeout(leaf) for leaf in results.leaf_exceptions(exc)):
        return False  # the time is spent; searching on would only hit the limit again
    return results.parse_example("\n".join(results.notes(exc)))[1]


def _search_without_explicit_examples(item: Any, root: str) -> dict[str, Any] | None:
    """Run a Hypothesis test again with its explicit examples left out (Hypothesis stops at a
    failing one, never generating or shrinking): the generated, shrunk failing input, or None.

    Same settings otherwise (the pgs profile, the check's seed), so two runs agree.
    """
    try:
        from hypothesis import Phase, settings
    except ImportError:
        return None
    if type(item) is not pytest.Function:  # unittest cases report failures their own way
        return None
    function = getattr(item.obj, "__func__", item.obj)
    parent = getattr(function, "_hypothesis_internal_use_settings", None)
    if parent is None or _inner_function(item) is None:
        return None
    left_out = (Phase.explicit, Phase.reuse)
    phases = [phase for phase in parent.phases if phase not in left_out]
    if Phase.generate not in phases:
        return None
    printed = io.StringIO()
    # The validation searches harder (PGS_SEARCH_EXAMPLES): the inputs it finds are replayed
    # in every later check, and the explicit example alone is what an over-fit patch passes.
    search = int(_env_number("PGS_SEARCH_EXAMPLES", 0)) or parent.max_examples
    function._hypothesis_internal_use_settings = settings(
        parent, phases=phases, max_examples=search
    )
    seen = getattr(item, "_pgs_seen", None)
    if seen is not None:
        seen.searching = True
        seen.start("search")
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            item.runtest()
        return None  # every generated input passes: only the explicit example fails
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the test's failure, a skip, or the time limit
        return _failing_input(item, exc, printed.getvalue(), root)
    finally:
        function._hypothesis_internal_use_settings = parent


# -- the pool: every failing input, each run to the end ------------------------------------------


def _with_settings(item: Any, **changes: Any) -> Any:
    """The test's function with its settings changed for one more pass, or None when it is
    not a Hypothesis test pgs can run again (a unittest case reports its own way)."""
    if type(item) is not pytest.Function or _inner_function(item) is None:
        return None
    function = getattr(item.obj, "__func__", item.obj)
    parent = getattr(function, "_hypothesis_internal_use_settings", None)
    if parent is None:
        return None
    from hypothesis import settings

    function._pgs_parent_settings = parent
    function._hypothesis_internal_use_settings = settings(parent, **changes)
    return function


def _another_pass(item: Any, seen: _Seen, phase: str, **changes: Any) -> BaseException | None:
    """Run the test again with ``changes`` to its settings, as ``phase``; what it raised."""
    function = _with_settings(item, **changes)
    if function is None:
        return None
    seen.start(phase)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            item.runtest()
        return None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the time limit, a health check, the shrunk failure
        with contextlib.suppress(Exception):  # an exception that takes no attribute
            exc._pgs_printed = printed.getvalue()  # type: ignore[attr-defined]
        return exc
    finally:
        function._hypothesis_internal_use_settings = function._pgs_parent_settings
        seen.start("done")


def _pool_pass(item: Any, seen: _Seen) -> str | None:
    """Every input of the test run to the end: its explicit and replayed examples and the
    inputs it generates, each failure recorded in the pool and swallowed so that Hypothesis
    goes on (the same seed: the run's own inputs first, then the ones its first failure cut
    off). Returns a note when the pass did not finish."""
    from hypothesis import Phase

    parent = getattr(item.obj, "__func__", item.obj)._hypothesis_internal_use_settings
    left_out = (Phase.reuse, Phase.shrink) + ((Phase.explain,) if hasattr(Phase, "explain") else ())
    phases = [phase for phase in parent.phases if phase not in left_out]
    before = len(seen.pool)
    # No deadline: a swallowed failure's call includes the rerun that measures its lines.
    exc = _another_pass(item, seen, "pool", phases=phases, deadline=None)
    if exc is None:
        return None
    leaves = results.leaf_exceptions(exc)
    if any(results.hit_time_limit(leaf) for leaf in leaves):
        return f"the time limit cut the pool pass ({len(seen.pool) - before} inputs pooled by it)"
    message = str(leaves[0]).strip().splitlines()
    return f"the pool pass stopped: {type(leaves[0]).__name__}" + (
        f": {message[0][:200]}" if message else ""
    )


class _Given:
    """An example database that holds one input under the secondary key only: Hypothesis
    replays it and shrinks it (an input under the primary key it would take as shrunk)."""

    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    def fetch(self, key: bytes) -> Any:
        return [self.blob] if key.endswith(b".secondary") else []

    def save(self, key: bytes, value: bytes) -> None:
        pass

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        pass


def _picked(seen: _Seen) -> tuple[str, bytes] | None:
    """The generated pooled input with the fewest tokens (simple rule) and its choices."""
    chosen = [
        (results.simple_tokens(e["example"]), len(e["example"]), e["example"], key)
        for key, e in seen.pool.items()
        if e["source"] == "generated" and key in (seen.choices or {})
    ]
    if not chosen:
        return None
    *_, example, key = min(chosen)
    return example, (seen.choices or {})[key]


def _shrink_picked(item: Any, seen: _Seen, root: str) -> tuple[dict[str, Any] | None, str | None]:
    """pick-then-shrink: the fewest-token input of the pool, shrunk by Hypothesis (replayed
    from its choices, then shrunk); the failing input it shrank to, and a note."""
    picked = _picked(seen)
    if picked is None:
        return None, "pick-then-shrink: no generated input to shrink"
    try:
        from hypothesis import Phase
        from hypothesis.database import ExampleDatabase
    except ImportError:
        return None, "pick-then-shrink: this Hypothesis cannot replay an input"
    example, blob = picked

    class Given(_Given, ExampleDatabase):
        def __init__(self, blob: bytes) -> None:
            ExampleDatabase.__init__(self)
            _Given.__init__(self, blob)

    phases = [Phase.reuse, Phase.shrink]
    exc = _another_pass(item, seen, "shrink", database=Given(blob), phases=phases)
    if exc is None:
        return None, f"pick-then-shrink: {example} did not fail again"
    found = _failing_input(item, exc, getattr(exc, "_pgs_printed", ""), root)
    if found is None:
        return None, f"pick-then-shrink: shrinking {example} ended without a failing input"
    return found, f"pick-then-shrink: picked {example}"


def _failing_input(item: Any, exc: BaseException, printed: str, root: str) -> dict[str, Any] | None:
    leaves = results.leaf_exceptions(exc)
    if any(
        isinstance(leaf, pytest.skip.Exception) or results.hit_time_limit(leaf) for leaf in leaves
    ):
        return None  # skipped, or the time limit cut the search: nothing shrunk to show
    example, explicit = results.parse_example("\n".join(results.notes(exc)) + "\n" + printed)
    if example is None or explicit:
        return None  # not a failing input (a health check, an unsatisfiable strategy...)
    _, category = _classify(leaves, True, False, _test_file(item))
    found: dict[str, Any] = dict.fromkeys(_INPUT_FIELDS)
    found.update(example=example, explicit=False, category=category)
    assert exc.__traceback__ is not None  # it was raised
    info = pytest.ExceptionInfo.from_exc_info((type(exc), exc, exc.__traceback__))
    leaf = leaves[0]
    if isinstance(leaf, AssertionError) and category not in ("timeout", "runtime_error"):
        found["returned"] = results.assertion_message(str(leaf) or "assertion failed")
    elif _check_failed(leaf, _test_file(item)) and category != "timeout":
        found["returned"] = str(leaf).strip() or "failed"
    else:
        message = str(leaf).strip().splitlines()
        found["exception"] = type(leaf).__name__ + (f": {message[0]}" if message else "")
    found["trace"] = results.trace(info, root)
    return found


class PgsReporter:
    """Collects one result per test (and each collection error) and writes the report."""

    def __init__(self, config: Any, path: str) -> None:
        self.config = config
        self.path = path
        self.root = str(config.rootpath) if hasattr(config, "rootpath") else str(config.rootdir)
        #: The repository: pytest runs from its top folder (the rootdir may be deeper).
        self.repository = str(config.invocation_params.dir)
        self.results: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.alarms: dict[str, _Alarm] = {}
        #: node id → the failing input found by generating without the explicit examples.
        self.generated: dict[str, dict[str, Any]] = {}
        self.output_chars = int(_env_number("PGS_OUTPUT_CHARS", 4000))
        #: node id → the failing inputs its search saw (beyond the one Hypothesis reports).
        self.seen: dict[str, _Seen] = {}
        self.keep_inputs = int(_env_number("PGS_KEEP_INPUTS", DEFAULT_KEEP_INPUTS))
        #: node id -> the inputs to replay (``PGS_REPLAY``); node id -> how many were fed.
        self.replay = _replay_inputs()
        self.replayed: dict[str, int] = {}
        self.pool_on = _pool_on()
        #: node id -> what the pool pass noted; node id -> the picked input, shrunk.
        self.pool_notes: dict[str, str | None] = {}
        self.shrunk: dict[str, dict[str, Any]] = {}
        self.oracle: oracles.Oracle | None = None
        self.started = time.monotonic()

    # pytest hooks ------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any) -> Any:
        alarm = _Alarm(item, _env_number("PGS_TEST_TIMEOUT", 20))
        self.alarms[item.nodeid] = alarm
        _seeded(item)
        seen = self.seen[item.nodeid] = _Seen(item, self.keep_inputs)
        item._pgs_seen = seen
        blobs = self.replay.get(item.nodeid, [])
        with alarm, seen, _replaying(item, blobs, seen) as fed:
            if blobs:
                self.replayed[item.nodeid] = fed
            outcome = yield
            excinfo = outcome.excinfo
            if _ORACLE is not None:  # only the explicit examples, and no pool: see the oracle
                return
            if excinfo is not None and _failed_on_explicit_example(excinfo[1]):
                # Within the same time limit: what the explicit example left of it.
                found = _search_without_explicit_examples(item, self.root)
                if found is not None:
                    self.generated[item.nodeid] = found
            if excinfo is not None and self.pool_on and _poolable(excinfo[1]):
                self._pool(item, seen)

    def _pool(self, item: Any, seen: _Seen) -> None:
        """The pool pass (and, pick-then-shrink, the shrink of the input it picks), within
        what is left of the test's time limit; what did not finish is noted."""
        function = getattr(item.obj, "__func__", item.obj)
        if type(item) is not pytest.Function or _inner_function(item) is None:
            return
        if getattr(function, "_hypothesis_internal_use_settings", None) is None:
            return
        notes = [_pool_pass(item, seen)]
        if seen.choices is not None and notes[0] is None:
            found, note = _shrink_picked(item, seen, self.root)
            notes.append(note)
            if found is not None:
                self.shrunk[item.nodeid] = found
        self.pool_notes[item.nodeid] = "; ".join(n for n in notes if n) or None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        report = outcome.get_result()
        try:
            self._record(item, call, report)
        except Exception as e:  # never lose the run over the report
            self.errors.append(f"{item.nodeid}: the pgs plugin failed to record it: {e!r}")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        """With ``PGS_ORACLE``: the issue's stated examples put in place of the callables they
        name, once every test module is imported (:mod:`pgs_pytest_plugin_oracle`)."""
        global _ORACLE
        if not oracles.enabled():
            return
        oracle = oracles.Oracle(oracles.stated_examples(items))
        oracle.install()
        self.oracle = _ORACLE = oracle

    def pytest_collectreport(self, report: Any) -> None:
        if not report.failed:
            return
        text = results.cap(str(report.longreprtext).strip(), self.output_chars)
        nodeid = report.nodeid or "<session>"
        self.errors.append(f"{nodeid}: {text}")
        last = text.strip().splitlines()[-1] if text.strip() else "collection failed"
        self.results[nodeid] = {
            "nodeid": nodeid,
            "kind": "repo",
            "rule": None,
            "outcome": "error",
            "category": "runtime_error",
            "exception": re.sub(r"^E\s+", "", last),
            "output": text,
        }

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        data: dict[str, Any] = {
            "results": list(self.results.values()),
            "errors": self.errors,
            "exit_code": int(exitstatus),
            "duration": round(time.monotonic() - self.started, 3),
            "imported": results.repository_modules(self.repository),
        }
        if self.oracle is not None:
            data["oracle"] = {
                "stated": [s.describe() for s in self.oracle.stated],
                "installed": self.oracle.installed,
                "unresolved": self.oracle.unresolved,
            }
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self.path)

    # results -----------------------------------------------------------------------------------

    def _record(self, item: Any, call: Any, report: Any) -> None:
        nodeid = item.nodeid
        result = self.results.get(nodeid)
        if result is None:
            kind, rule = results.kind_and_rule(item)
            result = {"nodeid": nodeid, "kind": kind, "rule": rule, "duration": 0.0}
            result.update(outcome="passed", category="pass")
            self.results[nodeid] = result
        result["duration"] = round(result["duration"] + float(report.duration or 0.0), 3)
        if report.skipped:
            result.update(outcome="skipped", category="pass")
        if nodeid in self.replayed:
            result["replayed"] = self.replayed[nodeid]
        if report.when == "call":
            seen = self.seen.get(nodeid)
            if seen is not None and seen.hard_inputs:
                result["hard_inputs"] = seen.hard_inputs
        if not report.failed:
            if report.when == "call":
                self.seen.pop(nodeid, None)
            return
        if report.when == "call":
            self._failure(item, call, report, result)
        elif result["outcome"] in ("passed", "skipped"):  # setup or teardown error
            result.update(outcome="error", category="runtime_error")
            self._describe(item, call, report, result)

    def _failure(self, item: Any, call: Any, report: Any, result: dict[str, Any]) -> None:
        excinfo = call.excinfo
        leaves = results.leaf_exceptions(excinfo.value) if excinfo is not None else []
        text = "\n".join(results.notes(excinfo.value)) if excinfo is not None else ""
        sections = "\n".join(content for _, content in report.sections)
        example, explicit = results.parse_example(f"{text}\n{sections}\n{report.longreprtext}")
        alarm = self.alarms.get(item.nodeid)
        seen = self.seen.get(item.nodeid)
        replayed = bool(explicit and seen is not None and seen.first_failure_replayed)
        if replayed:  # a replayed input is fed as an @example, but the Tester did not write it
            explicit = False
        given = _inner_function(item) is not None
        outcome, category = _classify(leaves, given, explicit, _test_file(item))
        if category == "timeout" and example is None and alarm is not None:
            example = alarm.example
        result.update(outcome=outcome, category=category, example=example, explicit=explicit)
        self._describe(item, call, report, result)
        inputs = [{key: result.get(key) for key in _INPUT_FIELDS}]
        generated = self.generated.pop(item.nodeid, None)
        if generated is not None and generated["example"] != example:
            inputs.append(generated)
        shrunk = self.shrunk.pop(item.nodeid, None)
        known = {_squeezed(i["example"]) for i in inputs}
        if shrunk is not None and _squeezed(shrunk["example"]) not in known:
            inputs.insert(1, shrunk)  # the picked input, shrunk (pick-then-shrink)
        seen = self.seen.pop(item.nodeid, None)
        if seen is not None:
            inputs.extend(seen.failing_inputs(self.root, inputs))
            seen.annotate(inputs)
            if replayed:
                inputs[0]["from_replay"] = True
            if seen.pool:
                result["pool"] = seen.pool_inputs(self.root)
                result["pool_lines_by"] = seen.lines.tool if seen.lines is not None else None
            if seen.pool_ran:
                result["pool_ran"], result["pool_failed"] = seen.pool_ran, seen.pool_failed
            if seen.contradiction is not None:
                result["contradicts"] = seen.contradiction
            note = seen.pool_note(self.pool_notes.pop(item.nodeid, None))
            if note:
                result["pool_note"] = note
        result["examples"] = inputs

    def _describe(self, item: Any, call: Any, report: Any, result: dict[str, Any]) -> None:
        excinfo = call.excinfo
        if excinfo is not None:
            leaf = results.leaf_exceptions(excinfo.value)[0]
            own = result["category"] not in ("timeout", "runtime_error")
            if isinstance(leaf, AssertionError) and own:
                result["returned"] = results.returned(report)
            elif _check_failed(leaf, _test_file(item)) and own:
                result["returned"] = str(leaf).strip() or "failed"
            else:
                message = str(leaf).strip().splitlines()
                result["exception"] = type(leaf).__name__ + (f": {message[0]}" if message else "")
            result["trace"] = results.trace(excinfo, self.root)
            test_file = _test_file(item)
            result["origin"] = results.origin(leaf, test_file, self.repository)
        result["output"] = results.cap(str(report.longreprtext), self.output_chars)


@pytest.hookimpl(trylast=True)  # after Hypothesis's own plugin loads a profile
def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "pgs_issue(rule): a PGS issue property; must fail on the original code"
    )
    config.addinivalue_line(
        "markers", "pgs_regression(rule): a PGS regression property; must pass on the original"
    )
    config.addinivalue_line(
        "markers",
        "pgs_states(call, args, kwargs, returns | raises): an example the issue states, as data",
    )
    _hypothesis_profile()
    path = os.environ.get(REPORT_ENV)
    if path and not hasattr(config, "_pgs_reporter"):
        reporter = PgsReporter(config, path)
        config._pgs_reporter = reporter
        config.pluginmanager.register(reporter, "pgs_reporter")
