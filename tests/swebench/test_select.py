"""``pgs select`` through the real command, on the dataset of :mod:`tests.support.swe_dataset`:
real prediction files from several scripted "agents" for ``acme__textkit-1`` (slugify keeps
capitals), real instance images and sealed containers.

The agents' files, in the order given (candidate numbers in brackets):

- ``agent-broken`` [1]: the fix, but ``shout`` loses its "!" (a repository test of the related
  test file fails), with a right test of its own (it fails on the original code);
- ``agent-right`` [2], a JSON list: the record's gold patch;
- ``agent-contra`` [3]: changes nothing the issue shows, with a test asserting the buggy
  behaviour (it fails on the right fix) in a test file of its own;
- ``agent-stale`` [4]: a patch made against other code, which does not apply;
- ``agent-again`` [2], JSONL: the gold patch again, merged with agent-right's;
- ``agent-same-name`` [5]: joins the words with "_" (a repository test fails) and adds a test
  named as agent-broken's, asserting that: the other candidates are judged on one version of
  it, the one whose outcome on the original code is recorded (the first read).

The records file the selection reads has the issue's own code in its problem statement (a
fenced block and a ``>>>`` session) and no hidden tests and no gold patch: what decides cannot
come from them. ``pgs eval`` grades the chosen patch against the dataset's real records.
One selection run (the module's fixture) is shared by the Docker tests; the rerun and the
changed candidate set work on copies of its folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envs.docker_util import LABEL, PID_LABEL, RUN_LABEL
from tests.support.swe_dataset import I1, I2, Dataset, git, make_dataset
from tests.support.textutil import ROOT, pgs_env

PGS = [sys.executable, "-m", "agent.cli"]
ISSUE = """slugify keeps capitals

```python
from textkit.core import slugify
print(slugify("Hello World"))
```

prints `Hello-World`. In a console:

>>> from textkit.core import slugify
>>> slugify("Hello World")
'Hello-World'

Its docstring promises lower-case words joined by dashes: hello-world.
"""
CORE, TESTS = "textkit/core.py", "tests/test_core.py"
SHOUT_TEST = "tests/test_core.py::test_shout"
SPACES_TEST = "tests/test_core.py::test_slugify_spaces"
RIGHT_TEST = "tests/test_core.py::test_slugify_is_lower_case"
NEW_TESTS = "tests/test_slug.py"  # a test file the patch adds
CONTRA_TEST = "tests/test_slug.py::test_slugify_keeps_case"
BUGGY, FIXED = '"-".join(text.split())', '"-".join(text.lower().split())'


def added_test(name: str, expected: str) -> str:
    return (
        f"\n\ndef {name}():\n    from textkit.core import slugify\n\n"
        f'    assert slugify("Hello World") == "{expected}"\n'
    )


def patch_of(source: Path, base: str, edits: list[tuple[str, str, str]]) -> str:
    """The diff git writes for ``edits`` ((path, old, new); old empty: new is appended) made on
    ``base`` of the repository ``source``."""
    work = source.parent / "scratch"
    if not work.exists():
        subprocess.run(["git", "clone", "-q", str(source), str(work)], check=True)
    git(work, "checkout", "-q", "--force", base)
    for path, old, new in edits:
        text = (work / path).read_text() if (work / path).exists() else ""
        assert old in text, (path, old)
        (work / path).write_text(text.replace(old, new, 1) if old else text + new)
    git(work, "add", "-A")
    out = git(work, "diff", "--cached")
    git(work, "reset", "-q", "--hard")
    return out


@dataclass
class Agents:
    """The agents' patches and the prediction files they are in."""

    right: str
    broken: str
    contra: str
    stale: str
    same_name: str
    files: list[Path]


def make_agents(dataset: Dataset, folder: Path) -> Agents:
    record = dataset.record(I1)
    base, gold = record["base_commit"], record["patch"]
    broken = patch_of(
        dataset.source,
        base,
        [
            (CORE, 'return text.upper() + "!"', "return text.upper()"),
            (CORE, BUGGY, FIXED),
            (TESTS, "", added_test("test_slugify_is_lower_case", "hello-world")),
        ],
    )
    contra = patch_of(
        dataset.source,
        base,
        [
            (CORE, BUGGY, '"-".join(text.split()).strip("-")'),
            (NEW_TESTS, "", added_test("test_slugify_keeps_case", "Hello-World").lstrip()),
        ],
    )
    same_name = patch_of(
        dataset.source,
        base,
        [
            (CORE, BUGGY, '"_".join(text.lower().split())'),
            (TESTS, "", added_test("test_slugify_is_lower_case", "hello_world")),
        ],
    )
    stale = gold.replace(f"-    return {BUGGY}", '-    return "_".join(text.split())')
    assert stale != gold
    folder.mkdir(parents=True, exist_ok=True)

    def preds(name: str, patches: dict[str, str | None]) -> Path:
        return dataset.write_preds(folder / f"{name}.json", patches, name)

    right = folder / "agent-right.json"  # a JSON list
    right.write_text(
        json.dumps([{"instance_id": I1, "model_name_or_path": "agent-right", "model_patch": gold}])
    )
    again = folder / "agent-again.jsonl"
    again.write_text(
        json.dumps({"instance_id": I1, "model_name_or_path": "agent-again", "model_patch": gold})
        + "\n"
    )
    files = [
        preds("agent-broken", {I1: broken}),
        right,
        preds("agent-contra", {I1: contra, "acme__other-9": gold}),  # not in the records
        preds("agent-stale", {I1: stale}),
        again,
        preds("agent-same-name", {I1: same_name}),
    ]
    return Agents(gold, broken, contra, stale, same_name, files)


def select_records(dataset: Dataset, path: Path) -> Path:
    """The dataset's records with the issue's code in the problem statement and nothing the
    selection may not read: no hidden tests, no gold patch."""
    records = []
    for record in dataset.records:
        record = {**record, "patch": "", "test_patch": "", "FAIL_TO_PASS": [], "PASS_TO_PASS": []}
        if record["instance_id"] == I1:
            record["problem_statement"] = ISSUE
        records.append(record)
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def select_argv(dataset: Dataset, instances: Path, files: list[Path], out: Path) -> list[str]:
    return [
        *PGS,
        "select",
        "--predictions",
        *map(str, files),
        "--instances",
        str(instances),
        "--repos-dir",
        str(dataset.repos_dir),
        "--output-dir",
        str(out),
    ]


@dataclass
class Run:
    """One ``pgs select`` process and what it left."""

    code: int
    out: str
    err: str
    pid: int
    seconds: float
    seen: set[str]
    left: list[str]


def containers_of(client: Any, pid: int) -> list[Any]:
    """The containers a ``pgs select`` process started (labelled with its pid and run id)."""
    mine = {"label": [f"{LABEL}=1", f"{PID_LABEL}={pid}"]}
    found = client.containers.list(all=True, filters=mine, ignore_removed=True)
    return [c for c in found if str(c.labels.get(RUN_LABEL, "")).startswith("select-")]


def run(argv: list[str], client: Any = None, timeout: float = 1200) -> Run:
    """``argv`` as a process; with ``client``, the names of its containers are collected
    every second while it runs (``seen``), and those left after it ended (``left``)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: set[str] = set()
    try:
        while True:
            if client is not None:
                seen.update(c.name for c in containers_of(client, proc.pid))
            try:
                out, err = proc.communicate(timeout=1)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() - started > timeout:
                    raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = [c.name for c in containers_of(client, proc.pid)] if client is not None else []
    return Run(proc.returncode, out, err, proc.pid, time.monotonic() - started, seen, left)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


@pytest.fixture(scope="module")
def agents(dataset: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Agents:
    return make_agents(dataset, tmp_path_factory.mktemp("agents"))


@pytest.fixture(scope="module")
def records(dataset: Dataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return select_records(dataset, tmp_path_factory.mktemp("records") / "records.jsonl")


@dataclass
class Selected:
    out: Path
    run: Run
    selection: dict[str, Any]


@pytest.fixture(scope="module")
def selected(
    dataset: Dataset,
    agents: Agents,
    records: Path,
    docker_client: Any,
    base_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Selected:
    out = tmp_path_factory.mktemp("select") / "out"
    done = run(select_argv(dataset, records, agents.files, out), docker_client)
    assert done.code == 0, done.err
    selection = json.loads((out / "selection.json").read_text())
    return Selected(out, done, selection)


def candidates_of(selected: Selected) -> dict[int, dict[str, Any]]:
    return {c["index"]: c for c in selected.selection["instances"][I1]["candidates"]}


@pytest.mark.docker
def test_the_right_fix_is_chosen_and_preds_json_holds_its_patch_byte_for_byte(
    selected: Selected, agents: Agents
) -> None:
    preds = json.loads((selected.out / "preds.json").read_text())
    assert list(preds) == [I1]  # acme__textkit-2 had no candidate
    assert preds[I1] == {
        "instance_id": I1,
        "model_name_or_path": "pgs-select",
        "model_patch": agents.right,
    }
    assert preds[I1]["model_patch"].encode() == agents.right.encode()
    mine = selected.selection["instances"][I1]
    assert mine["chosen"] == 2 and mine["error"] is None
    assert f"[1/1] {I1}: chose candidate 2 of 5" in selected.run.err
    assert "1 instances, 5 distinct candidates from 6 files" in selected.run.err
    assert (selected.out / "instances" / f"{I1}.json").is_file()
    # Its containers carry the run's labels (seen while it ran), and none is left.
    assert selected.run.seen, "no container of the run was seen by its labels"
    assert selected.run.left == [], f"pgs select left containers: {selected.run.left}"


@pytest.mark.docker
def test_selection_json_holds_every_candidate_its_evidence_rank_and_why(
    selected: Selected, agents: Agents
) -> None:
    mine = selected.selection["instances"][I1]
    by = candidates_of(selected)
    assert [by[k]["patch"] for k in (1, 2, 3, 4, 5)] == [
        agents.broken,
        agents.right,
        agents.contra,
        agents.stale,
        agents.same_name,
    ]
    sources = {k: [(s["model"], Path(s["file"]).name) for s in c["sources"]] for k, c in by.items()}
    assert sources == {
        1: [("agent-broken", "agent-broken.json")],
        2: [("agent-right", "agent-right.json"), ("agent-again", "agent-again.jsonl")],
        3: [("agent-contra", "agent-contra.json")],
        4: [("agent-stale", "agent-stale.json")],
        5: [("agent-same-name", "agent-same-name.json")],
    }
    # The issue's code: two probes, printing the bug on the original code.
    assert [(p["name"], p["original"]) for p in mine["probes"]] == [
        ("probe-1", "Hello-World"),
        ("probe-2", "'Hello-World'"),
    ]
    broken, right, contra, stale, same = (by[k]["evidence"] for k in (1, 2, 3, 4, 5))
    assert right["applies"] and right["broken"] == [] and right["error"] is None
    assert right["probes"] == {"probe-1": "hello-world", "probe-2": "'hello-world'"}
    assert right["probes_changed"] == 2
    assert broken["broken"] == [SHOUT_TEST]
    assert broken["probes_changed"] == 2 and broken["own_tests"] == 1
    assert contra["broken"] == [] and contra["probes_changed"] == 0
    assert (broken["tests_changed"], contra["tests_changed"]) == ([TESTS], [NEW_TESTS])
    assert stale["applies"] is False and stale["apply_error"]
    assert same["broken"] == [SPACES_TEST] and same["probes"]["probe-1"] == "hello_world"
    # The added tests: the right one shows the bug, the contradicting one passes on the bug.
    added = {t["nodeid"]: (t["by"], t["original"]) for t in mine["added_tests"]}
    assert added == {RIGHT_TEST: ([1, 5], "failed"), CONTRA_TEST: ([3], "passed")}
    # agent-broken's version of RIGHT_TEST for those that do not have one; each its own.
    assert right["cross"] == {RIGHT_TEST: "passed", CONTRA_TEST: "failed"}
    assert same["cross"] == {RIGHT_TEST: "passed", CONTRA_TEST: "failed"}
    assert (same["own_tests"], same["own_tests_failing"]) == (1, 0)
    assert contra["cross"] == {RIGHT_TEST: "failed", CONTRA_TEST: "passed"}
    assert (right["fail_to_pass_passed"], right["fail_to_pass_total"]) == (1, 1)
    assert (contra["fail_to_pass_passed"], contra["fail_to_pass_total"]) == (0, 1)
    assert mine["related"] == [TESTS]
    # Ranks, and a reason naming the key that decided against each.
    assert {k: c["rank"] for k, c in by.items()} == {2: 1, 3: 2, 1: 3, 5: 4, 4: 5}
    assert mine["ties"] == []
    reason = mine["reason"]
    assert reason.startswith("candidate 2: ")
    assert "over candidate 3 by candidates' fail-to-pass tests passed" in reason
    assert "over candidates 1, 5 by repository tests broken (0 broken against 1 broken)" in reason
    assert "over candidate 4 by applies" in reason
    assert mine["order"] == selected.selection["order"]
    assert selected.selection["predictions"] == [str(p) for p in agents.files]


@pytest.mark.docker
def test_a_rerun_reuses_the_instance_and_a_changed_candidate_set_redoes_it(
    selected: Selected,
    dataset: Dataset,
    agents: Agents,
    records: Path,
    docker_client: Any,
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    shutil.copytree(selected.out, out)
    kept = (out / "instances" / f"{I1}.json").read_bytes()
    again = run(select_argv(dataset, records, agents.files, out), docker_client)
    assert again.code == 0, again.err
    assert f"[1/1] {I1}: kept from the earlier run" in again.err
    assert again.seen == set()  # not one container
    assert again.seconds < selected.run.seconds, (again.seconds, again.err)
    assert (out / "instances" / f"{I1}.json").read_bytes() == kept
    assert json.loads((out / "preds.json").read_text()) == json.loads(
        (selected.out / "preds.json").read_text()
    )

    # Only the right fix's two files now: other candidates, so the instance is done again.
    fewer = [p for p in agents.files if p.name in ("agent-right.json", "agent-again.jsonl")]
    redone = run(select_argv(dataset, records, fewer, out), docker_client)
    assert redone.code == 0, redone.err
    assert redone.seen and redone.left == []
    assert f"[1/1] {I1}: chose candidate 1 of 1" in redone.err
    assert "kept from the earlier run" not in redone.err
    mine = json.loads((out / "selection.json").read_text())["instances"][I1]
    assert [len(c["sources"]) for c in mine["candidates"]] == [2]
    assert mine["chosen"] == 1 and mine["reason"] == "candidate 1 is the only one"
    assert mine["candidates"][0]["evidence"]["probes_changed"] == 2
    assert json.loads((out / "instances" / f"{I1}.json").read_text()) == mine
    assert json.loads((out / "preds.json").read_text())[I1]["model_patch"] == agents.right


@pytest.mark.docker
def test_pgs_eval_resolves_the_chosen_patch(
    selected: Selected, dataset: Dataset, tmp_path: Path
) -> None:
    from agent.cli import main

    report = tmp_path / "report"
    argv = [
        "eval",
        "--predictions",
        str(selected.out / "preds.json"),
        "--instances",
        str(dataset.instances_file),  # the real records, hidden tests and all
        "--repos-dir",
        str(dataset.repos_dir),
        "--report-dir",
        str(report),
        "--run_id",
        "t",
    ]
    assert main(argv) == 0
    summary = json.loads((report / "pgs-select.t.json").read_text())
    assert summary["submitted_ids"] == [I1] and summary["resolved_ids"] == [I1]


def test_a_missing_predictions_file_is_one_error_line(
    dataset: Dataset, records: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent.cli import main

    missing = tmp_path / "nope.json"
    argv = select_argv(dataset, records, [missing], tmp_path / "out")[len(PGS) :]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"pgs: error: no predictions file {missing}"
    ]
    assert not (tmp_path / "out").exists()


def test_predictions_for_no_instance_of_the_records_are_one_error_line(
    dataset: Dataset,
    agents: Agents,
    records: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent.cli import main

    other = dataset.write_preds(tmp_path / "other.json", {"acme__other-9": agents.right})
    argv = select_argv(dataset, records, [other], tmp_path / "out")[len(PGS) :]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "pgs: error: no prediction in the files given has a patch for an instance of "
        f"{records}: check the instance ids"
    ]
    # Ids asked for that the records do not hold: the same one line.
    argv = select_argv(dataset, records, agents.files, tmp_path / "out")[len(PGS) :]
    assert main([*argv, "--instance-ids", I1, "acme__other-9"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"pgs: error: --instance-ids not in {records}: acme__other-9"
    ]
    # Candidates only for a record that is not asked for.
    assert main([*argv, "--instance-ids", I2]) == 2
    assert "no prediction in the files given" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
