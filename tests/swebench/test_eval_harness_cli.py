"""``pgs eval`` with the SWE-bench harness's interface, through the real CLI: ``--predictions
gold``, ``--instance-ids``, a rerun with the same run id skips the instances graded before
(``--force`` grades them again, ``--rewrite-reports`` grades their test output again),
``total_instances`` is the dataset's, every instance folder has the harness's
``run_instance.log``, and the summary has every key the installed swebench's
``make_run_report`` writes (read from its source here, not copied). Gold patches resolve.

The dataset of :mod:`tests.support.swe_dataset`; real containers only where a patch is run."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from tests.support.swe_dataset import I1, I2, Dataset, make_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def harness_report_keys() -> list[str]:
    """The keys of the summary swebench's ``make_run_report`` writes, from its source."""
    from swebench.harness import reporting

    tree = ast.parse(inspect.getsource(reporting.make_run_report))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["report"]
            and isinstance(node.value, ast.Dict)
        ):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            assert len(keys) == len(node.value.keys)
            return [str(k) for k in keys]
    raise AssertionError("make_run_report writes no `report = {...}` here")


def eval_argv(dataset: Dataset, predictions: str | Path, out: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "--predictions",
        str(predictions),
        "--instances",
        str(dataset.instances_file),
        "--repos-dir",
        str(dataset.repos_dir),
        "--report-dir",
        str(out),
        "--run_id",
        "t",
        *extra,
    ]


def folder(out: Path, model: str, iid: str) -> Path:
    return out / model / iid


def summary_of(out: Path, model: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"{model}.t.json").read_text())
    return data


def test_total_counts_the_dataset_and_a_rerun_skips_what_was_graded(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An empty patch is graded without a container: nothing here needs Docker.
    preds = dataset.write_preds(tmp_path / "preds.json", {I1: ""})
    out = tmp_path / "report"
    assert main(eval_argv(dataset, preds, out)) == 0
    summary = summary_of(out, "m")
    assert summary["total_instances"] == 2  # the dataset, not the one prediction
    assert summary["submitted_instances"] == 1 and summary["submitted_ids"] == [I1]
    assert summary["empty_patch_ids"] == [I1] and summary["incomplete_ids"] == [I2]
    log = (folder(out, "m", I1) / "run_instance.log").read_text()
    assert " - INFO - Empty patch: not run" in log
    capsys.readouterr()

    assert main(eval_argv(dataset, preds, out)) == 0
    err = capsys.readouterr().err
    assert "1 graded instances skipped" in err and "--force" in err
    assert summary_of(out, "m") == summary


def test_instance_ids_not_in_the_dataset_are_one_error_line(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = eval_argv(dataset, "gold", tmp_path / "report", "--instance-ids", I1, "acme__nope-9")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"pgs: error: --instance-ids not in {dataset.instances_file}: acme__nope-9"
    ]
    assert not (tmp_path / "report").exists()


@pytest.mark.docker
def test_gold_instance_ids_skip_force_and_rewrite_reports(
    dataset: Dataset, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    # The harness's spellings: --predictions_path gold, --instance_ids, --run_id.
    argv = eval_argv(dataset, "gold", out, "--instance_ids", I1)
    argv[argv.index("--predictions")] = "--predictions_path"
    assert main(argv) == 0
    summary = summary_of(out, "gold")
    assert summary["total_instances"] == 1  # the instances asked for
    assert summary["resolved_ids"] == [I1] and summary["completed_ids"] == [I1]
    assert summary["submitted_instances"] == 2  # the gold patches of the whole file
    missing = [k for k in harness_report_keys() if k not in summary]
    assert missing == [], missing
    assert "not_checkable_ids" in summary  # pgs's own keys stay
    assert not (out / "gold" / I2).exists()

    # The harness's folder: its file names, from its constants.
    from swebench.harness.constants import LOG_INSTANCE, LOG_REPORT, LOG_TEST_OUTPUT

    here = folder(out, "gold", I1)
    assert {LOG_INSTANCE, LOG_REPORT, LOG_TEST_OUTPUT, "patch.diff"} <= {
        p.name for p in here.iterdir()
    }
    log = (here / LOG_INSTANCE).read_text()
    for said in (
        "Image: pgs-sweb-acme-textkit-1",
        "(network off)",
        "$ git apply --verbose /tmp/patch.diff (exit code 0)",
        ">>>>> Applied Patch: by git apply --verbose",
        "running /bin/bash /eval.sh (timeout 1800 s)",
        "Result for acme__textkit-1: resolved: True; resolved; FAIL_TO_PASS 1/1, PASS_TO_PASS 2/2",
    ):
        assert said in log, said
    first_log = log
    capsys.readouterr()

    # The whole file now: the instance graded before is skipped, the other graded.
    assert main([*eval_argv(dataset, "gold", out), "--max_workers", "2"]) == 0
    err = capsys.readouterr().err
    assert "1 graded instances skipped" in err
    assert (here / LOG_INSTANCE).read_text() == first_log  # not run again
    summary = summary_of(out, "gold")
    assert summary["total_instances"] == 2 and summary["resolved_ids"] == [I1, I2]
    assert summary["resolved_instances"] == 2 and summary["error_ids"] == []
    report = json.loads((folder(out, "gold", I2) / LOG_REPORT).read_text())[I2]
    assert report["patch_successfully_applied"] and report["resolved"]
    assert report["tests_status"]["FAIL_TO_PASS"] == {
        "success": ["tests/test_core.py::test_count_words_double_space"],
        "failure": [],
    }
    test_output = (folder(out, "gold", I2) / LOG_TEST_OUTPUT).read_text()
    assert "PASSED tests/test_core.py::test_count_words_double_space" in test_output

    # --rewrite-reports grades the test output again and runs nothing.
    report = json.loads((here / LOG_REPORT).read_text())
    broken = {I1: {**report[I1], "resolved": False}}
    (here / LOG_REPORT).write_text(json.dumps(broken))
    assert main([*eval_argv(dataset, "gold", out), "--rewrite_reports", "true"]) == 0
    err = capsys.readouterr().err
    assert "2 reports rewritten from their test output" in err
    assert json.loads((here / LOG_REPORT).read_text()) == report
    log = (here / LOG_INSTANCE).read_text()
    assert log.startswith(first_log)  # appended to, no container started
    assert "--rewrite-reports, run t: report.json rewritten from test_output.txt" in log
    assert "Container for" not in log[len(first_log) :]
    assert summary_of(out, "gold")["resolved_ids"] == [I1, I2]

    # --force grades it again in a new container.
    assert main([*eval_argv(dataset, "gold", out, "--instance-ids", I1), "--force"]) == 0
    assert "skipped" not in capsys.readouterr().err
    log = (here / LOG_INSTANCE).read_text()
    assert log != first_log and "Container for acme__textkit-1 started" in log
    assert summary_of(out, "gold")["resolved_ids"] == [I1]


def test_a_changed_prediction_is_not_taken_for_the_graded_one(
    dataset: Dataset, tmp_path: Path
) -> None:
    from agent.swebench import Instance
    from agent.swebench.reports import earlier_outcome

    instance = Instance.from_record(dataset.record(I1))
    prediction = {"instance_id": I1, "model_name_or_path": "m", "model_patch": "a patch\n"}
    here = tmp_path / "m" / I1
    here.mkdir(parents=True)
    (here / "patch.diff").write_text("a patch\n")
    report = {"patch_exists": True, "resolved": True, "tests_status": {}}
    (here / "report.json").write_text(json.dumps({I1: report}))
    found = earlier_outcome(instance, prediction, tmp_path)
    assert found is not None and found.kind == "resolved" and found.earlier
    assert earlier_outcome(instance, {**prediction, "model_patch": "another\n"}, tmp_path) is None
    # Not checkable without the network: graded again when --network is given.
    unreachable = {**report, "resolved": False, "not_checkable": "name resolution failed"}
    (here / "report.json").write_text(json.dumps({I1: unreachable}))
    found = earlier_outcome(instance, prediction, tmp_path)
    assert found is not None and found.kind == "not_checkable"
    assert earlier_outcome(instance, prediction, tmp_path, network=True) is None
    # A run that timed out is graded again, as the harness (no report.json) does.
    timed_out = {**report, "resolved": False, "error": "tests timed out after 60 s"}
    (here / "report.json").write_text(json.dumps({I1: timed_out}))
    assert earlier_outcome(instance, prediction, tmp_path) is None


def _graded_before(out: Path, model: str, iid: str, patch: str, resolved: bool) -> None:
    """An instance folder as an earlier `pgs eval` left it (report.json beside patch.diff)."""
    here = folder(out, model, iid)
    here.mkdir(parents=True)
    (here / "patch.diff").write_text(patch)
    report = {"patch_exists": True, "resolved": resolved, "tests_status": {}}
    (here / "report.json").write_text(json.dumps({iid: report}))


def test_attempts_grades_every_attempt_as_its_own_model_and_lists_which_resolve(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run of `pgs batch --attempts 2`: preds.json (the chosen patches) and each attempt's
    # <id>/attempt-<k>/<id>.pred. No container runs: the patches that are not empty were
    # graded before in the report folder, and an attempt whose patch is the chosen one takes
    # its grading.
    run = tmp_path / "run"
    run.mkdir()
    preds = dataset.write_preds(run / "preds.json", {I1: "chosen\n", I2: ""})
    attempts = {(I1, 1): "chosen\n", (I1, 2): "", (I2, 1): "", (I2, 2): "other\n"}
    for (iid, k), patch in attempts.items():
        (run / iid / f"attempt-{k}").mkdir(parents=True, exist_ok=True)
        pred = {"instance_id": iid, "model_name_or_path": "m", "model_patch": patch}
        (run / iid / f"attempt-{k}" / f"{iid}.pred").write_text(json.dumps(pred))
    out = tmp_path / "report"
    _graded_before(out, "m", I1, "chosen\n", resolved=True)
    _graded_before(out, "m@attempt-2", I2, "other\n", resolved=True)

    assert main(eval_argv(dataset, preds, out, "--attempts")) == 0
    err = capsys.readouterr().err
    summary = summary_of(out, "m")
    assert summary["resolved_ids"] == [I1] and summary["empty_patch_ids"] == [I2]
    assert summary["attempts_resolved"] == {I1: [1], I2: [2]}
    # the main summary: the usual keys (an attempt's are those of any `pgs eval`) and one more
    assert set(summary) - {"attempts_resolved"} == set(summary_of(out, "m@attempt-1"))
    assert summary_of(out, "m@attempt-1")["resolved_ids"] == [I1]
    assert summary_of(out, "m@attempt-2")["resolved_ids"] == [I2]
    assert summary_of(out, "m@attempt-2")["empty_patch_ids"] == [I1]
    copied = folder(out, "m@attempt-1", I1)
    assert json.loads((copied / "report.json").read_text())[I1]["resolved"] is True
    assert (
        "attempt 1: 2 predictions, model m@attempt-1; 2 of them the chosen patch, graded above"
    ) in err
    assert (
        "attempts: 2 instances with attempts graded; an attempt resolves 2; the chosen patch "
        "resolves 1 of those"
    ) in err


def test_attempts_without_attempt_folders_and_with_gold(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = dataset.write_preds(tmp_path / "preds.json", {I1: ""})
    out = tmp_path / "report"
    assert main(eval_argv(dataset, preds, out, "--attempts")) == 0
    assert "no <id>/attempt-<k>/<id>.pred beside the predictions" in capsys.readouterr().err
    assert summary_of(out, "m")["attempts_resolved"] == {}
    argv = eval_argv(dataset, "gold", tmp_path / "gold", "--attempts")
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "pgs: error: --attempts needs a predictions file of a `pgs batch --attempts` run"
    ]
