"""The part of ``pgs_pytest_plugin`` that runs a test again after it failed: the search
without its explicit examples (:func:`search_without_explicit_examples`), the pool pass that
runs every input to the end (:func:`pool_pass`), and pick-then-shrink's shrink of the
fewest-token input (:func:`shrink_picked`); and what a failing input of such a pass was
(:func:`failing_input`). With ``PGS_POOL_TESTS=1``, a failing plain test is rerun once under
the line counter to pool it as one input (:func:`pool_test`).

Runs in the sandbox on the repository's Python: the standard library, pytest and Hypothesis
only, Python 3.8, no import of our package.
"""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING, Any

import pytest

# On the host these are agent.pgs.<name>; in the sandbox top-level modules beside this one (the
# launcher loads them by path, runner.install_plugin copies them).
if TYPE_CHECKING or __package__:
    from . import pgs_pytest_plugin_inputs as inputs
    from . import pgs_pytest_plugin_results as results
else:
    import pgs_pytest_plugin_inputs as inputs
    import pgs_pytest_plugin_results as results


def failed_on_explicit_example(exc: BaseException) -> bool:
    if any(results.is_timeout(leaf) for leaf in results.leaf_exceptions(exc)):
        return False  # the time is spent; searching on would only hit the limit again
    return results.parse_example("\n".join(results.notes(exc)))[1]


def search_without_explicit_examples(item: Any, root: str) -> dict[str, Any] | None:
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
    if parent is None or inputs.inner_function(item) is None:
        return None
    left_out = (Phase.explicit, Phase.reuse)
    phases = [phase for phase in parent.phases if phase not in left_out]
    if Phase.generate not in phases:
        return None
    printed = io.StringIO()
    # The validation searches harder (PGS_SEARCH_EXAMPLES): the inputs it finds are replayed
    # in every later check, and the explicit example alone is what an over-fit patch passes.
    search = int(inputs.env_number("PGS_SEARCH_EXAMPLES", 0)) or parent.max_examples
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
        return failing_input(item, exc, printed.getvalue(), root)
    finally:
        function._hypothesis_internal_use_settings = parent


def with_settings(item: Any, **changes: Any) -> Any:
    """The test's function with its settings changed for one more pass, or None when it is
    not a Hypothesis test pgs can run again (a unittest case reports its own way)."""
    if type(item) is not pytest.Function or inputs.inner_function(item) is None:
        return None
    function = getattr(item.obj, "__func__", item.obj)
    parent = getattr(function, "_hypothesis_internal_use_settings", None)
    if parent is None:
        return None
    from hypothesis import settings

    function._pgs_parent_settings = parent
    function._hypothesis_internal_use_settings = settings(parent, **changes)
    return function


def another_pass(item: Any, seen: inputs.Seen, phase: str, **changes: Any) -> BaseException | None:
    """Run the test again with ``changes`` to its settings, as ``phase``; what it raised."""
    function = with_settings(item, **changes)
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


def pool_pass(item: Any, seen: inputs.Seen) -> str | None:
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
    exc = another_pass(item, seen, "pool", phases=phases, deadline=None)
    if exc is None:
        return None
    leaves = results.leaf_exceptions(exc)
    if any(results.hit_time_limit(leaf) for leaf in leaves):
        return f"the time limit cut the pool pass ({len(seen.pool) - before} inputs pooled by it)"
    message = str(leaves[0]).strip().splitlines()
    return f"the pool pass stopped: {type(leaves[0]).__name__}" + (
        f": {message[0][:200]}" if message else ""
    )


class OneInput:
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


def pick(seen: inputs.Seen) -> tuple[str, bytes] | None:
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


def shrink_picked(
    item: Any, seen: inputs.Seen, root: str
) -> tuple[dict[str, Any] | None, str | None]:
    """pick-then-shrink: the fewest-token input of the pool, shrunk by Hypothesis (replayed
    from its choices, then shrunk); the failing input it shrank to, and a note."""
    picked = pick(seen)
    if picked is None:
        return None, "pick-then-shrink: no generated input to shrink"
    try:
        from hypothesis import Phase
        from hypothesis.database import ExampleDatabase
    except ImportError:
        return None, "pick-then-shrink: this Hypothesis cannot replay an input"
    example, blob = picked

    class Given(OneInput, ExampleDatabase):
        def __init__(self, blob: bytes) -> None:
            ExampleDatabase.__init__(self)
            OneInput.__init__(self, blob)

    phases = [Phase.reuse, Phase.shrink]
    exc = another_pass(item, seen, "shrink", database=Given(blob), phases=phases)
    if exc is None:
        return None, f"pick-then-shrink: {example} did not fail again"
    found = failing_input(item, exc, getattr(exc, "_pgs_printed", ""), root)
    if found is None:
        return None, f"pick-then-shrink: shrinking {example} ended without a failing input"
    return found, f"pick-then-shrink: picked {example}"


def failing_input(item: Any, exc: BaseException, printed: str, root: str) -> dict[str, Any] | None:
    leaves = results.leaf_exceptions(exc)
    if any(
        isinstance(leaf, pytest.skip.Exception) or results.hit_time_limit(leaf) for leaf in leaves
    ):
        return None  # skipped, or the time limit cut the search: nothing shrunk to show
    example, explicit = results.parse_example("\n".join(results.notes(exc)) + "\n" + printed)
    if example is None or explicit:
        return None  # not a failing input (a health check, an unsatisfiable strategy...)
    _, category = results.classify(leaves, True, False, results.item_file(item))
    found: dict[str, Any] = dict.fromkeys(results.INPUT_FIELDS)
    found.update(example=example, explicit=False, category=category)
    assert exc.__traceback__ is not None  # it was raised
    info = results.exception_info(exc)
    leaf = leaves[0]
    if isinstance(leaf, AssertionError) and category not in ("timeout", "runtime_error"):
        found["returned"] = results.assertion_message(str(leaf) or "assertion failed")
    elif results.check_failed(leaf, results.item_file(item)) and category != "timeout":
        found["returned"] = str(leaf).strip() or "failed"
    else:
        message = str(leaf).strip().splitlines()
        found["exception"] = type(leaf).__name__ + (f": {message[0]}" if message else "")
    found["trace"] = results.trace(info, root)
    return found


def pool_test(item: Any, seen: inputs.Seen, exc: BaseException, took: float) -> str | None:
    """A failing plain (non-Hypothesis) test as a pool of one input (source ``test``): the
    test itself, shown by its node id (the host counts the node id's tokens, as it measures a
    failure without an example), the run's runtime (untraced), and the repository lines a
    rerun of the test runs, under the same line counter as a Hypothesis input's. Returns a note
    when the lines could not be measured."""
    if inputs.squeezed(item.nodeid) in seen.pool:
        return None
    entry: dict[str, Any] = {"example": item.nodeid, "exc": exc, "runtime": took}
    entry.update(source="test", replayed=False, lines=None)
    seen.pool[inputs.squeezed(item.nodeid)] = entry
    if seen.lines is None:
        seen.lines = results.LineCounter(inputs.repository(item), results.item_file(item))
    if seen.lines.tool is None:
        return None  # no tracer: pool_note says why
    if type(item) is not pytest.Function:
        return "a unittest case is not rerun: no line coverage"

    def call() -> None:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                item.runtest()
        except (KeyboardInterrupt, results.PgsTimeLimit):
            raise
        except BaseException:  # it failed before: the lines it ran are what counts
            pass

    try:
        entry["lines"] = seen.lines.measure(call)
    except results.PgsTimeLimit:
        return "the time limit cut the rerun that measures the test's lines"
    return None
