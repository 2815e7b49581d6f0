"""``pgs select --model``: the Tester's properties, written once per instance on the original
code and validated there, are evidence on every candidate (agent/swebench/selection/properties.py).

Through the real CLI, the scripted model server and Docker, on the dataset of
:mod:`tests.support.swe_dataset`: two candidates for ``acme__textkit-1`` (slugify keeps
capitals), a fix that over-fits the issue's example (no repository test catches it; it is read
first and has the gold fix's size, so without a model it is chosen) and the gold fix. With
``--model`` the scripted Tester writes a property that shows the bug; the over-fit fails it on
the inputs the validation found and the gold fix passes it, so the gold fix is chosen by
"issue properties passed"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.record.selection import (
    SELECT_ORDER,
    Evidence,
    InstanceSelection,
    SelectCandidate,
    SelectionRecord,
    Source,
)
from agent.swebench.selection.rank import choose
from tests.support.swe_dataset import I1, Dataset, make_dataset
from tests.support.textutil import cli_error

GOLD_LINE = '+    return "-".join(text.lower().split())\n'
# The issue's example comes out right; any other capital stays.
OVERFIT_LINE = '+    return "-".join(text.split()).replace("H", "h").replace("W", "w")\n'
ISSUE_PROP = ".pgs/properties/test_slugify.py::test_slugify_lower_cases"
REGRESSION_PROP = ".pgs/properties/test_slugify.py::test_slugify_joins_words_with_dashes"
PROPERTIES = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from textkit.core import slugify

words = st.lists(st.text(alphabet="abcXYZ", min_size=1, max_size=5), min_size=1, max_size=4)


@pytest.mark.pgs_issue("slugify returns the words in lower case, joined by dashes")
@given(words)
@example(["Hello", "World"])
def test_slugify_lower_cases(ws):
    assert slugify(" ".join(ws)) == "-".join(w.lower() for w in ws)


@pytest.mark.pgs_regression("words are joined by single dashes")
@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=4))
def test_slugify_joins_words_with_dashes(ws):
    assert slugify("  ".join(ws)) == "-".join(ws)
"""
TESTER = [
    {
        "content": "The rule of the issue, as a property.",
        "tool_calls": [
            {
                "name": "str_replace_editor",
                "arguments": {
                    "command": "create",
                    "path": "/testbed/.pgs/properties/test_slugify.py",
                    "file_text": PROPERTIES,
                },
            }
        ],
    },
    {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]},
]


# -- the order, on records --------------------------------------------------------------------


def _selection(evidence: list[Evidence]) -> InstanceSelection:
    return InstanceSelection(
        instance_id=I1,
        candidates=[
            SelectCandidate(index=i, patch=f"p{i}", sources=[Source(file="f")], evidence=e)
            for i, e in enumerate(evidence, 1)
        ],
    )


def test_issue_properties_passed_decide_right_after_the_repository_tests() -> None:
    """The candidate passing the Tester's issue property wins over a smaller one that fails
    it, and over one that passes more of the candidates' own tests; not over one that breaks
    fewer repository tests."""
    overfit = Evidence(issue_properties_total=1, patch_lines=2, fail_to_pass_passed=1)
    right = Evidence(issue_properties_total=1, issue_properties_passed=1, patch_lines=6)
    chosen = choose(_selection([overfit, right]))
    assert chosen.chosen == 2
    assert "over candidate 1 by issue properties passed (1 of 1 issue properties passed " in (
        chosen.reason
    )
    breaks = Evidence(issue_properties_total=1, issue_properties_passed=1, broken=["t::a"])
    assert choose(_selection([breaks, overfit])).chosen == 2


evidences = st.builds(
    Evidence,
    applies=st.booleans(),
    broken=st.lists(st.sampled_from(["t::a", "t::b"]), max_size=2),
    fail_to_pass_passed=st.integers(0, 2),
    probes_changed=st.integers(0, 2),
    own_tests_failing=st.integers(0, 2),
    issue_files=st.integers(0, 2),
    code_files=st.integers(1, 2),
    patch_lines=st.integers(1, 9),
)


@given(st.lists(evidences, min_size=1, max_size=5))
def test_without_a_model_the_order_is_the_order_without_the_new_key(found: list[Evidence]) -> None:
    """No model, no properties: every candidate's key is 0 and the choice, the ranks and the
    reason are those of the order without it."""
    without = tuple(k for k in SELECT_ORDER if k != "issue properties passed")
    now = choose(_selection([e.model_copy(deep=True) for e in found]))
    before = choose(_selection([e.model_copy(deep=True) for e in found]), without)
    assert now.chosen == before.chosen and now.ties == before.ties
    assert now.reason == before.reason
    assert [c.rank for c in now.candidates] == [c.rank for c in before.candidates]


@pytest.mark.parametrize("mode", ["io", "none"])
def test_a_feedback_mode_without_a_tester_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    preds = tmp_path / "preds.json"
    preds.write_text("{}")
    argv = ["select", "--predictions", str(preds), "--instances", str(preds)]
    argv += ["--output-dir", str(tmp_path / "out"), "--model", "m", "--feedback", mode]
    assert f"--feedback {mode} has no Tester" in cli_error(capsys, *argv)


# -- end to end: the real CLI, the scripted Tester, Docker ------------------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def _predictions(dataset: Dataset, folder: Path) -> list[Path]:
    gold = dataset.record(I1)["patch"]
    assert GOLD_LINE in gold
    overfit = gold.replace(GOLD_LINE, OVERFIT_LINE)
    folder.mkdir()
    return [
        dataset.write_preds(folder / "overfit.json", {I1: overfit}, model="overfit"),
        dataset.write_preds(folder / "gold.json", {I1: gold}, model="gold"),
    ]


def _select(dataset: Dataset, preds: list[Path], out: Path, *extra: str) -> int:
    return main(
        [
            "select",
            "--predictions",
            *map(str, preds),
            "--instances",
            str(dataset.instances_file),
            "--instance-ids",
            I1,
            "--repos-dir",
            str(dataset.repos_dir),
            "--output-dir",
            str(out),
            *extra,
        ]
    )


def _model_flags(url: str) -> list[str]:
    return [
        "--model",
        "scripted",
        "--base-url",
        url,
        "--model.prices",
        json.dumps({"scripted": [1e-6, 1e-6]}),
        "--model.retries",
        json.dumps({"attempts": 1}),
        "--pgs.seed",
        "7",
        "--pgs.check",
        json.dumps({"max_examples": 30, "deadline_ms": 0}),
    ]


def _record(out: Path) -> SelectionRecord:
    return SelectionRecord.model_validate_json((out / "selection.json").read_text())


@pytest.mark.docker
def test_the_tester_s_property_chooses_the_fix_no_repository_test_tells_apart(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    preds = _predictions(dataset, tmp_path / "preds")

    # Without a model: no properties, the new key is 0 for both, and the over-fit (read
    # first, as small as the gold fix, breaking no repository test) is chosen.
    plain = tmp_path / "plain"
    assert _select(dataset, preds, plain) == 0, capsys.readouterr().err
    chosen = _record(plain).instances[I1]
    assert chosen.error is None and chosen.properties is None
    assert chosen.chosen == 1, chosen.reason
    at = SELECT_ORDER.index("issue properties passed")
    assert SELECT_ORDER[at - 1] == "repository tests broken"
    assert [c.key[at] for c in chosen.candidates] == [0.0, 0.0]
    assert [c.evidence.broken for c in chosen.candidates] == [[], []]
    assert not (plain / "instances" / f"{I1}.tester.json").exists()

    # With the scripted Tester: the gold fix, by the Tester's issue property.
    out = tmp_path / "out"
    with ScriptedServer(TESTER) as server:
        code = _select(dataset, preds, out, *_model_flags(server.url))
        err = capsys.readouterr().err
        assert code == 0, err
        assert len(server.requests) == 2  # one Tester turn, written once for both candidates
    selection = _record(out).instances[I1]
    assert selection.error is None
    assert selection.chosen == 2, selection.reason
    assert selection.reason.startswith(
        "candidate 2: over candidate 1 by issue properties passed (1 of 1 issue properties "
        "passed against 0 of 1 issue properties passed)"
    )
    written = selection.properties
    assert written is not None and written.model == "scripted"
    assert written.files == {".pgs/properties/test_slugify.py": PROPERTIES}
    assert set(written.kept) == {ISSUE_PROP, REGRESSION_PROP}
    assert written.shows_bug == [ISSUE_PROP]  # it fails on the original code
    assert written.validation is not None and written.validation.report is not None
    on_original = written.validation.report.by_id()[ISSUE_PROP]
    assert on_original.failed and on_original.example  # the failing input, replayed later
    assert written.cost > 0 and written.tester_error is None and written.error is None
    assert written.check_seed is not None and written.seed == 7

    overfit, gold = (c.evidence for c in selection.candidates)
    assert (overfit.issue_properties_passed, overfit.issue_properties_total) == (0, 1)
    assert (gold.issue_properties_passed, gold.issue_properties_total) == (1, 1)
    assert overfit.property_results[ISSUE_PROP].startswith("failed: ")
    assert gold.property_results == {ISSUE_PROP: "passed", REGRESSION_PROP: "passed"}
    assert overfit.properties_broken == gold.properties_broken == []
    assert overfit.broken == gold.broken == []  # no repository test tells them apart
    assert gold.property_verdict == "passed" and overfit.property_verdict == "failed"
    tester = json.loads((out / "instances" / f"{I1}.tester.json").read_text())
    assert tester["pgs"]["tester"]["trajectory"]  # the Tester's conversation is kept
    assert f"{I1}: chose candidate 2 of 2; 2 properties kept, 1 show the bug" in err
    assert "the Tester's properties cost $" in err

    # A rerun with the same model into the same folder keeps it: the Tester is not asked.
    with ScriptedServer([]) as server:
        assert _select(dataset, preds, out, *_model_flags(server.url)) == 0
        assert server.requests == []
    assert "kept from the earlier run" in capsys.readouterr().err
    assert _record(out).instances[I1].chosen == 2
