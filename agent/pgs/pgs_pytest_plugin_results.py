"""The part of ``pgs_pytest_plugin`` that turns what pytest and Hypothesis report into the
fields of a result: the kind and rule of a test, its failing input (:func:`parse_example`),
the assertion message (:func:`assertion_message`), a short trace (:func:`trace`), and where
an exception was raised (:func:`origin`).

It also classifies a failure by the paper's outcome classes (:func:`classify`) and describes
one failing input (:func:`seen_input`).

Copied into the sandbox beside the plugin and imported by it, so the same rules hold: the
standard library and pytest only, Python 3.8, no import of our package.
Frames of this module are left out of traces like the plugin's own (:data:`INTERNAL`).
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

KINDS = {"pgs_issue": "issue", "pgs_regression": "regression"}
TRACE_LINES = 10
#: Characters kept of what the code returned or raised on each failing input.
SEEN_CHARS = 2000
#: Frames of these packages are noise in a trace: the failure is in the test or the code.
INTERNAL = re.compile(r"[/\\](_pytest|pluggy|hypothesis|_hypothesis_\w+)[/\\]|pgs_pytest_plugin")
#: "Falsifying example:" before Hypothesis 6.1xx, "Failing test case:" after; same for explicit.
EXAMPLE = re.compile(r"(?:Falsifying|Failing) (?:(explicit) example|example|test case): ")
#: Comments Hypothesis adds to a falsifying example; they cost tokens and say little.
HYPOTHESIS_COMMENT = re.compile(r"\s+# (or any other generated value|The test .*)$")


class PgsTimeLimit(BaseException):
    """Raised by the alarm. A BaseException, so neither the test's ``except Exception`` nor
    Hypothesis (which would try to shrink an input that never returns) catches it."""


# -- turning a pytest report into a result --------------------------------------------------------


def kind_and_rule(item: Any) -> tuple[str, str | None]:
    for marker_name, kind in KINDS.items():
        marker = item.get_closest_marker(marker_name)
        if marker is not None:
            rule = marker.args[0] if marker.args else marker.kwargs.get("rule")
            return kind, None if rule is None else str(rule)
    return "repo", None


def leaf_exceptions(exc: BaseException) -> list[BaseException]:
    """The exception itself, or the members of an exception group (Hypothesis, Python 3.11)."""
    members = getattr(exc, "exceptions", None)
    if isinstance(members, (list, tuple)) and members:
        leaves: list[BaseException] = []
        for member in members:
            leaves.extend(leaf_exceptions(member))
        return leaves
    return [exc]


def hit_time_limit(exc: BaseException) -> bool:
    # The time limit may fire while Hypothesis generates or shrinks; it then raises an error of
    # its own (FlakyStrategyDefinition...) with ours only in the chain of causes.
    seen = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, PgsTimeLimit):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def is_timeout(exc: BaseException) -> bool:
    if hit_time_limit(exc):
        return True
    name = type(exc).__name__
    return name == "DeadlineExceeded" or (
        name in ("Flaky", "FlakyFailure") and "Unreliable test timings" in str(exc)
    )


def notes(exc: BaseException) -> list[str]:
    notes: list[str] = []
    for leaf in [exc, *leaf_exceptions(exc)]:
        for note in getattr(leaf, "__notes__", None) or ():
            if isinstance(note, str) and note not in notes:
                notes.append(note)
    return notes


def parse_example(text: str) -> tuple[str | None, bool]:
    """The first falsifying example in Hypothesis's output, on one line, and if it was explicit.

    Hypothesis prints ``Falsifying example: test_f(xs=[0])`` (newer versions: ``Failing test
    case:``, ``Failing explicit example:``) or, for longer inputs,
    ``test_f(`` / one argument per line / ``)``; pytest may prefix each line with ``E  ``.
    """
    lines = [re.sub(r"^E\s{1,7}", "", line.rstrip()) for line in text.splitlines()]
    for index, line in enumerate(lines):
        match = EXAMPLE.search(line)
        if match is None:
            continue
        explicit = bool(match.group(1))
        head = line[match.end() :]
        if not head.endswith("("):
            return HYPOTHESIS_COMMENT.sub("", head), explicit
        parts = [head]
        for follow in lines[index + 1 :]:
            if follow.strip() == ")" and not follow.startswith(" "):
                break
            parts.append(HYPOTHESIS_COMMENT.sub("", follow.strip()))
        else:
            return "\n".join(parts), explicit  # unterminated: keep what there is
        joined = parts[0] + " ".join(parts[1:]).rstrip(",") + ")"
        return joined, explicit
    return None, False


def trace(excinfo: Any, root: str) -> str | None:
    """At most ``TRACE_LINES`` lines: the innermost frames outside pytest and Hypothesis."""
    lines = []
    for entry in excinfo.traceback:
        path = str(entry.path)
        if INTERNAL.search(path) or is_wrapper(entry):
            continue
        if path.startswith(root + os.sep):
            path = path[len(root) + 1 :]
        try:
            source = str(entry.statement).strip().splitlines()[0]
        except Exception:  # no source (a C extension, a generated function)
            source = ""
        lines.append(f"{path}:{entry.lineno + 1} in {entry.name}")
        if source:
            lines.append(f"    {source}")
    return "\n".join(lines[-TRACE_LINES:]) or None


# -- where an exception was raised ----------------------------------------------------------------

#: Folders of installed code: a frame there is the repository's only if its package is.
INSTALLED = re.compile(r"[/\\](site|dist)-packages[/\\]([^/\\]+)")


def _frames(tb: Any) -> list[Any]:
    """``(absolute file, line, function)`` of each frame of a traceback, outermost first,
    without pytest's, pluggy's, Hypothesis's and the plugin's own (they raise on the test's
    behalf: ``pytest.fail``, ``pytest.raises``' DID NOT RAISE)."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        path = os.path.abspath(code.co_filename)
        if not INTERNAL.search(path):
            frames.append((path, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return frames


def raised_in_test(exc: BaseException, test_file: str) -> bool:
    """Whether ``exc`` was raised in the test's own file or a helper beside it (its innermost
    frame outside pytest and Hypothesis); True when no frame tells."""
    frames = _frames(exc.__traceback__)
    if not frames:
        return True
    path = frames[-1][0]
    test_file = os.path.abspath(test_file)
    return path == test_file or os.path.dirname(path) == os.path.dirname(test_file)


def repository_modules(root: str) -> list[str]:
    """Dotted names of the repository's modules loaded in this process: those whose file is in
    the repository (not in a hidden folder such as ``.pgs``, not a test file), or in an
    installed copy of one of its own packages."""
    import sys

    own = _own_packages(root)
    names = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            continue
        path = os.path.abspath(path)
        base = os.path.basename(path)
        if base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py":
            continue
        if _where(path, "/nonexistent/test.py", root, own) == "repo":
            names.append(name)
    return sorted(names)


def _own_packages(root: str) -> set[str]:
    """Top-level package names the repository holds (at its root, or under ``src/``)."""
    names = set()
    for folder in (root, os.path.join(root, "src")):
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for name in entries:
            if os.path.isfile(os.path.join(folder, name, "__init__.py")):
                names.add(name)
    return names


def _where(path: str, test_file: str, root: str, own: set[str]) -> str:
    """test: the test's file or a helper beside it; repo: the repository's code (a hidden
    folder such as ``.venv`` or ``.tox`` is not; an installed copy of its own package is);
    outside: the standard library, installed packages, ``<string>``."""
    if path == test_file or os.path.dirname(path) == os.path.dirname(test_file):
        return "test"
    installed = INSTALLED.search(path)
    if installed is not None:
        top = installed.group(2)
        return "repo" if top.split(".")[0] in own else "outside"
    if not path.startswith(root + os.sep):
        return "outside"
    parts = path[len(root) + 1 :].split(os.sep)
    return "outside" if any(part.startswith(".") for part in parts[:-1]) else "repo"


def origin(exc: BaseException, test_file: str, root: str) -> dict[str, Any] | None:
    """Where ``exc`` was raised (:class:`agent.record.check.Origin`): the innermost frame outside
    pytest and Hypothesis, whose code that is, and the innermost repository frame between the
    test's own last frame and the raise (``via``). None: no frame to tell."""
    frames = _frames(exc.__traceback__)
    if not frames:
        return None
    test_file = os.path.abspath(test_file)
    own = _own_packages(root)
    kinds = [_where(path, test_file, root, own) for path, _, _ in frames]
    last_test = max((i for i, kind in enumerate(kinds) if kind == "test"), default=-1)
    via = None
    for index in range(len(frames) - 1, last_test, -1):
        if kinds[index] == "repo":
            path, line, function = frames[index]
            via = f"{_relative(path, root)}:{line} in {function}"
            break
    path, line, function = frames[-1]
    return {
        "type": type(exc).__name__,
        "file": _relative(path, root),
        "line": line,
        "function": function,
        "where": kinds[-1],
        "via": via,
    }


def _relative(path: str, root: str) -> str:
    return path[len(root) + 1 :] if path.startswith(root + os.sep) else path


def is_wrapper(entry: Any) -> bool:
    """Hypothesis's wrapper of a test carries the test's file and line: a decorator or def."""
    try:
        line = str(entry.statement).strip()
    except Exception:
        return False
    return line.startswith(("@", "def ", "async def "))


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut] ...\n{text[-half:]}"


def returned(report: Any) -> str | None:
    crash = getattr(report.longrepr, "reprcrash", None)
    return assertion_message(getattr(crash, "message", None))


def assertion_message(message: str | None) -> str | None:
    """What an AssertionError says, whole (a message of the test's own, such as ``returned
    [1, 1], expected [1]``, then pytest's ``assert ...`` explanation), without the notes."""
    if not message:
        return None
    message = re.sub(r"^AssertionError(: ?|$)", "", message)
    kept = []
    for line in message.splitlines():
        if EXAMPLE.search(line):
            break  # exception notes (the example, Hypothesis's explanations) follow
        kept.append(line)
    return "\n".join(kept).strip() or "assertion failed"


# -- the measures of a pooled input ---------------------------------------------------------------

#: The simple token rule (``agent.pgs.tokens.SimpleCounter``): the plugin's own count, used only
#: to pick the input to shrink under ``PGS_SHRINK_ORDER=pick-then-shrink`` (the host counts
#: every pooled input again with the Generator's tokenizer).
SIMPLE_TOKEN = re.compile(r"\w+|[^\w\s]")
_CALL = re.compile(r"^[\w.]+\((.*)\)$", re.DOTALL)


def simple_tokens(example: str) -> int:
    """Tokens of an example's arguments (``test_f(xs=[0])`` → ``xs=[0]``) by the simple rule."""
    match = _CALL.match(example.strip())
    return len(SIMPLE_TOKEN.findall(match.group(1) if match else example))


class LineCounter:
    """Lines of the repository's code one call runs: coverage.py when it can be imported,
    else the standard library's tracer (``sys.settrace``); neither while another tracer is
    active (a debugger, the repository's own coverage run). :attr:`tool` names the one used,
    :attr:`why` says why none is (then :meth:`measure` gives None)."""

    def __init__(self, root: str, test_file: str) -> None:
        import sys

        self.root = root
        self.test_file = os.path.abspath(test_file)
        self.own = _own_packages(root)
        self._counts: dict[str, bool] = {}
        self.why: str | None = None
        self.tool: str | None = None
        self._coverage: Any = None
        if sys.gettrace() is not None:
            self.why = "another tracer is active (a debugger or a coverage run)"
            return
        try:
            import importlib

            self._coverage = importlib.import_module("coverage")  # optional: not a dependency
            self.tool = "coverage.py"
        except ImportError:
            self.tool = "settrace"

    def counts(self, path: str) -> bool:
        """Whether a line of ``path`` is the repository's code (not a test file)."""
        known = self._counts.get(path)
        if known is None and path.startswith("<"):  # <string>, <frozen os>: no file
            known = self._counts[path] = False
        if known is None:
            absolute = os.path.abspath(path)
            base = os.path.basename(absolute)
            test = base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
            known = not test and _where(absolute, self.test_file, self.root, self.own) == "repo"
            self._counts[path] = known
        return known

    def measure(self, call: Any) -> int | None:
        """Runs ``call()`` (its exceptions are the caller's) and returns the lines it ran;
        None, without running it, when no tracer can measure it."""
        import sys

        if self.tool is None or sys.gettrace() is not None:
            return None
        if self._coverage is not None:
            return self._by_coverage(call)
        lines: set[tuple[str, int]] = set()

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add((frame.f_code.co_filename, frame.f_lineno))
            return local

        def calls(frame: Any, event: str, arg: Any) -> Any:
            if self.counts(frame.f_code.co_filename):
                return local
            return None

        sys.settrace(calls)
        try:
            call()
        finally:
            sys.settrace(None)
        return len(lines)

    def _by_coverage(self, call: Any) -> int | None:
        try:
            measured = self._coverage.Coverage(data_file=None, config_file=False, branch=False)
        except Exception:  # an old or broken coverage.py: the standard library's tracer
            self._coverage, self.tool = None, "settrace"
            return self.measure(call)
        measured.start()
        try:
            call()
        finally:
            measured.stop()
        data = measured.get_data()
        return sum(len(data.lines(f) or ()) for f in data.measured_files() if self.counts(f))


# -- a failure, classified; one failing input, described ------------------------------------


def seen_input(example: str, exc: BaseException, root: str, test_file: str) -> dict[str, Any]:
    leaves = leaf_exceptions(exc)
    _, category = classify(leaves, True, False, test_file)
    found: dict[str, Any] = dict.fromkeys(INPUT_FIELDS)
    found.update(example=example, explicit=False, category=category)
    leaf = leaves[0]
    if isinstance(leaf, AssertionError) and category != "runtime_error":
        found["returned"] = assertion_message(str(leaf) or "assertion failed")
    elif check_failed(leaf, test_file):
        found["returned"] = str(leaf).strip() or "failed"
    else:
        message = str(leaf).strip().splitlines()
        found["exception"] = type(leaf).__name__ + (f": {message[0]}" if message else "")
    if exc.__traceback__ is not None:
        found["trace"] = trace(exception_info(exc), root)
    for key in ("returned", "exception"):  # up to 16 of them per test: each kept short
        if found[key]:
            found[key] = cap(found[key], SEEN_CHARS)
    return found


def exception_info(exc: BaseException) -> Any:
    """pytest's ``ExceptionInfo`` of a raised exception (``pytest.ExceptionInfo`` since pytest
    6.2, ``_pytest._code.ExceptionInfo`` before)."""
    kind: Any = getattr(pytest, "ExceptionInfo", None)
    if kind is None:
        from _pytest._code import ExceptionInfo as kind
    return kind.from_exc_info((type(exc), exc, exc.__traceback__))


#: The fields of one failing input (``agent.record.check.FailingInput``).
INPUT_FIELDS = ("example", "explicit", "category", "returned", "exception", "trace")


def item_file(item: Any) -> str:
    return str(getattr(item, "path", None) or item.fspath)


def check_failed(leaf: BaseException, test_file: str | None) -> bool:
    """The test's own check failed: an assert raised in the test's file (or a helper beside
    it), or pytest's ``Failed`` (``pytest.raises`` saying DID NOT RAISE, ``pytest.fail``),
    which says the code did not do what the test expects just as an assert does; anything else
    the code (or the test) raised is a runtime error, an ``AssertionError`` raised in the
    repository's code too (the code's own sanity check broke, not the property's)."""
    if isinstance(leaf, pytest.fail.Exception):
        return True
    if not isinstance(leaf, AssertionError):
        return False
    return test_file is None or raised_in_test(leaf, test_file)


def classify(
    leaves: list[BaseException], given: bool, explicit: bool, test_file: str | None
) -> tuple[str, str]:
    """(outcome, category) of a failure, by the paper's outcome classes."""
    if any(is_timeout(leaf) for leaf in leaves):
        return "timeout", "timeout"
    if leaves and all(check_failed(leaf, test_file) for leaf in leaves):
        return "failed", "property_violation" if given and not explicit else "wrong_answer"
    return "failed", "runtime_error"
