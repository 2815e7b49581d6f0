"""The issue's stated examples as an oracle, for the soundness filter (runs inside the sandbox).

The extraction turn writes each example the issue states as a concrete test and, when the
example is one call with a stated result, marks it with that call as data::

    @pytest.mark.pgs_states(call="stats.median", args=[[1, 2, 3, 4]], returns=2.5)
    @pytest.mark.pgs_states(call="shapes.area", args=[-1], raises="ValueError")

With ``PGS_ORACLE=1`` the plugin collects those marks from every collected test and, before any
test runs, puts a wrapper in place of each named callable (in its module or class, and in every
loaded module that imported it by name: a property's ``from stats import median`` too). A call
whose arguments equal a stated example's is answered with the stated result (a copy) or the
stated exception; any other call goes to the original code. Only the outermost call of a wrapped
callable counts (the original calling itself is the original's business).

A property that fails on an input during which every counted call was answered by the oracle
contradicts the issue: with the outputs the issue says the fixed code gives, it still fails.
The plugin runs only the properties' explicit examples in that run (where an issue's own cases
are), and records the first contradiction of each test (``contradicts`` in its result).

Standard library and pytest only; Python 3.8 compatible.
"""

from __future__ import annotations

import builtins
import copy
import functools
import importlib
import os
import sys
from typing import Any

MARK = "pgs_states"
ORACLE_ENV = "PGS_ORACLE"


def enabled() -> bool:
    return os.environ.get(ORACLE_ENV, "").strip() not in ("", "0")


class Stated:
    """One stated example: the callable's dotted name, the call's arguments, its result."""

    def __init__(self, nodeid: str, call: str, args: Any, kwargs: Any, outcome: Any) -> None:
        self.nodeid = nodeid
        self.call = call
        self.args = tuple(args or ())
        self.kwargs = dict(kwargs or {})
        #: ("returns", value) or ("raises", exception class or name)
        self.outcome = outcome

    def matches(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if len(args) != len(self.args) or set(kwargs) != set(self.kwargs):
            return False
        pairs = list(zip(args, self.args)) + [(kwargs[k], self.kwargs[k]) for k in kwargs]  # noqa: B905
        return all(_same(a, b) for a, b in pairs)

    def answer(self) -> Any:
        kind, value = self.outcome
        if kind == "returns":
            try:
                return copy.deepcopy(value)
            except Exception:
                return value
        raise _exception(value)

    def describe(self) -> str:
        shown = [_short(a) for a in self.args]
        shown += [f"{k}={_short(v)}" for k, v in self.kwargs.items()]
        kind, value = self.outcome
        result = (
            f"returns {_short(value)}"
            if kind == "returns"
            else f"raises {getattr(value, '__name__', value)}"
        )
        return f"{self.call}({', '.join(shown)}) {result}"


def _short(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same(a: Any, b: Any) -> bool:
    """Equal as the issue would say: ``==`` when it gives a truth value (numpy's element-wise
    result too, all of it), else the same repr; never an exception."""
    if a is b:
        return True
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return False
    try:
        equal = a == b
        if isinstance(equal, bool):
            return equal
        return bool(equal.all()) if hasattr(equal, "all") else bool(equal)
    except Exception:
        try:
            return repr(a) == repr(b)
        except Exception:
            return False


def _exception(value: Any) -> BaseException:
    if isinstance(value, type) and issubclass(value, BaseException):
        return value("stated by the issue")
    name = str(value).rsplit(".", 1)[-1]
    found = getattr(builtins, name, None)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found("stated by the issue")
    return type(name, (Exception,), {})("stated by the issue")


def stated_examples(items: list[Any]) -> list[Stated]:
    """Every ``pgs_states`` mark of the collected ``items``, as :class:`Stated`."""
    found = []
    for item in items:
        for mark in item.iter_markers(name=MARK):
            call = mark.kwargs.get("call") or (mark.args[0] if mark.args else None)
            if not isinstance(call, str) or not call:
                continue
            if "raises" in mark.kwargs:
                outcome = ("raises", mark.kwargs["raises"])
            elif "returns" in mark.kwargs:
                outcome = ("returns", mark.kwargs["returns"])
            else:
                continue
            args, kwargs = mark.kwargs.get("args", ()), mark.kwargs.get("kwargs", {})
            found.append(Stated(item.nodeid, call, args, kwargs, outcome))
    return found


def _resolve(dotted: str) -> tuple[Any, str, Any] | None:
    """``(owner, attribute, callable)`` of ``pkg.mod.Class.method``: the longest importable
    module prefix, then attributes; None when it does not resolve to a callable."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except Exception:
            continue
        try:
            for name in parts[cut:-1]:
                owner = getattr(owner, name)
            target = owner.__dict__[parts[-1]] if isinstance(owner, type) else None
            if target is None:
                target = getattr(owner, parts[-1])
        except (AttributeError, KeyError):
            return None
        return owner, parts[-1], target
    return None


class Oracle:
    """The wrappers in place, and what each input's calls were answered by."""

    def __init__(self, stated: list[Stated]) -> None:
        self.stated = stated
        #: "oracle" or "original", one per outermost call since the last :meth:`start`.
        self.calls: list[str] = []
        #: The stated example each answered call took (the last one, for the record).
        self.answered: list[Stated] = []
        self.depth = 0
        self.unresolved: list[str] = []
        self.installed: list[str] = []

    def install(self) -> None:
        by_call: dict[str, list[Stated]] = {}
        for one in self.stated:
            by_call.setdefault(one.call, []).append(one)
        for call, examples in by_call.items():
            found = _resolve(call)
            if found is None:
                self.unresolved.append(call)
                continue
            owner, name, target = found
            wrapped = isinstance(target, (staticmethod, classmethod))
            function = target.__func__ if wrapped else target
            if not callable(function):
                self.unresolved.append(call)
                continue
            wrapper = self._wrapper(function, examples)
            if isinstance(target, staticmethod):
                setattr(owner, name, staticmethod(wrapper))
            elif isinstance(target, classmethod):
                setattr(owner, name, classmethod(wrapper))
            else:
                setattr(owner, name, wrapper)
                _rebind(function, wrapper)
            self.installed.append(call)

    def _wrapper(self, function: Any, examples: list[Stated]) -> Any:
        oracle = self

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if oracle.depth:
                return function(*args, **kwargs)
            for one in examples:
                if one.matches(args, kwargs):
                    oracle.calls.append("oracle")
                    oracle.answered.append(one)
                    return one.answer()
            oracle.calls.append("original")
            oracle.depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                oracle.depth -= 1

        return wrapper

    def start(self) -> None:
        """A new input: forget the calls of the last one."""
        self.calls, self.answered, self.depth = [], [], 0

    def decided(self) -> Stated | None:
        """The stated example that answered the input just run, when every counted call was
        answered by the oracle (at least one), else None."""
        if self.calls and all(c == "oracle" for c in self.calls):
            return self.answered[-1]
        return None


def _rebind(original: Any, wrapper: Any) -> None:
    """Every loaded module's global bound to ``original`` (``from pkg import f``) now names
    ``wrapper``: the properties imported their names before the oracle was put in place."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for key, value in list(namespace.items()):
            if value is original:
                try:
                    namespace[key] = wrapper
                except Exception:
                    continue
