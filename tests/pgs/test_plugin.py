"""The pytest plugin on a failing explicit ``@example``: Hypothesis stops at it and never
generates or shrinks, so the plugin searches again without the explicit examples and records
both failing inputs. Real pytest runs: on the host's Python through a local sandbox, and on the
repositories' Python 3.9 in a Docker sandbox."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.pgs import pgs_pytest_plugin_results as plugin_results
from agent.pgs.feedback import render_feedback, select_failure
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.tokens import SimpleCounter
from agent.record.check import CheckReport, TestResult
from envs.local import LocalSandbox, LocalSandboxConfig

#: The search after an explicit example alone: no other failing inputs kept (tests/pgs/
#: test_inputs.py has those), no pool pass (tests/pgs/test_pool.py has it; it runs each input
#: again, which these tests count).
#: The product's per-test limit (20 s): a shorter one cut searches of a loaded machine.
SETTINGS = CheckSettings(python=sys.executable, test_timeout=20, keep_inputs=0, pool=False)
#: A limit the hanging test reaches (it sleeps 60 s): what was left of it after the explicit
#: example went to the search, not a new one, so the test ends before twice the limit.
HANG_LIMIT = SETTINGS.model_copy(update={"test_timeout": 10})
LONG = [3, 1, 3, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 3]
ISSUE = [1, 2, 1]

#: A dedupe that special-cases the issue's example, as a candidate patch might. The properties
#: log each input they run to CALLS, one JSON line per call.
PROPERTIES = f"""\
import json
import os
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

LONG = {LONG!r}


def dedupe(xs):
    if xs == {ISSUE!r}:
        return [1, 2]
    return list(xs)


def log(name, xs):
    if os.environ.get("CALLS"):
        with open(os.environ["CALLS"], "a") as f:
            f.write(json.dumps([name, xs]) + "\\n")


@pytest.mark.pgs_issue("every element once, in the order of first occurrence")
@given(st.lists(st.integers()))
@example(xs=LONG)
def test_long_example(xs):
    log("long", xs)
    out = dedupe(xs)
    expected = list(dict.fromkeys(xs))
    assert out == expected, f"returned {{out!r}}, expected {{expected!r}}"


@pytest.mark.pgs_issue("every element once")
@given(st.lists(st.integers()))
@example(xs=[5, 6])
def test_passing_example(xs):
    log("passing", xs)
    assert len(dedupe(xs)) == len(set(xs))


@pytest.mark.pgs_issue("only the explicit example fails")
@given(st.lists(st.integers()))
@example(xs=[-7])
def test_only_explicit(xs):
    assert xs != [-7]


@pytest.mark.pgs_issue("the explicit example fails and generating hangs")
@given(st.lists(st.integers(0, 9), min_size=1))
@example(xs=[-1])
def test_hangs_after(xs):
    if xs[0] >= 0:
        time.sleep(60)
    assert xs[0] >= 0
"""
PATH = ".pgs/properties/test_examples.py"


def test_an_assertion_message_comes_through_whole_without_hypothesis_notes() -> None:
    message = (
        f"AssertionError: returned {LONG!r}, expected [3, 1, 2]\n"
        "assert [3, 1, 3, 2, 5, 6, ...] == [3, 1, 2]\n"
        "  Left contains 11 more items, first extra item: 5\n"
        "Falsifying explicit example: test_f(\n    xs=[3, 1, 3],\n)"
    )
    assert plugin_results.assertion_message(message) == (
        f"returned {LONG!r}, expected [3, 1, 2]\n"
        "assert [3, 1, 3, 2, 5, 6, ...] == [3, 1, 2]\n"
        "  Left contains 11 more items, first extra item: 5"
    )
    assert plugin_results.assertion_message("AssertionError") == "assertion failed"
    assert plugin_results.assertion_message(None) is None


def _calls(path: Path) -> list[tuple[str, Any]]:
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]


def _run(sandbox: Any, calls: Path, *names: str, settings: CheckSettings = SETTINGS) -> CheckReport:
    if calls.exists():
        calls.unlink()
    targets = [f"{PATH}::{name}" for name in names] or [PATH]
    sandbox.write_file(PATH, PROPERTIES)
    return run_pytest(sandbox, targets, settings=settings, timeout=120)


@pytest.fixture
def local(small_repo: Path, tmp_path: Path) -> Iterator[Any]:
    # The local sandbox passes only an allow-list of the host's environment: CALLS is given
    # as the sandbox's own variable.
    config = LocalSandboxConfig(env={"CALLS": str(tmp_path / "calls.jsonl")})
    with LocalSandbox(small_repo, config) as sandbox:
        yield sandbox


def _check_long_example(result: TestResult) -> None:
    # The result's own fields: the failure pytest reported, the explicit example.
    assert (result.category, result.explicit) == ("wrong_answer", True)
    assert result.example == f"test_long_example(xs={LONG!r})"
    explicit, generated = result.examples
    assert explicit.example == result.example and explicit.explicit
    assert explicit.returned and explicit.returned.startswith(f"returned {LONG!r}, expected [")
    assert (generated.category, generated.explicit) == ("property_violation", False)
    assert generated.example == "test_long_example(xs=[0, 0])"
    assert generated.returned and generated.returned.startswith("returned [0, 0], expected [0]")
    assert generated.trace and "test_examples.py" in generated.trace


def test_a_failing_explicit_example_also_yields_the_shrunk_counterexample(
    local: Any, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    first = _run(local, calls, "test_long_example")
    (result,) = first.results
    _check_long_example(result)
    logged = _calls(calls)
    assert logged[0] == ("long", LONG) and logged.count(("long", LONG)) == 1
    assert len(logged) > 2  # generated and shrunk after the explicit example failed
    chosen = select_failure(first, "property-min", SimpleCounter())
    assert chosen is not None and chosen.input == "xs=[0, 0]"
    assert chosen.issue_example == f"xs={LONG!r}"
    message = render_feedback(chosen, "property-min", 1, 5)
    assert "Input: xs=[0, 0]" in message and "Got: returned [0, 0], expected [0]" in message
    assert f"The issue's own example also fails: xs={LONG!r}" in message
    # Derandomised: a second run gives the same report, inputs and all.
    second = _run(local, calls, "test_long_example")
    assert _comparable(second) == _comparable(first)


def _comparable(report: CheckReport) -> str:
    data = report.model_dump()
    data.pop("duration")
    for result in data["results"]:
        result.pop("duration")
    return json.dumps(data, indent=1)


def test_an_explicit_example_that_passes_triggers_nothing_extra(local: Any, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    (result,) = _run(local, calls, "test_passing_example").results
    assert (result.category, result.explicit) == ("property_violation", False)
    (only,) = result.examples
    assert only.example == result.example == "test_passing_example(xs=[0, 0])"
    logged = _calls(calls)
    assert logged[0] == ("passing", [5, 6]) and logged.count(("passing", [5, 6])) == 1
    assert logged.count(logged[1]) == 1  # one generation: a search again would repeat it


def test_only_the_explicit_example_failing_or_a_search_cut_by_the_time_limit_keeps_one_input(
    local: Any, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    report = _run(local, calls, "test_only_explicit", "test_hangs_after", settings=HANG_LIMIT)
    only, hangs = report.results
    assert (only.category, only.example, len(only.examples)) == (
        "wrong_answer",
        "test_only_explicit(xs=[-7])",
        1,
    )
    assert (hangs.category, hangs.example, len(hangs.examples)) == (
        "wrong_answer",
        "test_hangs_after(xs=[-1])",
        1,
    )
    assert hangs.duration < 2 * HANG_LIMIT.test_timeout  # the search had what was left of it


@pytest.mark.docker
def test_the_search_runs_on_python_3_9_too(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
    from envs.images import build_repo_image
    from tests.support.example_repos import DEDUPE

    path = DEDUPE.make(tmp_path_factory.mktemp("dedupe") / "dedupe")
    settings = SETTINGS.model_copy(update={"python": "python3"})
    with DockerSandbox(DockerSandboxConfig(image=build_repo_image(path).tag)) as box:
        assert "Python 3.9" in box.run("python3 -V").output
        targets = [f"{PATH}::test_long_example", f"{PATH}::test_passing_example"]
        box.write_file(PATH, PROPERTIES)
        reports = [run_pytest(box, targets, settings=settings, timeout=120) for _ in range(2)]
    long_example, passing = reports[0].results
    _check_long_example(long_example)
    assert len(passing.examples) == 1
    assert _comparable(reports[0]) == _comparable(reports[1])


# -- reading Hypothesis's report ----------------------------------------------------------------


def test_parse_example_reads_old_and_new_hypothesis_formats() -> None:
    old = "Falsifying example: test_f(\n    xs=[0, 0],\n)\n"
    new = "E       Failing explicit example: test_f(\nE           xs=[1, 2, 1],\nE       )"
    one_line = "Falsifying example: test_g(s='a)b', n=3)"
    commented = "Failing test case: test_h(\n    n=0,  # or any other generated value\n)"
    assert plugin_results.parse_example(old) == ("test_f(xs=[0, 0])", False)
    assert plugin_results.parse_example(new) == ("test_f(xs=[1, 2, 1])", True)
    assert plugin_results.parse_example(one_line) == ("test_g(s='a)b', n=3)", False)
    assert plugin_results.parse_example(commented) == ("test_h(n=0)", False)
    assert plugin_results.parse_example("assert 1 == 2") == (None, False)


_ARGS = st.dictionaries(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.one_of(st.integers(), st.text(), st.lists(st.integers(), max_size=5)),
    min_size=1,
    max_size=4,
)


@given(args=_ARGS, prefixed=st.booleans())
def test_parse_example_gives_back_any_multi_line_call_on_one_line(
    args: dict[str, Any], prefixed: bool
) -> None:
    lines = ["Falsifying example: test_p(", *(f"    {k}={v!r}," for k, v in args.items()), ")"]
    if prefixed:
        lines = [f"E       {line}" for line in lines]
    example, explicit = plugin_results.parse_example("\n".join(["some output", *lines, "after"]))
    assert example == "test_p(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
    assert not explicit


REFUSES = """import pytest
from hypothesis import given
from hypothesis import strategies as st


def make(name):
    return {"name": name}  # the bug: an empty name is not refused


@pytest.mark.pgs_issue("an empty name is refused with ValueError")
@given(st.just(""))
def test_empty_name_is_refused(name):
    with pytest.raises(ValueError):
        make(name)


@pytest.mark.pgs_issue("every name is refused by pytest.fail")
@given(st.integers(min_value=3))
def test_fails_by_pytest_fail(n):
    pytest.fail(f"got {n}")
"""


def test_pytest_raises_saying_did_not_raise_is_the_tests_own_check_failing(
    small_repo: Path,
) -> None:
    """Found on SWE-bench Verified pallets__flask-5014: the Tester's issue property
    ``with pytest.raises(ValueError): Blueprint("", ...)`` failed on the original code with
    DID NOT RAISE -- exactly the bug -- and was dropped as "the property itself raised"."""
    from agent.pgs.validate import validate_properties

    path = ".pgs/properties/test_refuses.py"
    with LocalSandbox(small_repo) as sandbox:
        sandbox.write_file(path, REFUSES)
        report = run_pytest(sandbox, [path], settings=SETTINGS, timeout=120)
    refused, failed = report.results
    assert (refused.category, refused.example) == (
        "property_violation",
        "test_empty_name_is_refused(name='')",
    )
    assert refused.returned and refused.returned.startswith("DID NOT RAISE")  # pytest's wording
    assert "ValueError" in refused.returned
    assert (failed.category, failed.returned) == ("property_violation", "got 3")
    kept, dropped = validate_properties(report, "Blueprint('') must raise ValueError")
    assert kept == [r.nodeid for r in report.results] and dropped == []
    chosen = select_failure(report, "property-min", SimpleCounter())
    assert chosen is not None
    message = render_feedback(chosen, "property-min", 1, 5)
    assert "Got: DID NOT RAISE" in message or "Got: got 3" in message


# -- where an exception was raised: the property's misuse or the code under test ----------------

#: The repository's code: ``area`` raises ValueError itself; ``label`` passes a bad width on to
#: the standard library, which raises it there.
SHAPES = """import textwrap


def area(w, h):
    if w < 0:
        raise ValueError("negative width")
    return w + h  # the bug: not w * h


def label(text, width):
    return textwrap.wrap(text, width)
"""

#: Issue properties, each failing on the original code in its own way.
ORIGINS = """import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sortedcontainers import SortedList

from shapes.core import area, label

pytestmark = pytest.mark.pgs_issue("area multiplies; bad sizes raise ValueError")


@given(st.integers(min_value=2, max_value=5))
def test_assertion(w):
    assert area(w, 3) == w * 3


@given(st.just(-1))
def test_raised_by_the_repository(w):
    area(w, 2)


@given(st.just(0))
def test_raised_in_the_standard_library_called_by_the_repository(width):
    label("abc", width)


@given(st.just("x"))
def test_misuses_the_standard_library(width):
    textwrap.wrap(label("abc", 3)[0], width=width)


@given(st.just([1, "a"]))
def test_misuses_a_dependency(values):
    SortedList(values)


@given(st.just("x"))
def test_misuses_its_own_code(suffix):
    area(2, 3) + suffix


@given(st.just(1))
def test_misuses_the_repository_api(w):
    area(w)
"""

#: What the issue names: both exception types, so only where they come from tells them apart.
ORIGIN_ISSUE = "area(2, 3) gives 5, not 6; a negative width must raise ValueError (TypeError too?)"


def test_an_issue_property_shows_the_bug_by_its_own_check_or_the_repositorys_exception(
    tmp_path: Path,
) -> None:
    from agent.pgs.validate import kept_reasons, validate_properties
    from tests.support.repos import make_repo

    repo = make_repo(tmp_path / "shapes", {"shapes/__init__.py": "", "shapes/core.py": SHAPES})
    path = ".pgs/properties/test_origins.py"
    with LocalSandbox(repo) as sandbox:
        sandbox.write_file(path, ORIGINS)
        report = run_pytest(sandbox, [path], settings=SETTINGS, timeout=120)
    by_name = {r.nodeid.rsplit("::", 1)[1]: r for r in report.results}
    origins = {name: r.origin for name, r in by_name.items()}
    raised = origins["test_raised_by_the_repository"]
    assert raised is not None
    assert (raised.type, raised.file, raised.function, raised.where) == (
        "ValueError",
        "shapes/core.py",
        "area",
        "repo",
    )
    stdlib = origins["test_raised_in_the_standard_library_called_by_the_repository"]
    assert stdlib is not None and stdlib.where == "outside" and stdlib.file.endswith("textwrap.py")
    assert (
        stdlib.via is not None
        and stdlib.via.startswith("shapes/core.py:")
        and "label" in stdlib.via
    )
    misuse = origins["test_misuses_the_standard_library"]
    assert misuse is not None and misuse.where == "outside" and misuse.via is None
    assert misuse.type == "TypeError"

    kept, dropped = validate_properties(report, ORIGIN_ISSUE)
    why = kept_reasons(report, kept, ORIGIN_ISSUE)
    assert {n.rsplit("::", 1)[1]: r for n, r in why.items()} == {
        "test_assertion": "fails by its assertion on the original code: "
        + str(by_name["test_assertion"].example),
        "test_raised_by_the_repository": (
            "raises ValueError from repo module shapes.core (area), named by the issue"
        ),
        "test_raised_in_the_standard_library_called_by_the_repository": (
            f"raises ValueError in textwrap ({stdlib.function}), called from repo module "
            "shapes.core (label), named by the issue"
        ),
    }
    reasons = {d.nodeid.rsplit("::", 1)[1]: d.reason for d in dropped}
    assert set(reasons) == {
        "test_misuses_the_standard_library",
        "test_misuses_a_dependency",
        "test_misuses_its_own_code",
        "test_misuses_the_repository_api",
    }
    for name in ("test_misuses_the_standard_library", "test_misuses_a_dependency"):
        assert reasons[name].startswith("raises TypeError inside ")
        assert "the property's own use of the API, not the code under test" in reasons[name]
    assert reasons["test_misuses_the_standard_library"].startswith(
        "raises TypeError inside textwrap"
    )
    assert "inside sortedcontainers.sortedlist (" in reasons["test_misuses_a_dependency"]
    for name in ("test_misuses_its_own_code", "test_misuses_the_repository_api"):
        assert reasons[name].startswith("the property itself raised TypeError")
        assert f"(at {path}:" in reasons[name]
