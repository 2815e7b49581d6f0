"""pytest plugin that runs inside the sandbox and writes what happened as one JSON report.

It runs on the REPOSITORY's Python, so it uses the standard library, pytest (>= 7) and
Hypothesis only, and stays compatible with Python 3.8. The launcher beside it,
``pgs_pytest_plugin_start.py``, loads it by path and starts pytest with it
(:func:`agent.pgs.runner.install_plugin` copies the files; :func:`agent.pgs.runner.run_pytest`
does the rest). Its companion modules beside it: ``pgs_pytest_plugin_results.py`` turns
pytest's reports into results, ``pgs_pytest_plugin_inputs.py`` sees each Hypothesis test's
inputs (the kept failing inputs, replay forms, the pool), ``pgs_pytest_plugin_passes.py`` runs
a failed test again (the search, the pool pass, pick-then-shrink's shrink) and
``pgs_pytest_plugin_oracle.py`` answers the issue's stated examples (``PGS_ORACLE``).

What it does:

- registers the markers ``pgs_issue(rule)`` and ``pgs_regression(rule)``: the Tester marks
  each property with one, the rule in one sentence; and ``pgs_states(...)``: an issue example
  stated as data (the oracle's, ``PGS_ORACLE``: only explicit examples run, the stated calls
  answered as stated, each test's first contradiction recorded as ``contradicts``);
- counts, per property, the inputs its pool pass ran and those that failed (``pool_ran``,
  ``pool_failed``), and the inputs that drew the input generator's shared hard inputs
  (``hard_inputs``; pool source ``hard``);
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
distinct inputs per test), ``PGS_POOL_TESTS`` (0; ``1``: a failing plain test pools one input,
itself: its node id, runtime and lines), ``PGS_SHRINK_ORDER`` (``shrink-then-pick``, the default, or
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

import json
import os
import re
import signal
import time
import zlib
from typing import TYPE_CHECKING, Any

import pytest

# On the host these are agent.pgs.<name>; in the sandbox top-level modules beside this one (the
# launcher loads them by path, runner.install_plugin copies them).
if TYPE_CHECKING or __package__:
    from . import pgs_pytest_plugin_hard as hard_inputs
    from . import pgs_pytest_plugin_inputs as inputs
    from . import pgs_pytest_plugin_oracle as oracles
    from . import pgs_pytest_plugin_passes as passes
    from . import pgs_pytest_plugin_results as results
else:
    import pgs_pytest_plugin_hard as hard_inputs
    import pgs_pytest_plugin_inputs as inputs
    import pgs_pytest_plugin_oracle as oracles
    import pgs_pytest_plugin_passes as passes
    import pgs_pytest_plugin_results as results

REPORT_ENV = "PGS_REPORT"


#: Inputs Hypothesis generates per property (the PGS paper: 64 test inputs per round).
DEFAULT_MAX_EXAMPLES = 64


def _hypothesis_profile() -> None:
    try:
        from hypothesis import HealthCheck, Phase, settings
    except ImportError:  # a repository without Hypothesis still gets its tests run
        return
    deadline_ms = inputs.env_number("PGS_DEADLINE_MS", 0)
    # The explain phase traces every line (before Python 3.12): a time limit then fires in
    # the tracer at a different line each run, and its notes cost tokens for little. Without
    # shrinking (PGS_SHRINK=0, the ablation without minimisation) a failure is reported with
    # the first failing input found, as generated.
    left_out = {"explain"} if inputs.env_number("PGS_SHRINK", 1) else {"explain", "shrink"}
    if inputs.pick_then_shrink():
        left_out.add("shrink")  # the picked input is shrunk after the pool pass
    if oracles.enabled():  # the issue's own cases are the explicit examples: only those run
        left_out.update(phase.name for phase in Phase if phase.name != "explicit")
    options: dict[str, Any] = {
        # Without PGS_SEED every run draws the same inputs (derived from each test's source);
        # with it, _seeded() gives every Hypothesis test its seed, which Hypothesis puts first.
        "derandomize": True,
        "database": None,
        "max_examples": int(inputs.env_number("PGS_MAX_EXAMPLES", DEFAULT_MAX_EXAMPLES)),
        "deadline": deadline_ms if deadline_ms > 0 else None,
        "print_blob": False,
        "report_multiple_bugs": False,
        # Timing-based health checks would make two runs disagree.
        "suppress_health_check": [HealthCheck.too_slow],
        "phases": [phase for phase in Phase if phase.name not in left_out],
    }
    settings.register_profile("pgs", **options)
    settings.load_profile("pgs")


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


def _current_input(item: Any, frame: Any) -> str | None:
    """``test_f(x=...)`` for the Hypothesis input the interrupted test was running, if any."""
    inner = inputs.inner_function(item)
    code = getattr(inner, "__code__", None)
    while frame is not None and code is not None:
        if frame.f_code is code:
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            fixtures = set(getattr(item, "fixturenames", ()))
            args = ", ".join(
                f"{name}={inputs.short_repr(frame.f_locals.get(name))}"
                for name in names
                if name != "self" and name not in fixtures
            )
            return f"{code.co_name}({args})"
        frame = frame.f_back
    return None


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
    if seed is None or inputs.inner_function(item) is None:
        return
    try:
        from hypothesis import seed as hypothesis_seed
    except ImportError:
        return
    hypothesis_seed(seed)(getattr(item.obj, "__func__", item.obj))


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
        self.output_chars = int(inputs.env_number("PGS_OUTPUT_CHARS", 4000))
        #: node id → the failing inputs its search saw (beyond the one Hypothesis reports).
        self.seen: dict[str, inputs.Seen] = {}
        self.keep_inputs = int(inputs.env_number("PGS_KEEP_INPUTS", inputs.DEFAULT_KEEP_INPUTS))
        #: node id -> the inputs to replay (``PGS_REPLAY``); node id -> how many were fed.
        self.replay = inputs.replay_inputs()
        self.replayed: dict[str, int] = {}
        self.pool_on = inputs.pool_on()
        self.pool_tests = inputs.pool_tests()
        #: node id -> what the pool pass noted; node id -> the picked input, shrunk.
        self.pool_notes: dict[str, str | None] = {}
        self.shrunk: dict[str, dict[str, Any]] = {}
        self.oracle: oracles.Oracle | None = None
        self.started = time.monotonic()

    # pytest hooks ------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any) -> Any:
        alarm = _Alarm(item, inputs.env_number("PGS_TEST_TIMEOUT", 20))
        self.alarms[item.nodeid] = alarm
        _seeded(item)
        seen = self.seen[item.nodeid] = inputs.Seen(item, self.keep_inputs)
        item._pgs_seen = seen
        blobs = self.replay.get(item.nodeid, [])
        with alarm, seen, inputs.replaying(item, blobs, seen) as fed:
            if blobs:
                self.replayed[item.nodeid] = fed
            started = time.perf_counter()
            outcome = yield
            took = time.perf_counter() - started
            excinfo = outcome.excinfo
            if inputs.ORACLE is not None:  # only the explicit examples, and no pool: see the oracle
                return
            if excinfo is not None and passes.failed_on_explicit_example(excinfo[1]):
                # Within the same time limit: what the explicit example left of it.
                found = passes.search_without_explicit_examples(item, self.root)
                if found is not None:
                    self.generated[item.nodeid] = found
            if excinfo is not None and self.pool_on and inputs.poolable(excinfo[1]):
                if inputs.inner_function(item) is not None:
                    self._pool(item, seen)
                elif self.pool_tests:
                    self.pool_notes[item.nodeid] = passes.pool_test(item, seen, excinfo[1], took)

    def _pool(self, item: Any, seen: inputs.Seen) -> None:
        """The pool pass (and, pick-then-shrink, the shrink of the input it picks), within
        what is left of the test's time limit; what did not finish is noted."""
        function = getattr(item.obj, "__func__", item.obj)
        if type(item) is not pytest.Function or inputs.inner_function(item) is None:
            return
        if getattr(function, "_hypothesis_internal_use_settings", None) is None:
            return
        notes = [passes.pool_pass(item, seen)]
        if seen.choices is not None and notes[0] is None:
            found, note = passes.shrink_picked(item, seen, self.root)
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
        if not oracles.enabled():
            return
        oracle = oracles.Oracle(oracles.stated_examples(items))
        oracle.install()
        self.oracle = inputs.ORACLE = oracle

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
        self.errors += hard_inputs.foreign(self.repository)
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
        given = inputs.inner_function(item) is not None
        outcome, category = results.classify(leaves, given, explicit, results.item_file(item))
        if category == "timeout" and example is None and alarm is not None:
            example = alarm.example
        result.update(outcome=outcome, category=category, example=example, explicit=explicit)
        self._describe(item, call, report, result)
        failing = [{key: result.get(key) for key in results.INPUT_FIELDS}]
        generated = self.generated.pop(item.nodeid, None)
        if generated is not None and generated["example"] != example:
            failing.append(generated)
        shrunk = self.shrunk.pop(item.nodeid, None)
        known = {inputs.squeezed(i["example"]) for i in failing}
        if shrunk is not None and inputs.squeezed(shrunk["example"]) not in known:
            failing.insert(1, shrunk)  # the picked input, shrunk (pick-then-shrink)
        seen = self.seen.pop(item.nodeid, None)
        # A unittest case raises nothing in its call (pytest reports its failure after):
        # pooled here, with pytest's duration of the call and no rerun for its lines.
        plain = seen is not None and seen.inner is None and not seen.pool
        if plain and self.pool_tests and excinfo is not None and inputs.poolable(excinfo.value):
            assert seen is not None
            self.pool_notes[item.nodeid] = passes.pool_test(
                item, seen, excinfo.value, float(report.duration or 0.0)
            )
        if seen is not None:
            failing.extend(seen.failing_inputs(self.root, failing))
            seen.annotate(failing)
            if replayed:
                failing[0]["from_replay"] = True
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
        result["examples"] = failing

    def _describe(self, item: Any, call: Any, report: Any, result: dict[str, Any]) -> None:
        excinfo = call.excinfo
        if excinfo is not None:
            leaf = results.leaf_exceptions(excinfo.value)[0]
            own = result["category"] not in ("timeout", "runtime_error")
            if isinstance(leaf, AssertionError) and own:
                result["returned"] = results.returned(report)
            elif results.check_failed(leaf, results.item_file(item)) and own:
                result["returned"] = str(leaf).strip() or "failed"
            else:
                message = str(leaf).strip().splitlines()
                result["exception"] = type(leaf).__name__ + (f": {message[0]}" if message else "")
            result["trace"] = results.trace(excinfo, self.root)
            test_file = results.item_file(item)
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
