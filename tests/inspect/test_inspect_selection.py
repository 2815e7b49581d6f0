"""``pgs inspect`` on a ``pgs select`` output: what a person reads of the choice.

- A selection built from the record's models (:mod:`agent.record.selection`), ranked by the
  order ``pgs select`` uses (:func:`agent.swebench.selection.rank.choose`) and written as
  ``pgs select`` writes it (:func:`agent.swebench.selection.run.write_outputs`): printed, each
  instance shows the chosen candidate, the reason, the ties, every candidate's sources and
  evidence (the broken tests by name), its patch and the change from the chosen one;
  ``--instance`` picks one; an instance's own file reads too; ``-o`` writes the same as a page.
- A selection.json of the shape a real ``pgs select`` run wrote (``data/``: SWE-bench's
  psf__requests-1142 among 86 prediction files, the two 860 KB patches cut to their first file).
- What is no selection, or holds no such instance, is one ``pgs: error:`` line and exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent.cli import main
from agent.record.selection import (
    AddedTest,
    Evidence,
    InstanceSelection,
    Probe,
    SelectCandidate,
    SelectionRecord,
    Source,
)
from agent.swebench.selection.rank import choose
from agent.swebench.selection.run import write_outputs

ROOT = Path(__file__).resolve().parents[2]
REAL = Path(__file__).with_name("data") / "select-psf__requests-1142.json"
BROKEN = "tests/test_calc.py::test_negative_numbers"
ADDED = "tests/test_calc.py::test_add"


def patch(body: str) -> str:
    return (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n"
        f"@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    {body}\n"
    )


def evidence(**fields: object) -> Evidence:
    base: dict[str, object] = {
        "related_run": 7,
        "probes": {"probe-1": "3"},
        "probes_changed": 1,
        "cross": {ADDED: "passed"},
        "fail_to_pass_total": 1,
        "fail_to_pass_passed": 1,
        "issue_files": 1,
        "code_files": 1,
        "patch_lines": 2,
    }
    return Evidence.model_validate({**base, **fields})


def calc_selection() -> InstanceSelection:
    """Three candidates: 2 (submitted twice) and 1 behave alike, 3 breaks a repository test."""
    candidates = [
        SelectCandidate(
            index=1,
            patch=patch("return a + b"),
            sources=[Source(file="preds/agent-c.json", model="agent-c")],
            evidence=evidence(own_tests=1),
        ),
        SelectCandidate(
            index=2,
            patch=patch("return b + a"),
            sources=[
                Source(file="preds/agent-a.json", model="agent-a"),
                Source(file="preds/agent-b.json", model="agent-b"),
            ],
            evidence=evidence(),
        ),
        SelectCandidate(
            index=3,
            patch=patch("return abs(a) + b"),
            sources=[Source(file="preds/agent-d.json", model="agent-d")],
            evidence=evidence(broken=[BROKEN], cross={ADDED: "failed"}, fail_to_pass_passed=0),
        ),
    ]
    selection = InstanceSelection(
        instance_id="calc__calc-1",
        candidates=candidates,
        probes=[Probe(name="probe-1", code="add(1, 2)", original="-1")],
        added_tests=[AddedTest(nodeid=ADDED, by=[1], original="failed")],
        related=["tests/test_calc.py"],
        candidates_hash="c0ffee",
        seconds={"image": 1.5, "base": 3.0, "candidates": 9.0},
    )
    return choose(selection)


def tied_selection() -> InstanceSelection:
    """Two candidates the evidence cannot tell apart: the first read is chosen, tied with 2."""
    same = {"probes": {}, "probes_changed": 0, "cross": {}, "fail_to_pass_total": 0}
    selection = InstanceSelection(
        instance_id="calc__calc-2",
        candidates=[
            SelectCandidate(
                index=i,
                patch=patch(body),
                sources=[Source(file=f"preds/{name}.json", model=name)],
                evidence=evidence(**same, fail_to_pass_passed=0),
            )
            for i, body, name in ((1, "return a + b", "agent-e"), (2, "return b + a", "agent-f"))
        ],
        candidates_hash="beef",
    )
    return choose(selection)


def failed_selection() -> InstanceSelection:
    return InstanceSelection(
        instance_id="calc__calc-3",
        candidates=[SelectCandidate(index=1, patch=patch("return a + b"))],
        error="ImageError: the image of calc__calc-3 did not build",
    )


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """A ``pgs select`` output folder: selection.json, preds.json, instances/<id>.json."""
    out = tmp_path / "select-out"
    (out / "instances").mkdir(parents=True)
    record = SelectionRecord(
        predictions=[f"preds/agent-{x}.json" for x in "abcdef"],
        instances={
            s.instance_id: s for s in (calc_selection(), tied_selection(), failed_selection())
        },
    )
    for iid, selection in record.instances.items():
        (out / "instances" / f"{iid}.json").write_text(selection.model_dump_json(indent=1))
    write_outputs(out, record)
    return out


def inspect_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = main(["inspect", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def section(text: str, start: str, end: str | None = None) -> str:
    """The part of the printed text from ``start`` to ``end`` (or its end)."""
    assert start in text, text
    rest = text.split(start, 1)[1]
    return rest.split(end, 1)[0] if end is not None else rest


def test_the_chosen_candidate_the_reason_and_every_candidates_evidence_are_printed(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = inspect_text(capsys, str(out_dir))
    chosen = calc_selection()
    assert chosen.chosen == 2  # submitted twice, behaves as 1 does, breaks nothing
    assert "3 instances from 6 prediction files" in text
    assert "calc__calc-1: candidate 2 of 3 chosen" in text
    assert f"reason: {chosen.reason}" in text
    assert "over candidate 3 by repository tests broken (0 broken against 1 broken)" in text
    instance = section(text, "━━ calc__calc-1", "━━ calc__calc-2")
    # best rank first, the chosen one marked, with both its sources
    two = section(instance, "Candidate 2 · rank 1 · chosen", "Candidate 1 ·")
    assert "agent-a  preds/agent-a.json" in two and "agent-b  preds/agent-b.json" in two
    assert "candidates' fail-to-pass tests passed: 1 of 1" in two
    assert "issue's probes changed: 1 of 1 (probe-1)" in two
    assert "Change from the chosen patch" not in two
    assert "+    return b + a" in section(two, "Patch:")
    one = section(instance, "Candidate 1 · rank 2\n", "Candidate 3 ·")
    assert "agent-c  preds/agent-c.json" in one
    assert "own tests: 1 added or changed, 0 failing" in one
    change = section(one, "Change from the chosen patch (interdiff):", "Patch:")
    assert "-    return b + a" in change and "+    return a + b" in change
    three = section(instance, "Candidate 3 · rank 3\n")
    assert "repository tests broken: 1 (7 related tests ran)" in three
    assert BROKEN in three
    assert f"✗ {ADDED} (failed)" in three
    assert f"{ADDED}  by 1, on the original code: failed" in instance
    # the tie, and the instance whose check did not run
    tied = section(text, "━━ calc__calc-2", "━━ calc__calc-3")
    assert "ties: candidate 2 (equal on every key; the first read is chosen)" in tied
    assert "Candidate 2 · rank 2 · tied with the chosen one" in tied
    failed = section(text, "━━ calc__calc-3")
    assert "none of 1 candidates chosen" in failed
    assert "error: ImageError: the image of calc__calc-3 did not build" in failed
    # the instances' summary lines come first
    summary = section(text, "Instances", "━━ calc__calc-1")
    assert "calc__calc-1  candidate 2 of 3 (agent-a, agent-b)" in summary
    assert "calc__calc-3  error: ImageError" in summary


def test_one_instance_by_flag_or_by_its_own_file(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        [str(out_dir), "--instance", "calc__calc-2"],
        [str(out_dir / "selection.json"), "--instance", "calc__calc-2"],
        [str(out_dir / "instances" / "calc__calc-2.json")],
    ):
        text = inspect_text(capsys, *argv)
        assert "calc__calc-2: candidate 1 of 2 chosen" in text, argv
        assert "calc__calc-1" not in text and "calc__calc-3" not in text, argv
        assert "agent-e  preds/agent-e.json" in text


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def page_text(path: Path) -> str:
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join(" ".join(parser.parts).split())


def test_the_page_shows_the_same_choice(
    out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = inspect_text(capsys, str(out_dir), "-o", str(tmp_path / "page.html"))
    assert printed.startswith(f"wrote {tmp_path / 'page.html'} (")
    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    text = page_text(tmp_path / "page.html")
    assert "calc__calc-1: candidate 2 of 3 chosen" in text
    assert " ".join(calc_selection().reason.split()) in text
    assert BROKEN in text
    assert "agent-b" in text and "agent-b.json" in text
    assert "(equal on every key; the first read is chosen)" in text
    assert "error: ImageError: the image of calc__calc-3 did not build" in text
    assert "http://" not in html and "https://" not in html  # the page loads nothing


def test_open_writes_the_page_beside_selection_json_and_opens_it(
    out_dir: Path, tmp_path: Path
) -> None:
    opened = tmp_path / "opened.txt"
    fake = tmp_path / "browser.py"
    fake.write_text(f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "inspect", str(out_dir), "--open"],
        cwd=ROOT,
        env={**env, "BROWSER": f"{sys.executable} {fake} %s"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    page = out_dir / "selection.html"
    assert done.stdout.startswith(f"wrote {page} (")
    assert opened.read_text() == page.resolve().as_uri()
    assert "calc__calc-1: candidate 2 of 3 chosen" in page_text(page)


def test_a_selection_json_a_real_run_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(REAL.read_text(encoding="utf-8"))
    assert "code_files" not in data["instances"]["psf__requests-1142"]["candidates"][0]["evidence"]
    out = tmp_path / "try1"
    out.mkdir()
    (out / "selection.json").write_text(REAL.read_text(encoding="utf-8"))
    text = inspect_text(capsys, str(out))
    assert "1 instance from 86 prediction files" in text
    assert "psf__requests-1142: candidate 10 of 11 chosen" in text
    assert data["instances"]["psf__requests-1142"]["reason"] in text
    assert "Candidate 11 · rank 2 · tied with the chosen one" in text
    six = section(text, "Candidate 6 · rank 3", "Candidate 1 ·")
    assert "Prometheus-v1.2.1_+_GPT-5" in six and "Prometheus-v1.2_+_GPT-5" in six
    assert "related test files: test_requests.py" in text
    assert "changed code files the issue names: 1\n" in text  # no code_files in this file
    assert "build/lib/requests/__init__.py  added" in text
    page = inspect_text(capsys, str(out), "-o", str(tmp_path / "pages"))
    assert page.startswith(f"wrote {tmp_path / 'pages' / 'selection.html'} (")
    assert "candidate 10 of 11 chosen" in page_text(tmp_path / "pages" / "selection.html")


def test_what_is_no_selection_or_no_such_instance_is_one_error_line(
    out_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_json = tmp_path / "a" / "selection.json"
    not_json.parent.mkdir()
    not_json.write_text("{ not json")
    not_selection = tmp_path / "b" / "selection.json"
    not_selection.parent.mkdir()
    not_selection.write_text("[]")
    damaged = tmp_path / "c" / "selection.json"
    damaged.parent.mkdir()
    damaged.write_text(json.dumps({"order": [], "instances": {"x": {"candidates": 3}}}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.traj").write_text(json.dumps({"trajectory": [], "info": {}}))
    cases = {
        (str(out_dir), "--instance", "nope__nope-1"): "holds no instance nope__nope-1: it holds "
        "calc__calc-1, calc__calc-2, calc__calc-3",
        (str(not_json.parent),): "is not JSON",
        (str(not_selection),): "is JSON but not a pgs select output",
        (str(damaged.parent),): "is not a readable selection: instances.x",
        (str(run), "--instance", "calc__calc-1"): "--instance goes with a pgs select output",
        (str(out_dir), "--eval", str(out_dir)): "grade a selection with pgs eval",
        (str(tmp_path / "nowhere"),): "does not exist",
    }
    for argv, words in cases.items():
        capsys.readouterr()
        assert main(["inspect", *argv]) == 2, argv
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pgs: error: "), (argv, err)
        assert words in lines[0], (argv, lines[0])
        assert out == ""
    assert list(tmp_path.glob("**/*.html")) == []
