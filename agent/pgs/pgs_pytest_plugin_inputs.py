"""The part of ``pgs_pytest_plugin`` that sees a Hypothesis test's inputs: :class:`Seen` wraps
the test's inner function (``f.hypothesis.inner_test``) and keeps every input it failed on,
their replay forms, the counterexample pool (each distinct failing input with its source,
runtime and lines), the pool pass's counts, the draws of the shared hard inputs and, with the
oracle, the first contradiction. Also here: the settings every part reads from the environment,
and feeding replayed inputs as explicit examples (:func:`replaying`).

Runs in the sandbox on the repository's Python: the standard library, pytest and Hypothesis
only, Python 3.8, no import of our package.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import pickle
import re
import time
from typing import TYPE_CHECKING, Any

import pytest

# On the host these are agent.pgs.<name>; in the sandbox top-level modules beside this one (the
# launcher loads them by path, runner.install_plugin copies them).
if TYPE_CHECKING or __package__:
    from . import pgs_pytest_plugin_hard as hard_inputs
    from . import pgs_pytest_plugin_oracle as oracles
    from . import pgs_pytest_plugin_results as results
else:
    import pgs_pytest_plugin_hard as hard_inputs
    import pgs_pytest_plugin_oracle as oracles
    import pgs_pytest_plugin_results as results


#: Distinct failing inputs kept per test beyond the reported one (the shortest are kept).
DEFAULT_KEEP_INPUTS = 16


#: Distinct failing inputs pooled per test, with their measures (``PGS_POOL_SIZE``).
DEFAULT_POOL_SIZE = 256


#: ``PGS_SHRINK_ORDER``: Hypothesis shrinks its first failing input, then the host picks the
#: fewest-token input of the pool (shrunk ones too); or the fewest-token input of the pool
#: (the simple rule: the plugin has no tokenizer) is picked first, then shrunk.
SHRINK_ORDERS = ("shrink-then-pick", "pick-then-shrink")


#: Longest replay form kept of one input (base64 characters); a longer input is not replayed.
REPLAY_CHARS = 8000


def env_number(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value == "none":
        return 0.0
    return float(value)


def pool_on() -> bool:
    return bool(env_number("PGS_POOL", 1))


def pool_tests() -> bool:
    """``PGS_POOL_TESTS=1``: a failing plain (non-Hypothesis) test pools one input, itself."""
    return pool_on() and bool(env_number("PGS_POOL_TESTS", 0))


def pick_then_shrink() -> bool:
    order = os.environ.get("PGS_SHRINK_ORDER", "").strip() or SHRINK_ORDERS[0]
    if order not in SHRINK_ORDERS:
        raise ValueError(f"PGS_SHRINK_ORDER={order!r}: use {' or '.join(SHRINK_ORDERS)}")
    return order == "pick-then-shrink" and pool_on() and bool(env_number("PGS_SHRINK", 1))


def inner_function(item: Any) -> Any:
    obj = getattr(item, "obj", None)
    hypothesis = getattr(obj, "hypothesis", None)
    inner = getattr(hypothesis, "inner_test", None)
    return getattr(inner, "_pgs_wraps", inner)  # the test's own function under Seen's wrapper


def short_repr(value: Any, limit: int = 1000) -> str:
    try:
        text = repr(value)
    except Exception as e:  # a broken __repr__ must not hide the timeout
        text = f"<unprintable {type(value).__name__}: {e}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Seen:
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
        self.pool_size = int(env_number("PGS_POOL_SIZE", DEFAULT_POOL_SIZE))
        self.pool_on = pool_on()
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

    def __enter__(self) -> Seen:
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
                    self.explicit_texts.add(squeezed(self._example(values)))
            if pick_then_shrink():
                self.choices = {}
        return self

    def __exit__(self, *exc: object) -> None:
        if self.inner is not None:
            self.handle.inner_test = self.inner

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        drawn = self._drawn(args, kwargs)
        example = None if drawn is None else self._example(drawn)
        blob = None if drawn is None else replay_form(drawn)
        hard = hard_inputs.drawn()
        self.hard_inputs += hard
        if self.phase == "pool":
            self.pool_ran += 1
        if ORACLE is not None:
            ORACLE.start()
        started = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        except (Exception, pytest.fail.Exception) as exc:
            took = time.perf_counter() - started
            if type(exc).__module__.startswith("hypothesis"):
                if self.phase == "pool":
                    self.pool_ran -= 1  # assume() or the like: not an input that ran
                raise
            if ORACLE is not None and not self._contradicts(example, exc):
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
        assert ORACLE is not None
        stated = ORACLE.decided()
        if stated is None:
            return False
        if self.contradiction is None:
            found = results.seen_input(
                example or "", exc, repository(self.item), results.item_file(self.item)
            )
            failure = found.get("returned") or found.get("exception") or "failed"
            self.contradiction = {
                "stated": stated.describe(),
                "example_test": stated.nodeid,
                "input": example,
                "failure": results.cap(str(failure), results.SEEN_CHARS),
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
        key = squeezed(example)
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
            found = choices_now()
            if found is not None:
                self.choices[key] = found
        self.pool[key] = entry

    def _source(self, example: str, blob: str | None) -> str:
        if blob is not None and blob in self.replaying:
            return "replayed"
        if squeezed(example) in self.explicit_texts:
            return "explicit"
        if self.phase == "pool":
            return "generated"
        # A run, or the search, shrinks its first failing input: those after it are shrinks.
        return "generated" if self.phase_failures == 1 and self.phase != "shrink" else "shrinking"

    def start(self, phase: str) -> None:
        """A new pass over the test: ``phase`` as :attr:`phase` says. The input the pass
        before it ended on, when it shrank, is the ``shrunk`` one."""
        last = self.pool.get(squeezed(self.last_failing))
        if last is not None and last["source"] == "shrinking":
            last["source"] = "shrunk"
        self.phase, self.phase_failures, self.last_failing = phase, 0, None

    def _lines_of(self, blob: str | None, args: Any, kwargs: Any) -> int | None:
        """Lines of the repository's code a fresh copy of the input runs (None: no tracer, or
        the input does not copy: its arguments do not pickle)."""
        if self.lines is None:
            self.lines = results.LineCounter(repository(self.item), results.item_file(self.item))
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
        test_file = results.item_file(self.item)
        found = []
        for entry in self.pool.values():
            explicit = entry["source"] == "explicit"
            one = results.seen_input(entry["example"], entry["exc"], root, test_file)
            if explicit or entry["source"] == "test":  # classified as the test's own result
                leaves = results.leaf_exceptions(entry["exc"])
                one["category"] = results.classify(leaves, True, True, test_file)[1]
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
        shown = ", ".join(f"{name}={short_repr(value)}" for name, value in drawn.items())
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
        known = {squeezed(r.get("example")) for r in reported}
        found = []
        for example in sorted(self.inputs, key=lambda text: (len(text), text)):
            if squeezed(example) in known:
                continue
            found.append(
                results.seen_input(
                    example, self.inputs[example], root, results.item_file(self.item)
                )
            )
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
ORACLE: oracles.Oracle | None = None


def repository(item: Any) -> str:
    """The repository's root: pytest runs from it (the rootdir may be deeper)."""
    return str(item.config.invocation_params.dir)


def choices_now() -> bytes | None:
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


def replay_form(drawn: dict[str, Any]) -> str | None:
    """The drawn arguments as the plugin can feed them again, or None (they do not pickle,
    or are too long). Only this plugin reads it back, in the sandbox."""
    try:
        text = base64.b64encode(pickle.dumps(drawn, protocol=4)).decode("ascii")
    except Exception:  # a lambda, a generator, a local class: not replayable
        return None
    return text if len(text) <= REPLAY_CHARS else None


def replay_inputs() -> dict[str, list[str]]:
    path = os.environ.get("PGS_REPLAY", "").strip()
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {str(k): [str(b) for b in v] for k, v in data.items()}


@contextlib.contextmanager
def replaying(item: Any, blobs: list[str], seen: Seen) -> Any:
    """Feed ``blobs`` to a Hypothesis test as ``@example`` cases for this run (removed after:
    a parametrised test shares its function). Put before the test's own (Hypothesis runs the
    list from its end), they run after the Tester's explicit examples: those still fail first,
    as the report has always said. Yields how many were fed (an input that no longer unpickles
    is not)."""
    function: Any = getattr(item.obj, "__func__", item.obj)
    if not blobs or inner_function(item) is None:
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


def poolable(exc: BaseException) -> bool:
    """A failure worth a pool pass: not the time limit (nothing is left of it), not a skip."""
    leaves = results.leaf_exceptions(exc)
    return not any(
        results.is_timeout(leaf) or isinstance(leaf, pytest.skip.Exception) for leaf in leaves
    )


def squeezed(example: str | None) -> str:
    return re.sub(r"\s+", "", example or "")
