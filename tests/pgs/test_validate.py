"""The soundness filter (agent/pgs/validate.py) on the original code of a planted-bug repository:
sound properties kept, the rest dropped with the reason."""

from __future__ import annotations

from agent.pgs.runner import run_pytest
from agent.pgs.validate import kept_reasons, validate_properties
from envs.docker_sandbox import DockerSandbox
from tests.support.checking import (
    SETTINGS,
    VALIDATED,
    assert_unsound_dropped,
    by_role,
    write_properties,
)
from tests.support.example_repos import DEDUPE, RLE


def test_validation_keeps_sound_properties_and_says_why_it_drops_the_rest(
    dedupe: DockerSandbox,
) -> None:
    targets = write_properties(dedupe, DEDUPE, *VALIDATED)
    report = run_pytest(dedupe, targets, settings=SETTINGS, timeout=60)
    kept, dropped = validate_properties(report, DEDUPE.issue)
    assert kept == [  # in the order of the targets
        f"{DEDUPE.property_path('issue_sound')}::test_no_repeats",
        f"{DEDUPE.property_path('issue_generated')}::test_no_repeats_generated",
        f"{DEDUPE.property_path('regression_sound')}::test_order_of_first_occurrence",
    ]
    reasons = {d.nodeid.split("::")[0]: d.reason for d in dropped}
    assert_unsound_dropped(reasons)
    path = DEDUPE.property_path
    assert "xs=[0, 0]" in reasons[path("regression_unsound_fails")]
    assert reasons[path("import_error")].startswith("the file does not import: ImportError")
    assert "unique_everseen" in reasons[path("import_error")]


def test_validation_keeps_an_issue_property_failing_by_the_issues_exception(
    rle: DockerSandbox,
) -> None:
    targets = write_properties(rle, RLE, "issue_sound", "issue_generated", "regression_sound")
    targets += write_properties(rle, RLE, "issue_other_exception")
    report = run_pytest(rle, targets, settings=SETTINGS, timeout=60)
    roles = by_role(report, RLE)
    generated = roles["issue_generated"]
    assert generated.category == "runtime_error"
    assert generated.exception == "IndexError: string index out of range"
    assert generated.example == "test_round_trip_generated(s='aaaaaaaaaa')"
    assert generated.trace and generated.trace.splitlines()[-2].startswith("rle/__init__.py:")
    kept, dropped = validate_properties(report, RLE.issue)
    assert {k.split("::")[0] for k in kept} == {
        RLE.property_path(r) for r in ("issue_sound", "issue_generated", "regression_sound")
    }
    assert [d.reason for d in dropped] == [
        "fails on the original code by ValueError, which the issue does not mention"
    ]


#: RLE issue properties on Python 3.9: the round trip that raises the issue's IndexError inside
#: ``rle.decode``, a digits case where the bug returns a wrong string (the assertion fails),
#: and two that raise TypeError, which the issue (below) names, by misusing an API.
RLE_ORIGINS = """import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rle import decode, encode

pytestmark = pytest.mark.pgs_issue("decoding an encoded string gives the string back")


@given(st.just("a" * 10))
def test_long_run(s):
    assert decode(encode(s)) == s


@given(st.just("1" * 10 + "2" * 10))
def test_digits(s):
    assert decode(encode(s)) == s


@given(st.just("a" * 10))
def test_wraps_with_a_bad_width(s):
    assert textwrap.wrap(s, width="10") == [s]


@given(st.just("a" * 10))
def test_adds_a_number(s):
    assert encode(s) + 1 == s
"""


def test_an_issue_property_misusing_an_api_is_dropped_even_when_the_issue_names_its_error(
    rle: DockerSandbox,
) -> None:
    path = RLE.property_path("origins")
    rle.write_file(path, RLE_ORIGINS)
    report = run_pytest(rle, [path], settings=SETTINGS, timeout=60)
    issue = RLE.issue + "\n\nAnd `decode(5)` raises TypeError; it should say what it expects."
    kept, dropped = validate_properties(report, issue)
    why = {n.rsplit("::", 1)[1]: r for n, r in kept_reasons(report, kept, issue).items()}
    assert why == {
        "test_long_run": "raises IndexError from repo module rle (decode), named by the issue",
        "test_digits": "fails by its assertion on the original code: "
        f"test_digits(s={'1' * 10 + '2' * 10!r})",
    }
    reasons = {d.nodeid.rsplit("::", 1)[1]: d.reason for d in dropped}
    assert set(reasons) == {"test_wraps_with_a_bad_width", "test_adds_a_number"}
    assert reasons["test_wraps_with_a_bad_width"].startswith("raises TypeError inside textwrap (")
    assert "the property's own use of the API" in reasons["test_wraps_with_a_bad_width"]
    assert reasons["test_adds_a_number"].startswith("the property itself raised TypeError")
