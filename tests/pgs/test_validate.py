"""The soundness filter (agent/pgs/validate.py) on the original code of a planted-bug repository:
sound properties kept, the rest dropped with the reason."""

from __future__ import annotations

from agent.pgs.runner import run_pytest
from agent.pgs.validate import validate_properties
from envs.docker_sandbox import DockerSandbox
from tests.pgs.checking import (
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
