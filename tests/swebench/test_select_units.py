"""``pgs select``'s parts that need no container: reading the candidates from prediction files
and pgs runs, and splitting a patch into code and tests. The probes are in test_select_probes.py,
the order and reruns in test_select_rank.py; the sealed checks themselves:
tests/swebench/test_select.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent.errors import InstanceError
from agent.record.attempts import AttemptsRecord
from agent.record.attempts import Candidate as Attempt
from agent.record.selection import Source
from agent.record.trajectory import RunRecord
from agent.swebench.selection.candidates import read_candidates, split_patch
from tests.support.select_patches import FIX, OTHER, diff
from tests.support.swe_dataset import I1, I2


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
