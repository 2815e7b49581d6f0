"""What ``pgs eval`` writes, in the harness's layout: one folder per instance under
``<report dir>/<model>/`` holding ``report.json``, ``test_output.txt``, ``run_instance.log``
(:class:`InstanceLog`), ``patch.diff``, ``eval.sh`` (or pgs's ``error.txt``), and the run's
summary ``<model>.<run_id>.json`` (:func:`summarize`, :func:`write_summary`).

An :class:`Outcome` is what happened to one prediction; one graded before in the same folder is
read back (:func:`earlier_outcome`), and an attempt whose patch is the chosen one's takes its
folder (:func:`share_graded`)."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.trajectory_file import write_atomic
from agent.swebench import Instance

#: The report of an empty patch: not run (the harness's ``empty_patch_ids``), not resolved.
EMPTY_REPORT: dict[str, Any] = {
    "patch_is_None": False,
    "patch_exists": False,
    "patch_successfully_applied": False,
    "resolved": False,
}


#: The files of one instance's folder, named as swebench names them (``LOG_REPORT``,
#: ``LOG_TEST_OUTPUT``, ``LOG_INSTANCE``), and pgs's note of an instance it could not grade.
REPORT, TEST_OUTPUT, RUN_LOG, ERROR = (
    "report.json",
    "test_output.txt",
    "run_instance.log",
    "error.txt",
)
#: The patch as it was graded, byte for byte (the harness's name for it).
PATCH = "patch.diff"


@dataclass
class Outcome:
    """What happened to one prediction."""

    instance_id: str
    #: resolved | unresolved | not_checkable | empty | error
    kind: str
    report: dict[str, Any] | None = None
    error: str = ""
    seconds: float = 0.0
    deviations: list[str] = field(default_factory=list)
    #: why the tests could not be checked here (kind ``not_checkable``)
    reason: str = ""
    #: graded by an earlier ``pgs eval`` with this run id and report folder, not again now
    earlier: bool = False

    def counts(self, key: str) -> str:
        status = ((self.report or {}).get(self.instance_id) or {}).get("tests_status") or {}
        part = status.get(key) or {}
        ok, bad = len(part.get("success", [])), len(part.get("failure", []))
        return f"{ok}/{ok + bad}" if ok + bad else "-"


class InstanceLog:
    """``run_instance.log`` (swebench's ``LOG_INSTANCE``): what pgs did for one instance, one
    entry per step, in the harness's logger format (``<time> - INFO - <message>``), appended as
    it happens so that a crash leaves what came before."""

    def __init__(self, path: Path, *, fresh: bool = True) -> None:
        self.path = path
        if fresh or not path.is_file():
            path.write_text("", encoding="utf-8")

    def info(self, message: str, level: str = "INFO") -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{stamp} - {level} - {message.rstrip()}\n")


def model_folder(prediction: dict[str, Any]) -> str:
    """The folder of a prediction's model under the report folder, as the harness names it."""
    return str(prediction.get("model_name_or_path") or "None").replace("/", "__")


def earlier_outcome(
    instance: Instance, prediction: dict[str, Any], report_dir: Path, *, network: bool = False
) -> Outcome | None:
    """The outcome of an earlier grading of this same prediction in ``report_dir`` (its
    report.json, next to a patch.diff that is this prediction's patch), or None: not graded,
    graded with another patch, or it timed out (run again, as the harness runs again an
    instance it wrote no report for), or it was not checkable and ``network`` is now on."""
    iid = instance.instance_id
    log_dir = report_dir / model_folder(prediction) / iid
    try:
        report = json.loads((log_dir / REPORT).read_text(encoding="utf-8"))[iid]
        graded_patch = (log_dir / PATCH).read_text(encoding="utf-8")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(report, dict) or graded_patch != (prediction.get("model_patch") or ""):
        return None
    error = str(report.get("error") or "")
    if error.startswith("tests timed out"):
        return None
    reason = str(report.get("not_checkable") or "")
    if reason and network:  # its tests may reach what they need now
        return None
    if not report.get("patch_exists", True) and prediction.get("model_patch") in ("", None):
        kind = "empty"
    elif error:
        kind = "error"
    elif reason:
        kind = "not_checkable"
    else:
        kind = "resolved" if report.get("resolved") else "unresolved"
    deviations = [str(d) for d in report.get("deviations") or []]
    return Outcome(
        instance_id=iid,
        kind=kind,
        report={iid: report},
        error=error,
        seconds=0.0,
        deviations=deviations,
        reason=reason,
        earlier=True,
    )


def clear_results(log_dir: Path) -> None:
    """Remove an earlier grading's results from ``log_dir``: never read as this one's."""
    for stale in (REPORT, TEST_OUTPUT, ERROR):
        (log_dir / stale).unlink(missing_ok=True)


def result_line(iid: str, kind: str, report: dict[str, Any], error: str, reason: str) -> str:
    """The last line of ``run_instance.log``: resolved or not, why, the tests' counts."""
    status = report[iid].get("tests_status") or {}
    counts = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        part = status.get(key) or {}
        ok, bad = len(part.get("success", [])), len(part.get("failure", []))
        counts.append(f"{key} {ok}/{ok + bad}")
    why = f" ({error or reason})" if error or reason else ""
    return f"Result for {iid}: resolved: {report[iid]['resolved']}; {kind}{why}; " + ", ".join(
        counts
    )


def summarize(
    outcomes: list[Outcome],
    predictions: dict[str, dict[str, Any]],
    instances: list[Instance],
    run_id: str,
) -> dict[str, Any]:
    """The harness's run report (``make_run_report``'s keys) for the dataset ``instances`` (the
    instances given, after ``--instance-ids``: ``total_instances``), plus pgs's
    not_checkable, errors and deviations."""
    by_kind: dict[str, list[str]] = {
        "resolved": [],
        "unresolved": [],
        "not_checkable": [],
        "empty": [],
        "error": [],
    }
    for o in outcomes:
        by_kind[o.kind].append(o.instance_id)
    completed = sorted(
        o.instance_id
        for o in outcomes
        if o.kind in ("resolved", "unresolved", "not_checkable") or (o.report and o.kind != "empty")
    )
    return {
        "total_instances": len(instances),
        "submitted_instances": len(predictions),
        "completed_instances": len(completed),
        "resolved_instances": len(by_kind["resolved"]),
        "unresolved_instances": len(by_kind["unresolved"]),
        "empty_patch_instances": len(by_kind["empty"]),
        "error_instances": len(by_kind["error"]),
        "not_checkable_instances": len(by_kind["not_checkable"]),
        "completed_ids": completed,
        "incomplete_ids": sorted(
            i.instance_id for i in instances if i.instance_id not in predictions
        ),
        "empty_patch_ids": sorted(by_kind["empty"]),
        "submitted_ids": sorted(predictions),
        "resolved_ids": sorted(by_kind["resolved"]),
        "unresolved_ids": sorted(by_kind["unresolved"]),
        "error_ids": sorted(by_kind["error"]),
        "not_checkable_ids": sorted(by_kind["not_checkable"]),
        "schema_version": 2,
        "run_id": run_id,
        "errors": {o.instance_id: o.error for o in outcomes if o.error},
        "not_checkable": {o.instance_id: o.reason for o in outcomes if o.reason},
        "deviations": {o.instance_id: o.deviations for o in outcomes if o.deviations},
    }


def write_summary(
    outcomes: list[Outcome],
    predictions: dict[str, dict[str, Any]],
    instances: list[Instance],
    run_id: str,
    report_dir: Path,
    interrupted: list[str] | None = None,
) -> Path:
    """Write the run report (:func:`summarize`); an evaluation that was stopped lists the
    instances it did not grade under ``interrupted_ids``."""
    outcomes.sort(key=lambda o: o.instance_id)
    summary = summarize(outcomes, predictions, instances, run_id)
    if interrupted is not None:
        summary["interrupted_ids"] = interrupted
    models = {model_folder(p) for p in predictions.values()}
    model = sorted(models)[0] if models else "None"
    path = report_dir / f"{model}.{run_id}.json"
    write_atomic(path, json.dumps(summary, indent=4))
    return path


def share_graded(main: dict[str, Any], attempt: dict[str, Any], report_dir: Path) -> bool:
    """An attempt whose patch is the main prediction's (the chosen one) takes its grading: the
    main's instance folder is copied to the attempt's model folder, so it is not run twice.
    True when copied."""
    iid = str(main["instance_id"])
    source = report_dir / model_folder(main) / iid
    if (attempt.get("model_patch") or "") != (main.get("model_patch") or ""):
        return False
    try:
        if (source / PATCH).read_text(encoding="utf-8") != (main.get("model_patch") or ""):
            return False
    except OSError:
        return False
    if not (source / REPORT).is_file():
        return False
    target = report_dir / model_folder(attempt) / iid
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return True
