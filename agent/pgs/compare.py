"""``pgs report``: Self-Edit and PGS side by side, one row per ablation setting (the PGS
paper's Table 7, at repository level).

What a prediction records (:func:`prediction_fields`, written by ``pgs batch`` into each
``preds.json`` entry and each ``<id>.pred``, beside ``instance_id``, ``model_name_or_path`` and
``model_patch``):

- ``pgs_mode``: ``none`` (the Generator alone), ``io`` (Self-Edit), ``property``,
  ``property-min``;
- ``pgs_verdict``: ``RunRecord.pgs.verdict`` (``passed``, ``partial``, ``tests-only``,
  ``tests-changed``, ``unchecked``, ``failed``); ``unchecked`` when nothing checked the patch
  (``--feedback none``);
- ``pgs_rounds``: feedback messages sent to the Generator;
- ``pgs_feedback_tokens``: tokens of those messages, by :class:`agent.pgs.feedback.SimpleCounter`
  (the same count whatever the model, so modes and models compare);
- ``cost``: the Generator's and the Tester's cost together
  (:meth:`agent.record.trajectory.RunRecord.usage`);
- the rest of the run's ablation setting (:func:`ablation_of`): ``pgs_max_rounds`` (``--rounds``),
  ``pgs_filter`` (the soundness filter), ``pgs_fresh_probes``, ``pgs_shrink`` (Hypothesis's
  shrink phase); None where the mode does not use it (``none``: all four; ``io``: filter and
  probes); and, only when set, ``pgs_shrink_order`` (pick-then-shrink) and the paper's other
  Tester turns, ``pgs_inputs``, ``pgs_examples``, ``pgs_every_round`` (:data:`OPTIONAL_FIELDS`).

Rows are keyed by the full setting (:data:`KEY`: mode, rounds, filter, probes, shrinking, the
optional keys), so
two folders of one mode with different rounds are two rows, and two folders of one setting are
one. A run written before the setting was recorded gets it from its ``replay_config`` (the
flags it ran with; shrinking was then on in every mode).

The trajectory is the source of truth: ``pgs report`` computes the same fields from each
``<id>/<id>.traj`` and reads ``preds.json`` (or the ``.pred`` files) for which instances a run
holds. Resolved counts come from a ``pgs eval`` summary (``<model>.<run_id>.json``, the
harness's run report) found in the run folder or one level below it, e.g. after
``pgs eval --predictions RUN/preds.json --report-dir RUN/eval``. With ``pgs eval --attempts``
the summary also has ``attempts_resolved`` ({id: [k, ...]}: the attempts whose patch resolves),
and each row counts the instances where an attempt resolves and, of those, the ones the chosen
patch resolves (the attempts' own summaries, ``<model>@attempt-<k>.<run_id>.json``, are not
the run's).

Errors: a folder that is not a run (no predictions, or predictions without trajectories) is a
:class:`ReportError`: one ``pgs: error:`` line and exit code 2.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from agent.errors import ReportError
from agent.pgs.selection import prediction_fields as attempts_fields
from agent.pgs.tokens import SimpleCounter
from agent.record.pgs import Ablation, FeedbackMode
from agent.record.trajectory import RunRecord

#: Table 7's order: no feedback, Self-Edit, property feedback, minimal property feedback.
MODES = ("none", "io", "io-min", "property", "property-min")
LABELS = {
    "io": "io (Self-Edit)",
    "io-min": "io-min (Self-Edit, smallest example)",
    "property-min": "property-min (PGS)",
}
VERDICTS = ("passed", "partial", "tests-only", "tests-changed", "unchecked", "failed")
#: The keys :func:`prediction_fields` adds to a prediction (all of them since the first).
FIELDS = ("pgs_mode", "pgs_verdict", "pgs_rounds", "pgs_feedback_tokens", "cost")
#: The ablation setting's keys beside ``pgs_mode``, by :class:`Ablation` field.
SETTING_FIELDS = {
    "rounds": "pgs_max_rounds",
    "filter": "pgs_filter",
    "fresh_probes": "pgs_fresh_probes",
    "shrink": "pgs_shrink",
}
#: Beside those, only when set (runs before them, and the defaults, leave them out): the shrink
#: order and the paper's other Tester turns.
OPTIONAL_FIELDS = {
    "shrink_order": "pgs_shrink_order",
    "inputs": "pgs_inputs",
    "examples": "pgs_examples",
    "every_round": "pgs_every_round",
}
#: What rows are grouped by, in this order.
KEY = ("mode", "rounds", "filter", "fresh_probes", "shrink", *OPTIONAL_FIELDS)


# -- the fields of one prediction ---------------------------------------------------------------


def prediction_fields(
    trajectory: RunRecord | dict[str, Any], *, mode: str | None = None
) -> dict[str, Any]:
    """The feedback mode and what it cost, from a ``.traj``'s record (see the module doc).

    ``mode``: the run's ``--feedback``, used when the trajectory does not say (a run that
    crashed before the agent started).
    """
    trajectory = _record(trajectory)
    pgs = trajectory.pgs_record
    config = trajectory.replay_config.get("pgs") or {}
    recorded = pgs.mode if "mode" in pgs.model_fields_set else None
    found = recorded or config.get("feedback") or mode or "unknown"
    counter = SimpleCounter()
    feedback = [str(r.feedback) for r in pgs.feedback_rounds()]
    setting = ablation_of(trajectory, mode=mode)
    fields = {
        "pgs_mode": str(found),
        "pgs_verdict": pgs.verdict,
        "pgs_rounds": len(feedback),
        "pgs_feedback_tokens": sum(counter.count(text) for text in feedback),
        "cost": trajectory.usage()["instance_cost"],
        **{key: getattr(setting, name, None) for name, key in SETTING_FIELDS.items()},
    }
    for name, key in OPTIONAL_FIELDS.items():
        if setting is not None and getattr(setting, name) is not None:
            fields[key] = getattr(setting, name)
    if trajectory.attempts is not None:  # --attempts: their count, the choice, the total cost
        fields |= attempts_fields(trajectory.attempts)
    return fields


def _record(trajectory: RunRecord | dict[str, Any]) -> RunRecord:
    return trajectory if isinstance(trajectory, RunRecord) else RunRecord.load(trajectory)


def ablation_of(
    trajectory: RunRecord | dict[str, Any], *, mode: str | None = None
) -> Ablation | None:
    """A ``.traj``'s full ablation setting: the one its ``pgs`` record holds, else (a run
    written before it was recorded, or one with no reviewer: ``--feedback none``) derived from
    the flags in its ``replay_config``; None when not even the mode is known.

    A config from before ``check.shrink`` existed ran with shrinking on in every mode."""
    trajectory = _record(trajectory)
    pgs = trajectory.pgs_record
    if pgs.ablation is not None:
        return pgs.ablation
    config = trajectory.replay_config.get("pgs") or {}
    recorded = pgs.mode if "mode" in pgs.model_fields_set else None
    found = recorded or config.get("feedback") or mode
    if found not in MODES:
        return None
    check = config.get("check") or {}
    shrink = check.get("shrink") if "shrink" in check else True
    return Ablation.of(
        cast(FeedbackMode, found),
        rounds=config.get("rounds"),
        filter=config.get("filter"),
        fresh_probes=config.get("fresh_probes"),
        shrink=found == "property-min" if shrink is None else bool(shrink),
        shrink_order=check.get("shrink_order") if check.get("pool", True) else None,
        inputs=bool(config.get("input_generator")),
        examples=bool(config.get("examples_filter")),
        every_round=bool(config.get("properties_every_round")),
    )


# -- reading run folders ------------------------------------------------------------------------


@dataclass
class Row:
    """One instance of one run."""

    run: str
    instance_id: str
    mode: str
    verdict: str
    rounds: int
    feedback_tokens: int
    cost: float
    #: The full ablation setting, by :data:`KEY` (None where the mode does not use a field).
    setting: dict[str, Any] = field(default_factory=dict)
    exit_status: str | None = None
    #: True / False from the run's eval report; None when no report grades it.
    resolved: bool | None = None
    #: ``--attempts``: attempts that ran, and whether the choice changed a single run's patch.
    attempts: int = 1
    selection_changed: bool = False
    #: ``pgs eval --attempts``: the attempts whose patch resolves; None when not graded.
    attempts_resolved: list[int] | None = None


@dataclass
class Run:
    path: Path
    rows: list[Row] = field(default_factory=list)
    eval_report: Path | None = None
    notes: list[str] = field(default_factory=list)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ReportError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path} is not valid JSON ({e}): is this a pgs batch folder?") from None


def read_predictions(folder: Path) -> dict[str, dict[str, Any]]:
    """preds.json, else the ``<id>/<id>.pred`` files (``pgs run`` writes only those)."""
    preds_path = folder / "preds.json"
    if preds_path.is_file():
        data = _read_json(preds_path)
        items = list(data.values()) if isinstance(data, dict) else data
        if not isinstance(items, list) or not all(
            isinstance(p, dict) and "instance_id" in p for p in items
        ):
            raise ReportError(f"{preds_path} is not predictions (instance_id, model_patch)")
        return {str(p["instance_id"]): p for p in items}
    preds = {}
    for pred_path in sorted(folder.glob("*/*.pred")):
        pred = _read_json(pred_path)
        if isinstance(pred, dict) and "instance_id" in pred:
            preds[str(pred["instance_id"])] = pred
    if not preds:
        raise ReportError(
            f"{folder} holds no preds.json and no <id>/<id>.pred: pass the --output-dir of a "
            "`pgs batch` (or `pgs run`)"
        )
    return preds


def find_eval_report(folder: Path) -> tuple[Path | None, list[str]]:
    """The newest ``pgs eval`` summary in ``folder`` or one level below; (path, notes)."""
    found = []
    for path in [*folder.glob("*.json"), *folder.glob("*/*.json")]:
        if path.name == "preds.json" or path.name.count(".") < 2:  # <model>.<run_id>.json
            continue
        if "@attempt-" in path.name:  # `pgs eval --attempts`: one attempt's, not the run's
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and {"resolved_ids", "submitted_ids"} <= set(data):
            found.append(path)
    if not found:
        return None, []
    found.sort(key=lambda p: (p.stat().st_mtime, str(p)))
    notes = []
    if len(found) > 1:
        notes.append(f"{len(found)} eval reports in {folder}; the newest is used: {found[-1]}")
    return found[-1], notes


def read_run(folder: Path) -> Run:
    """The rows of one run folder, with ``resolved`` from its eval report when it has one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReportError(f"{folder} is not a folder: pass the --output-dir of a `pgs batch`")
    preds = read_predictions(folder)
    run = Run(folder)
    missing = []
    for iid, pred in sorted(preds.items()):
        traj_path = folder / iid / f"{iid}.traj"
        if traj_path.is_file():
            try:
                data = RunRecord.load(_read_json(traj_path))
            except ValidationError as e:
                where = ".".join(str(x) for x in e.errors()[0]["loc"])
                raise ReportError(
                    f"{traj_path}: its record does not read ({where}: "
                    f"{e.errors()[0]['msg']}): is it a pgs trajectory?"
                ) from None
            fields = prediction_fields(data, mode=pred.get("pgs_mode"))
            status = data.info.exit_status
        elif all(key in pred for key in FIELDS):  # the prediction recorded them
            wanted = [*FIELDS, *SETTING_FIELDS.values(), *OPTIONAL_FIELDS.values()]
            fields, status = {key: pred.get(key) for key in wanted}, None
        else:
            missing.append(iid)
            continue
        run.rows.append(
            Row(
                run=str(folder),
                instance_id=iid,
                mode=str(fields["pgs_mode"]),
                verdict=str(fields["pgs_verdict"]),
                rounds=int(fields["pgs_rounds"]),
                feedback_tokens=int(fields["pgs_feedback_tokens"]),
                cost=float(fields["cost"]),
                setting={
                    "mode": str(fields["pgs_mode"]),
                    **{name: fields.get(key) for name, key in SETTING_FIELDS.items()},
                    **_optional({n: fields.get(k) for n, k in OPTIONAL_FIELDS.items()}),
                },
                exit_status=str(status) if status else None,
                attempts=int(fields.get("attempts") or 1),
                selection_changed=bool(fields.get("selection_changed")),
            )
        )
    if missing:
        first = folder / missing[0] / f"{missing[0]}.traj"
        raise ReportError(
            f"{len(missing)} of {len(preds)} predictions in {folder} have no trajectory "
            f"(e.g. {first}): pass the whole --output-dir of a `pgs batch`"
        )
    run.eval_report, run.notes = find_eval_report(folder)
    if run.eval_report is not None:
        summary = _read_json(run.eval_report)
        graded = set(summary.get("submitted_ids") or [])
        resolved = set(summary.get("resolved_ids") or [])
        tried = summary.get("attempts_resolved")
        tried = tried if isinstance(tried, dict) else {}
        for row in run.rows:
            if row.instance_id in graded:
                row.resolved = row.instance_id in resolved
            if isinstance(tried.get(row.instance_id), list):
                row.attempts_resolved = [int(k) for k in tried[row.instance_id]]
    return run


# -- aggregation --------------------------------------------------------------------------------


def _mean(total: float, n: int) -> float:
    return total / n if n else 0.0


def _optional(values: dict[str, Any]) -> dict[str, Any]:
    """The optional keys of a row's setting (:data:`OPTIONAL_FIELDS`) that are set: the default
    says nothing, as in the runs before they were ablation keys."""
    return {k: v for k, v in values.items() if v is not None}


def _setting_of(key: tuple[Any, ...]) -> dict[str, Any]:
    setting = dict(zip(KEY, key, strict=True))
    return {
        **{k: v for k, v in setting.items() if k not in OPTIONAL_FIELDS},
        **_optional({k: setting[k] for k in OPTIONAL_FIELDS}),
    }


def setting_key(setting: dict[str, Any]) -> tuple[Any, ...]:
    """The tuple rows are grouped by (:data:`KEY`)."""
    return tuple(setting.get(name) for name in KEY)


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Table 7's order, the order in which its rows add a component: by mode, then unshrunk
    before shrunk, unfiltered before filtered, fewer rounds, fewer probes; None (not used by
    the mode, or unknown) before any value."""
    setting = dict(zip(KEY, key, strict=True))
    mode = setting["mode"]
    rank = MODES.index(mode) if mode in MODES else len(MODES)
    names = ("shrink", "filter", "rounds", "fresh_probes", *OPTIONAL_FIELDS)
    rest = (setting[name] for name in names)
    return (rank, str(mode), *((value is not None, value or 0) for value in rest))


def summarize(setting: dict[str, Any], rows: list[Row]) -> dict[str, Any]:
    """One row of the comparison: one ablation setting."""
    n = len(rows)
    graded = [r for r in rows if r.resolved is not None]
    verdicts: Counter[str] = Counter(r.verdict for r in rows)
    rounds = sum(r.rounds for r in rows)
    tokens = sum(r.feedback_tokens for r in rows)
    cost = sum(r.cost for r in rows)
    row = {
        "mode": setting["mode"],
        "setting": setting,
        "runs": sorted({r.run for r in rows}),
        "instances": n,
        # None: no eval report grades any of them.
        "resolved": sum(bool(r.resolved) for r in graded) if graded else None,
        "graded": len(graded),
        "verdicts": {**{v: 0 for v in VERDICTS}, **verdicts},
        "rounds": {"total": rounds, "mean": _mean(rounds, n)},
        "feedback_tokens": {"total": tokens, "mean": _mean(tokens, n)},
        "cost": {"total": cost, "mean": _mean(cost, n)},
    }
    tried = [r for r in rows if r.attempts_resolved is not None]
    if any(r.attempts > 1 for r in rows) or tried:
        # --attempts: instances run with several, attempts in all, choices that changed the
        # patch a single attempt would have given
        row["attempts"] = {
            "instances": sum(r.attempts > 1 for r in rows),
            "total": sum(r.attempts for r in rows),
            "changed": sum(r.selection_changed for r in rows),
        }
    if tried:
        # `pgs eval --attempts`: instances whose attempts were graded, those where at least
        # one attempt resolves, and of those the ones the chosen patch resolves
        some = [r for r in tried if r.attempts_resolved]
        row["attempts"] |= {
            "graded": len(tried),
            "any_resolved": len(some),
            "chosen_resolved": sum(bool(r.resolved) for r in some),
        }
    return row


def compare(folders: list[Path]) -> dict[str, Any]:
    """Read every run folder and group their instances by full ablation setting."""
    runs = [read_run(folder) for folder in folders]
    by_key: dict[tuple[Any, ...], list[Row]] = {}
    for run in runs:
        for row in run.rows:
            by_key.setdefault(setting_key(row.setting), []).append(row)
    order = sorted(by_key, key=_order)
    return {
        "rows": [summarize(_setting_of(key), by_key[key]) for key in order],
        "runs": [
            {
                "dir": str(run.path),
                "instances": len(run.rows),
                "modes": sorted({r.mode for r in run.rows}),
                "eval_report": str(run.eval_report) if run.eval_report else None,
                "notes": run.notes,
            }
            for run in runs
        ],
        "instances": [vars(row) for run in runs for row in run.rows],
    }
