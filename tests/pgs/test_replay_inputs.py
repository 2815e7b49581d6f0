"""The plugin keeps every failing input in a form it can feed again and replays the inputs the
host hands it (``PGS_REPLAY``) beside the fresh ones: the evidence a check rests on does not
change with its seed. Real pytest and Hypothesis on the host's Python, through a local sandbox.

Also here, because the plugin decides it: an ``AssertionError`` raised inside the repository's
code is the code's error (``runtime_error``), not the property's own check failing; and the
report names the repository modules the run imported."""

from __future__ import annotations

import base64
import json
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.validate import judge_property
from agent.record.check import CheckReport
from envs.local import LocalSandbox, LocalSandboxConfig
from tests.support.repos import make_repo

PATH = ".pgs/properties/test_quoted.py"
NODE = f"{PATH}::test_quoted"
PROPERTY = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfg import parse_line


@pytest.mark.pgs_issue("a # inside double quotes is part of the value")
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz#", min_size=12, max_size=12))
def test_quoted(value):
    line = f'k = "{value}"'
    assert parse_line(line) == line
"""
BUGGY = 'def parse_line(line):\n    return line.split("#", 1)[0].strip()\n'
#: The validation's seed, and a later check's.
VALIDATION, CHECK = 11, 12


def settings(seed: int, **update: object) -> CheckSettings:
    return CheckSettings(python=sys.executable, seed=seed, test_timeout=20).model_copy(
        update=update
    )


@pytest.fixture
def box(tmp_path: Path) -> Iterator[LocalSandbox]:
    repo = make_repo(tmp_path / "repo", {"cfg.py": BUGGY, PATH: PROPERTY})
    with LocalSandbox(repo, LocalSandboxConfig()) as sandbox:
        yield sandbox


def run(box: LocalSandbox, settings: CheckSettings) -> CheckReport:
    return run_pytest(box, [PATH], settings=settings, timeout=120)


def drawn(form: str) -> dict[str, object]:
    value: dict[str, object] = pickle.loads(base64.b64decode(form))
    return value


def only_on(box: LocalSandbox, values: list[object]) -> None:
    """A parse_line wrong on exactly ``values`` (what an over-fit patch leaves wrong). They are
    read from a data file: Hypothesis draws string constants from the code's own source."""
    box.write_file("bad.json", json.dumps(values))
    box.write_file(
        "cfg.py",
        "import json\n\nBAD = json.load(open('bad.json'))\n\n\ndef parse_line(line):\n"
        "    if line[5:-1] in BAD:\n"
        "        return line.split('#', 1)[0].strip()\n"
        "    return line\n",
    )


def test_every_failing_input_of_the_validation_has_a_form_the_plugin_feeds_again(
    box: LocalSandbox,
) -> None:
    (result,) = run(box, settings(VALIDATION)).results
    assert result.category == "property_violation"
    forms = [f.replay for f in result.examples]
    assert len(forms) > 1 and all(forms)
    values = [drawn(f)["value"] for f in forms if f]
    assert all(isinstance(v, str) and "#" in v for v in values)
    # The reported (shrunk) input's form is that input.
    assert result.example == f"test_quoted(value={values[0]!r})"


def test_a_replayed_input_that_fails_fails_the_check_whatever_the_fresh_inputs(
    box: LocalSandbox,
) -> None:
    (validated,) = run(box, settings(VALIDATION)).results
    # Not the shrunk one (aaaaaaaaaaa#): a fresh search meets it too.
    forms = [f.replay for f in validated.examples if f.replay][1:]
    only_on(box, [drawn(f)["value"] for f in forms])

    (fresh,) = run(box, settings(CHECK)).results
    assert fresh.category == "pass" and fresh.replayed is None  # the luck of the fresh inputs

    (replayed,) = run(box, settings(CHECK, replay={NODE: forms})).results
    assert replayed.replayed == len(forms)
    assert replayed.category == "property_violation"  # not an explicit example's wrong_answer
    assert not replayed.explicit
    assert replayed.examples[0].from_replay
    assert drawn(forms[0])["value"] in (replayed.example or "") or any(
        e.from_replay for e in replayed.examples
    )


def test_replayed_inputs_that_pass_are_counted_on_a_passing_result(box: LocalSandbox) -> None:
    (validated,) = run(box, settings(VALIDATION)).results
    forms = [f.replay for f in validated.examples if f.replay]
    box.write_file("cfg.py", "def parse_line(line):\n    return line\n")
    (result,) = run(box, settings(CHECK, replay={NODE: forms, "other.py::t": forms})).results
    assert result.category == "pass"
    assert result.replayed == len(forms)


def test_the_report_names_the_repository_modules_the_run_imported(box: LocalSandbox) -> None:
    report = run(box, settings(VALIDATION))
    assert report.imported == ["cfg"]


ASSERTS_INSIDE = "def half(x):\n    assert x % 2 == 0, 'odd input'\n    return x // 2\n"
CALLS_IT = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfg import half


@pytest.mark.pgs_issue("half of a number times two is the number")
@given(st.integers())
def test_half(x):
    assert half(x) * 2 == x
"""


def test_an_assertion_error_raised_in_the_repository_code_is_a_runtime_error(
    box: LocalSandbox,
) -> None:
    box.write_file("cfg.py", ASSERTS_INSIDE)
    box.write_file(PATH, CALLS_IT)
    (result,) = run(box, settings(VALIDATION)).results
    assert result.category == "runtime_error"
    assert result.exception == "AssertionError: odd input"
    assert result.returned is None
    assert result.examples and all(e.category == "runtime_error" for e in result.examples)
    keep, why = judge_property(result, "half(3) raises")
    assert not keep and "AssertionError, which the issue does not mention" in why
    # The property's own assert failing is still its own check.
    box.write_file("cfg.py", "def half(x):\n    return x // 2\n")
    (own,) = run(box, settings(VALIDATION)).results
    assert own.category == "property_violation" and own.returned


def test_a_report_from_before_that_blamed_the_property_for_a_repo_assertion_is_read_right() -> None:
    from agent.record.check import Origin, TestResult

    result = TestResult(
        nodeid=PATH + "::test_half",
        kind="issue",
        outcome="failed",
        category="property_violation",
        returned="odd input",
        origin=Origin(
            type="AssertionError", file="cfg.py", line=2, function="half", where="repo", via=None
        ),
    )
    keep, why = judge_property(result, "half(3) is wrong")
    assert not keep and "AssertionError, which the issue does not mention" in why
    keep, why = judge_property(result, "half(3) fails with an AssertionError")
    assert keep and "raises AssertionError from repo module cfg (half)" in why
