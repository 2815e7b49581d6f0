"""``pgs select``'s parts that need no container: reading the candidates from prediction files
and pgs runs, splitting a patch into code and tests, finding the issue's own code (probes) and
normalising what it printed, and the order (:func:`~agent.swebench.selection.rank.choose`) on
evidence built by hand. The sealed checks themselves: tests/swebench/test_select.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.errors import InstanceError
from agent.record.attempts import AttemptsRecord
from agent.record.attempts import Candidate as Attempt
from agent.record.selection import (
    SELECT_ORDER,
    Evidence,
    InstanceSelection,
    Probe,
    SelectCandidate,
    Source,
)
from agent.record.trajectory import RunRecord
from agent.swebench.selection.candidates import read_candidates, split_patch
from agent.swebench.selection.probes import MAX_PROBES, extract, normalise
from agent.swebench.selection.rank import choose
from tests.support.swe_dataset import I1, I2


def diff(path: str, old: str = "a = 1", new: str = "a = 2") -> str:
    """A one-line change of ``path`` as git writes it."""
    return (
        f"diff --git a/{path} b/{path}\n"
        "index 1111111..2222222 100644\n"
        f"--- a/{path}\n"
        f"+++ b/{path}\n"
        "@@ -1 +1 @@\n"
        f"-{old}\n"
        f"+{new}\n"
    )


FIX = diff("textkit/core.py")
OTHER = diff("textkit/core.py", new="a = 3")


def pred(iid: str, patch: str | None, model: str = "m") -> dict[str, object]:
    return {"instance_id": iid, "model_name_or_path": model, "model_patch": patch}


# --- candidates ---------------------------------------------------------------------------


def test_a_json_object_a_json_list_and_jsonl_are_read_alike(tmp_path: Path) -> None:
    as_object = tmp_path / "object.json"
    as_object.write_text(json.dumps({I1: pred(I1, FIX, "one"), I2: pred(I2, OTHER, "one")}))
    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps([pred(I1, FIX, "two"), pred(I2, OTHER, "two")]))
    as_lines = tmp_path / "lines.jsonl"
    as_lines.write_text("\n".join(json.dumps(pred(i, p, "three")) for i, p in [(I1, FIX)]) + "\n")
    for path, model in [(as_object, "one"), (as_list, "two")]:
        found = read_candidates([path])
        assert sorted(found) == [I1, I2]
        assert [c.patch for c in found[I1]] == [FIX] and [c.patch for c in found[I2]] == [OTHER]
        assert found[I1][0].sources == [Source(file=str(path), model=model)]
    found = read_candidates([as_lines])
    assert list(found) == [I1] and found[I1][0].patch == FIX
    assert found[I1][0].sources == [Source(file=str(as_lines), model="three")]


def test_jsonl_is_read_whatever_the_file_is_called(tmp_path: Path) -> None:
    # Agents write preds.json files of JSON lines; one line alone is one prediction too.
    lines = tmp_path / "preds.json"
    lines.write_text(json.dumps(pred(I1, FIX)) + "\n" + json.dumps(pred(I2, OTHER)) + "\n")
    assert {i: [c.patch for c in cs] for i, cs in read_candidates([lines]).items()} == {
        I1: [FIX],
        I2: [OTHER],
    }
    one = tmp_path / "one.json"
    one.write_text(json.dumps(pred(I1, FIX, "solo")) + "\n")
    found = read_candidates([one])
    assert list(found) == [I1] and found[I1][0].sources == [Source(file=str(one), model="solo")]


def test_the_same_patch_from_two_files_is_one_candidate_with_both_sources(tmp_path: Path) -> None:
    first = tmp_path / "first.json"
    first.write_text(json.dumps([pred(I1, OTHER, "agent-1")]))
    second = tmp_path / "second.json"
    second.write_text(json.dumps([pred(I1, FIX, "agent-2")]))
    third = tmp_path / "third.jsonl"
    third.write_text(json.dumps(pred(I1, OTHER, "agent-3")) + "\n")
    found = read_candidates([first, second, third])[I1]
    assert [(c.index, c.patch) for c in found] == [(1, OTHER), (2, FIX)]  # first read first
    assert found[0].sources == [
        Source(file=str(first), model="agent-1"),
        Source(file=str(third), model="agent-3"),
    ]
    assert found[1].sources == [Source(file=str(second), model="agent-2")]


def test_a_file_given_twice_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text(json.dumps([pred(I1, FIX, "agent")]))
    run = traj(tmp_path / "run" / I1 / f"{I1}.traj", None, submission=OTHER)
    same = tmp_path / "run" / ".." / "preds.json"
    found = read_candidates([path, same, run, tmp_path / "run"])[I1]
    assert [(c.patch, len(c.sources)) for c in found] == [(FIX, 1), (OTHER, 1)]


def test_patches_differing_only_in_whitespace_are_two_candidates(tmp_path: Path) -> None:
    # preds.json carries the chosen patch byte for byte: what is merged must be the same bytes.
    path = tmp_path / "preds.json"
    path.write_text(json.dumps([pred(I1, FIX, "a"), pred(I2, FIX + "\n", "a")]))
    other = tmp_path / "other.json"
    other.write_text(json.dumps([pred(I1, FIX + "\n", "b")]))
    found = read_candidates([path, other])[I1]
    assert [c.patch for c in found] == [FIX, FIX + "\n"]


def test_empty_patches_are_no_candidates(tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text(json.dumps([pred(I1, ""), pred(I2, None)]))
    other = tmp_path / "other.json"
    other.write_text(json.dumps([pred(I1, " \n"), pred(I2, FIX)]))
    found = read_candidates([path, other])
    assert list(found) == [I2] and [c.patch for c in found[I2]] == [FIX]


def traj(path: Path, attempts: list[str] | None, submission: str = "") -> Path:
    record = RunRecord()
    record.info.submission = submission
    if attempts is not None:
        record.attempts = AttemptsRecord(
            count=len(attempts),
            candidates=[Attempt(attempt=k, patch=p) for k, p in enumerate(attempts, 1)],
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.dumps())
    return path


def test_a_traj_with_attempts_gives_each_attempt_as_a_source(tmp_path: Path) -> None:
    path = traj(tmp_path / "run" / I1 / f"{I1}.traj", [FIX, "", OTHER, FIX], submission=FIX)
    found = read_candidates([path])[I1]
    assert [c.patch for c in found] == [FIX, OTHER]
    assert [s.file for s in found[0].sources] == [f"{path}#attempt-1", f"{path}#attempt-4"]
    assert [s.file for s in found[1].sources] == [f"{path}#attempt-3"]
    assert {s.model for c in found for s in c.sources} == {"pgs"}
    # A run folder: every .traj in it; a single run's submission is its patch.
    traj(tmp_path / "run" / I2 / f"{I2}.traj", None, submission=OTHER)
    found = read_candidates([tmp_path / "run"])
    assert sorted(found) == [I1, I2] and len(found[I1]) == 2
    single = tmp_path / "run" / I2 / f"{I2}.traj"
    assert found[I2][0].sources == [Source(file=str(single), model="pgs")]


def test_an_attempts_run_folder_gives_each_attempt_once(tmp_path: Path) -> None:
    # pgs run --attempts writes <id>/<id>.traj (the attempts record) and each attempt's own
    # run in <id>/attempt-<k>/<id>.traj: the same patches, one submission each.
    run = tmp_path / "run"
    chosen = traj(run / I1 / f"{I1}.traj", [FIX, OTHER], submission=OTHER)
    traj(run / I1 / "attempt-1" / f"{I1}.traj", None, submission=FIX)
    traj(run / I1 / "attempt-2" / f"{I1}.traj", None, submission=OTHER)
    found = read_candidates([run])[I1]
    assert [(c.patch, [s.file for s in c.sources]) for c in found] == [
        (FIX, [f"{chosen}#attempt-1"]),
        (OTHER, [f"{chosen}#attempt-2"]),
    ]
    # Stopped before the attempts record was written: the attempts' own runs are all there is.
    chosen.unlink()
    found = read_candidates([run])[I1]
    assert [(c.patch, len(c.sources)) for c in found] == [(FIX, 1), (OTHER, 1)]
    assert found[0].sources[0].file == str(run / I1 / "attempt-1" / f"{I1}.traj")


def test_a_missing_or_unreadable_input_is_an_instance_error(tmp_path: Path) -> None:
    with pytest.raises(InstanceError, match=r"no predictions file .*nope\.json"):
        read_candidates([tmp_path / "nope.json"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InstanceError, match="folder without pgs runs"):
        read_candidates([tmp_path / "empty"])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InstanceError, match="not JSON or JSONL"):
        read_candidates([bad])
    (tmp_path / "broken.traj").write_text("[1, 2")
    with pytest.raises(InstanceError, match="cannot read the pgs run"):
        read_candidates([tmp_path / "broken.traj"])


def test_split_patch_puts_test_files_in_the_test_part() -> None:
    code, tests = diff("textkit/core.py"), diff("tests/test_core.py") + diff("pkg/io_test.py")
    patch = diff("tests/test_core.py") + diff("textkit/core.py") + diff("pkg/io_test.py")
    assert split_patch(patch) == (code, tests)
    # conftest.py, docs and a file only named like a test folder are code, not tests.
    rest = diff("tests/conftest.py") + diff("docs/test_notes.md") + diff("testing/util.py")
    assert split_patch(rest) == (rest, "")
    # A patch without git headers stays whole.
    bare = "--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert split_patch(bare) == (bare, "")


paths = st.lists(
    st.tuples(
        st.sampled_from(["pkg", "tests", "src/pkg/sub", "testing"]),
        st.sampled_from(["core.py", "test_core.py", "core_test.py", "conftest.py", "README"]),
    ),
    min_size=1,
    max_size=6,
    unique=True,
)


@given(paths)
@example([("tests", "test_core.py"), ("pkg", "core.py")])
def test_split_patch_keeps_every_file_diff_once_in_order(files: list[tuple[str, str]]) -> None:
    diffs = [diff(f"{folder}/{name}") for folder, name in files]
    code, tests = split_patch("".join(diffs))
    is_test = [name.startswith("test_") or name.endswith("_test.py") for _, name in files]
    assert code == "".join(d for d, t in zip(diffs, is_test, strict=True) if not t)
    assert tests == "".join(d for d, t in zip(diffs, is_test, strict=True) if t)


# --- probes -------------------------------------------------------------------------------


def test_a_fenced_python_block_is_a_probe() -> None:
    issue = (
        "slugify keeps capitals\n\n```python\nfrom textkit.core import slugify\n"
        "print(slugify('Hello World'))\n```\n\nIt should print hello-world."
    )
    assert extract(issue) == ["from textkit.core import slugify\nprint(slugify('Hello World'))"]
    # An unnamed fence is taken as Python when it parses; CRLF issues alike.
    assert extract(issue.replace("```python", "```").replace("\n", "\r\n")) == extract(issue)


def test_inline_triple_backticks_open_no_fence() -> None:
    issue = "```slugify(x)``` keeps capitals:\n\n```python\nprint(slugify('A B'))\n```\n"
    assert extract(issue) == ["print(slugify('A B'))"]


def test_a_console_session_drops_its_outputs() -> None:
    issue = (
        "Look:\n\n>>> from textkit.core import slugify\n>>> for w in ['A b']:\n"
        "...     print(slugify(w))\n...\nA-b\n>>> slugify('Hello World')\n'Hello-World'\n\n"
        "It should be lower case."
    )
    assert extract(issue) == [
        "from textkit.core import slugify\nfor w in ['A b']:\n    print(slugify(w))\n\n"
        "slugify('Hello World')"
    ]


def test_an_ipython_session_drops_its_prompts_and_outputs() -> None:
    issue = (
        "```ipython\nIn [1]: from textkit.core import slugify\n\nIn [2]: def f(x):\n"
        "   ...:     return slugify(x)\n   ...:\n\nIn [3]: f('Hello World')\n"
        "Out[3]: 'Hello-World'\n```\n"
    )
    assert extract(issue) == [
        "from textkit.core import slugify\ndef f(x):\n    return slugify(x)\n\nf('Hello World')"
    ]


def test_a_python_block_with_an_ellipsis_line_is_no_console_session() -> None:
    # ``...`` as a body (or a placeholder) is Python, not a console's continuation prompt.
    code = "class Base:\n    def run(self):\n        ...\n\nprint(Base().run())"
    assert extract(f"```python\n{code}\n```\n") == [code]
    placeholder = "from textkit.core import slugify\n...\nprint(slugify('A B'))"
    assert extract(f"```\n{placeholder}\n```\n") == [placeholder]


def test_shell_blocks_tracebacks_and_bare_imports_are_no_probes() -> None:
    issue = (
        "```bash\npip install textkit\npython -c 'print(1)'\n```\n"
        "```sh\nx = 1\n```\n"
        '```\nTraceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
        "ValueError: bad\n```\n"
        "```python\nimport textkit\nfrom textkit import core\n```\n"
        "```pytb\nTraceback (most recent call last):\nKeyError: 'x'\n```\n"
        "```python\nprint(1)\n```\n"
        "```python\nprint(1)\n```\n"
    )
    assert extract(issue) == ["print(1)"]  # the one Python block, once


def test_at_most_max_probes_are_taken_in_the_issues_order() -> None:
    issue = "".join(f"```python\nprint({i})\n```\n\n" for i in range(MAX_PROBES + 3))
    assert extract(issue) == [f"print({i})" for i in range(MAX_PROBES)]


statements = st.lists(
    st.sampled_from(["x = 1", "print(x)", "...", "pass", "y = [1, 2]", "print('a b')", "x"]),
    min_size=1,
    max_size=4,
)
blocks = st.lists(
    st.tuples(statements, st.sampled_from(["python", "py", "", "pycon", "bash", "console"])),
    min_size=1,
    max_size=9,
)


@given(blocks)
@example([(["...", "print(x)"], "python")])
def test_fenced_python_blocks_are_the_probes_in_order_once(
    found: list[tuple[list[str], str]],
) -> None:
    issue = "The bug:\n\n" + "".join(
        f"```{lang}\n" + "\n".join(code) + "\n```\n\nand then\n" for code, lang in found
    )
    expected: list[str] = []
    for code, lang in found:
        text = "\n".join(code)
        if lang not in ("bash", "console") and text not in expected:
            expected.append(text)
    assert extract(issue) == expected[:MAX_PROBES]


@given(statements, st.sampled_from(["1", "'a b'", "[1, 2]", "Ellipsis"]))
@example(["...", "x"], "Ellipsis")
def test_a_console_session_gives_the_code_typed_at_its_prompts(code: list[str], out: str) -> None:
    typed = "".join(f">>> {line}\n" + (f"{out}\n" if line == "x" else "") for line in code)
    assert extract(f"In a console:\n\n{typed}\nIt is wrong.") == ["\n".join(code)]
    assert extract(f"```pycon\n{typed}```\n") == ["\n".join(code)]


def test_normalise_takes_out_addresses_temporary_paths_and_trailing_blanks() -> None:
    one = "<Slug object at 0x7f3a2b1c4d50>   \nFile /tmp/tmpab12_x/case.py\n\n"
    two = "<Slug object at 0x7f00deadbeef>\nFile /tmp/pytest-of-root/7/case.py  \n"
    assert normalise(one) == normalise(two) == "<Slug object at 0x…>\nFile /tmp/…"
    assert normalise("0x1f is short") == "0x1f is short"  # a number, not an address
    assert normalise("Hello-World") != normalise("hello-world")


# --- rank ---------------------------------------------------------------------------------


def selection(
    *evidence: Evidence, sources: list[int] | None = None, probes: int = 0
) -> InstanceSelection:
    """An instance whose candidate ``k`` (1, 2, ...) has ``evidence[k - 1]``."""
    counts = sources or [1] * len(evidence)
    return InstanceSelection(
        instance_id=I1,
        candidates=[
            SelectCandidate(
                index=k,
                patch=f"patch {k}\n",
                sources=[Source(file=f"agent-{k}-{n}.json") for n in range(counts[k - 1])],
                evidence=e,
            )
            for k, e in enumerate(evidence, 1)
        ],
        probes=[
            Probe(name=f"probe-{i}", code="print(1)", original="old") for i in range(1, probes + 1)
        ],
    )


def ranks(s: InstanceSelection) -> list[int]:
    return [c.rank for c in s.candidates]


def test_a_candidate_breaking_a_repository_test_loses_to_one_that_does_not() -> None:
    breaks = Evidence(broken=["tests/test_core.py::test_shout"], fail_to_pass_passed=1)
    s = choose(selection(breaks, Evidence(patch_lines=40)))
    assert s.chosen == 2 and ranks(s) == [2, 1] and s.ties == []
    assert s.reason == (
        "candidate 2: over candidate 1 by repository tests broken (0 broken against 1 broken)"
    )
    assert s.order == list(SELECT_ORDER)
    assert s.candidates[1].key[SELECT_ORDER.index("repository tests broken")] == 0
    assert s.candidates[0].key[SELECT_ORDER.index("repository tests broken")] == 1


def test_passing_more_of_the_candidates_fail_to_pass_tests_wins() -> None:
    s = choose(
        selection(
            Evidence(fail_to_pass_total=2, fail_to_pass_passed=1),
            Evidence(fail_to_pass_total=2, fail_to_pass_passed=2, patch_lines=30),
        )
    )
    assert s.chosen == 2 and ranks(s) == [2, 1]
    assert "by candidates' fail-to-pass tests passed (2 of 2 passed against 1 of 2 passed)" in (
        s.reason
    )


def test_the_largest_behaviour_cluster_wins_and_ties_are_recorded() -> None:
    alike = {"probe-1": "new"}
    s = choose(
        selection(
            Evidence(probes={"probe-1": "other"}, probes_changed=1),
            Evidence(probes=alike, probes_changed=1, cross={"t::a": "passed"}),
            Evidence(probes=alike, probes_changed=1, cross={"t::a": "passed"}),
            probes=1,
        )
    )
    by = {c.index: c.evidence for c in s.candidates}
    assert (by[2].cluster, by[2].cluster_sources) == (0, 2)
    assert (by[3].cluster, by[3].cluster_sources) == (0, 2)
    assert (by[1].cluster, by[1].cluster_sources) == (1, 1)
    assert s.chosen == 2 and s.ties == [3] and ranks(s) == [3, 1, 2]
    assert s.reason == (
        "candidate 2: over candidate 1 by behaviour cluster (2 submissions behave alike against "
        "1 submissions behave alike); tied on every key with candidate 3 (the first read is chosen)"
    )


def test_submissions_of_the_same_patch_vote_for_its_cluster() -> None:
    s = choose(selection(Evidence(probes={"p": "x"}), Evidence(probes={"p": "y"}), sources=[1, 3]))
    assert s.chosen == 2 and s.candidates[1].evidence.cluster_sources == 3
    assert "by behaviour cluster (3 submissions" in s.reason


def test_a_candidate_whose_probes_print_what_the_original_did_gets_no_votes() -> None:
    unchanged = {"probe-1": "old"}
    s = choose(
        selection(
            Evidence(probes=unchanged),
            Evidence(probes=unchanged),
            Evidence(probes={"probe-1": "new"}, probes_changed=1, patch_lines=99),
            sources=[2, 2, 1],
            probes=1,
        )
    )
    by = {c.index: c.evidence for c in s.candidates}
    assert by[1].cluster_sources == by[2].cluster_sources == 0  # 4 submissions, no votes
    assert by[3].cluster_sources == 1
    assert s.chosen == 3
    assert s.reason.startswith(
        "candidate 3: over candidates 1, 2 by changes the issue's behaviour (1 probes changed "
        "against 0 probes changed)"
    )


def test_without_probes_changing_nothing_is_no_key() -> None:
    s = choose(selection(Evidence(patch_lines=9), Evidence(patch_lines=3)))
    assert s.chosen == 2 and s.reason.endswith("by patch size (3 lines against 9 lines)")


def test_a_patch_that_does_not_apply_is_last_even_against_a_broken_one() -> None:
    s = choose(
        selection(
            Evidence(applies=False, apply_error="error: patch failed: textkit/core.py:1"),
            Evidence(broken=["t::a", "t::b", "t::c"]),
            Evidence(error="DockerError: the container died"),
        )
    )
    assert s.chosen == 2 and ranks(s) == [2, 1, 3]
    assert s.reason == (
        "candidate 2: over candidates 1, 3 by applies (applies against does not apply)"
    )
    assert [c.evidence.cluster for c in s.candidates] == [-1, 0, -1]
    # A check that failed is named so, not taken for a patch that does not apply.
    s = choose(selection(Evidence(error="DockerError: the container died"), Evidence()))
    assert s.chosen == 2
    assert s.reason == "candidate 2: over candidate 1 by applies (applies against check failed)"


def test_one_candidate_and_none() -> None:
    s = choose(selection(Evidence(applies=False)))
    assert s.chosen == 1 and s.reason == "candidate 1 is the only one" and ranks(s) == [1]
    s = choose(selection())
    assert s.chosen is None and s.reason == "no candidate"


# --- resuming -----------------------------------------------------------------------------


def test_a_finished_instance_is_reused_and_one_with_an_error_is_not(tmp_path: Path) -> None:
    from agent.pgs.runner import CheckSettings
    from agent.swebench import Instance
    from agent.swebench.selection.candidates import Candidate, candidates_hash
    from agent.swebench.selection.run import _reusable, select_all

    mine = [Candidate(1, OTHER), Candidate(2, FIX + "\n\n")]
    done = choose(selection(Evidence(broken=["t::a"]), Evidence()))
    for c, patch in zip(done.candidates, (OTHER, FIX + "\n\n"), strict=True):
        c.patch = patch
    done.candidates_hash = candidates_hash(mine)
    out = tmp_path / "out"
    (out / "instances").mkdir(parents=True)
    saved = out / "instances" / f"{I1}.json"
    saved.write_text(done.model_dump_json(indent=1))
    instance = Instance.from_record({"instance_id": I1, "repo": "acme/textkit", "base_commit": "b"})
    # Nothing to check: no image, no container (envs is never used).
    result = select_all(
        [instance],
        {I1: mine},
        None,
        CheckSettings(),
        out,
        predictions=["p.json"],
    )
    assert result.reused == [I1] and result.checked == []
    preds = json.loads((out / "preds.json").read_text())
    assert preds == {
        I1: {"instance_id": I1, "model_name_or_path": "pgs-select", "model_patch": FIX + "\n\n"}
    }
    record = json.loads((out / "selection.json").read_text())
    assert record["predictions"] == ["p.json"] and record["instances"][I1]["chosen"] == 2

    assert _reusable(saved, mine[:1]) is None  # other candidates
    done.candidates[0].evidence.error = "DockerError: the container died"
    saved.write_text(done.model_dump_json(indent=1))
    assert _reusable(saved, mine) is None  # a candidate's check to do again
    done.candidates[0].evidence.error = None
    done.error = "ImageBuildError: no network"
    saved.write_text(done.model_dump_json(indent=1))
    assert _reusable(saved, mine) is None
    saved.write_text("{half a file")
    assert _reusable(saved, mine) is None


def test_a_rerun_with_more_submissions_of_the_same_patches_ranks_them_again(
    tmp_path: Path,
) -> None:
    from agent.pgs.runner import CheckSettings
    from agent.swebench import Instance
    from agent.swebench.selection.candidates import Candidate, candidates_hash
    from agent.swebench.selection.run import select_all

    # Two patches the checks cannot tell apart: the first read is chosen...
    first = [
        Candidate(1, OTHER, [Source(file="a.json")]),
        Candidate(2, FIX, [Source(file="b.json")]),
    ]
    done = choose(selection(Evidence(), Evidence()))
    for c, patch in zip(done.candidates, (OTHER, FIX), strict=True):
        c.patch = patch
    done.candidates_hash = candidates_hash(first)
    assert done.chosen == 1 and done.ties == [2]
    out = tmp_path / "out"
    (out / "instances").mkdir(parents=True)
    (out / "instances" / f"{I1}.json").write_text(done.model_dump_json(indent=1))
    # ...until a third file submits the second one too: no check again, a new order.
    again = [first[0], Candidate(2, FIX, [Source(file="b.json"), Source(file="c.json")])]
    instance = Instance.from_record({"instance_id": I1, "repo": "acme/textkit", "base_commit": "b"})
    result = select_all([instance], {I1: again}, None, CheckSettings(), out, predictions=[])
    assert result.reused == [I1]
    mine = json.loads((out / "instances" / f"{I1}.json").read_text())
    assert [len(c["sources"]) for c in mine["candidates"]] == [1, 2]
    assert mine["chosen"] == 2 and mine["ties"] == []
    assert "by identical submissions (2 submissions against 1 submissions)" in mine["reason"]
    assert json.loads((out / "preds.json").read_text())[I1]["model_patch"] == FIX
    assert json.loads((out / "selection.json").read_text())["instances"][I1] == mine
