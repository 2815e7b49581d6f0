"""A batch folder as the inspector shows it: one :class:`~agent.inspect.model.BatchRow` per
instance.

The instances are the union of ``<dir>/<id>/<id>.traj`` and ``preds.json`` (read by
:mod:`agent.pgs.compare`, as ``pgs report`` reads them); ``resolved`` comes from a ``pgs eval``
summary found as ``pgs report`` finds it (or SWE-agent's ``results.json``).

Errors: :class:`~agent.errors.InspectError` for a folder without trajectories and
predictions, or an evaluation report that is not one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.errors import InspectError, ReportError
from agent.inspect.lenient import KINDS, as_dict, as_float, as_int, read_json
from agent.inspect.model import BatchRow, BatchView, TrajectoryView
from agent.inspect.trajectory_view import trajectory_from_dict
from agent.pgs.compare import find_eval_report, prediction_fields, read_predictions
from agent.record.trajectory import RunRecord


def _traj_paths(folder: Path) -> dict[str, Path]:
    """``<id>.traj`` files, and mini-swe-agent's ``<id>.traj.json``, by instance id."""
    found: dict[str, Path] = {}
    for pattern in ("*.traj", "*.traj.json"):
        for p in sorted(folder.glob(pattern)):
            found.setdefault(_stem(p), p)
    for pattern in ("*/*.traj", "*/*.traj.json"):  # <id>/<id>.traj first, then any other name
        for p in sorted(folder.glob(pattern)):
            if p.parent.name == _stem(p) or _stem(p) not in found:
                found[_stem(p)] = p
    return found


def _stem(path: Path) -> str:
    return path.name.removesuffix(".json").removesuffix(".traj")


def _eval_summary(folder: Path, report: Path | None, batch: BatchView) -> dict[str, Any] | None:
    if report is None:
        report, notes = find_eval_report(folder)
        batch.notes += notes
        swe_results = folder / "results.json"  # SWE-agent's place for the harness's report
        if report is None and swe_results.is_file():
            report = swe_results
    elif report.is_dir():
        found, notes = find_eval_report(report)
        batch.notes += notes
        if found is None:
            raise InspectError(f"{report} holds no `pgs eval` summary (<model>.<run_id>.json)")
        report = found
    if report is None:
        return None
    summary = read_json(report)
    if not isinstance(summary, dict) or "resolved_ids" not in summary:
        raise InspectError(f"{report} is not an evaluation summary (no resolved_ids)")
    batch.eval_report = report
    return summary


def _graded(iid: str, summary: dict[str, Any]) -> tuple[str, str | None]:
    def ids(key: str) -> set[str]:
        return {str(x) for x in summary.get(key) or []}

    errors = as_dict(summary.get("errors"))
    for key, word in (
        ("resolved_ids", "resolved"),
        ("unresolved_ids", "unresolved"),
        ("empty_patch_ids", "empty patch"),
        ("error_ids", "error"),
    ):
        if iid in ids(key):
            return word, (str(errors[iid]) if iid in errors else None)
    return "not graded", None


def load_batch(
    folder: Path,
    *,
    eval_report: Path | None = None,
    on_trajectory: Callable[[TrajectoryView], None] | None = None,
) -> BatchView:
    """One row per instance of a batch folder. Each trajectory is read once; ``on_trajectory``
    gets it (to render its page) before it is let go, so a large batch is never all in memory.
    ``eval_report``: a ``pgs eval`` summary or its folder, if it is not inside ``folder``."""
    folder = Path(folder)
    batch = BatchView(path=folder)
    try:
        preds = read_predictions(folder)
    except ReportError as e:
        preds = {}
        if (folder / "preds.json").is_file():
            batch.notes.append(f"predictions not read: {e}")
        else:
            batch.missing.append("missing: preds.json (the rows come from the .traj files)")
    trajs = _traj_paths(folder)
    ids = sorted(set(preds) | set(trajs))
    if not ids:
        raise InspectError(f"{folder} holds no trajectories and no predictions: pass {KINDS}")
    summary = _eval_summary(folder, Path(eval_report) if eval_report else None, batch)
    if summary is None:
        batch.missing.append(
            "missing: an evaluation report (pgs eval --report-dir inside this folder, or "
            "--eval PATH): resolved is not known"
        )
    for iid in ids:
        row = _row(iid, trajs.get(iid), preds.get(iid, {}), on_trajectory)
        if summary is not None:
            row.resolved, row.eval_error = _graded(iid, summary)
        batch.rows.append(row)
    return batch


def _row(
    iid: str,
    traj_path: Path | None,
    pred: dict[str, Any],
    on_trajectory: Callable[[TrajectoryView], None] | None,
) -> BatchRow:
    """One instance's row: from its trajectory, or from its prediction when there is none."""
    row = BatchRow(instance_id=iid, traj_path=traj_path)
    if traj_path is None:
        row.missing.append(f"missing: the trajectory ({iid}/{iid}.traj)")
        row.verdict = pred.get("pgs_verdict")
        row.mode = pred.get("pgs_mode")
        row.cost = as_float(pred.get("cost"))
        row.rounds = as_int(pred.get("pgs_rounds"))
        return row
    try:
        traj = trajectory_from_dict(read_json(traj_path), path=traj_path, instance_id=iid)
    except InspectError as e:
        row.missing.append(f"missing: a readable trajectory ({e})")
        return row
    _fill_row(row, traj)
    if on_trajectory is not None:
        on_trajectory(traj)
    return row


def _report_fields(record: RunRecord) -> dict[str, Any] | None:
    """``pgs report``'s fields of a run, or None when its pgs record is damaged (the row then
    shows what the trajectory itself holds, and the loader lists what is missing)."""
    if any(m.startswith("missing: pgs.") for m in record.missing):
        return None
    try:
        return prediction_fields(record)
    except ValidationError:
        return None


def _fill_row(row: BatchRow, traj: TrajectoryView) -> None:
    row.exit_status = traj.exit_status
    row.steps = len(traj.steps)
    row.duration = traj.duration
    fields = _report_fields(traj.record) if traj.writer == "pgs" else None
    if fields is not None:  # the fields `pgs report` counts, computed the same way
        row.mode, row.verdict = fields["pgs_mode"], fields["pgs_verdict"]
        row.rounds, row.cost = fields["pgs_rounds"], fields["cost"]
    else:
        row.cost = traj.total_cost
        if traj.pgs is not None:
            row.verdict, row.mode = traj.pgs.verdict, traj.pgs.mode
    if traj.exit_status is None:
        row.missing.append("missing: info.exit_status")
