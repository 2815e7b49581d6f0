"""The predictions ``pgs eval`` grades: read from a preds.json or a JSONL file
(:func:`load_predictions`), the records' own patches (:func:`gold_predictions`, model ``gold``),
and every attempt's patch of ``pgs run/batch --attempts`` (:func:`attempt_predictions`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.swebench import Instance, InstanceError


def _json_or_jsonl(text: str, path: Path) -> Any:
    """One JSON value, or one per line: JSONL is JSONL whatever the file is called (agents
    write ``preds.json`` files of JSON lines)."""
    if text.lstrip().startswith(("{", "[")) and not str(path).endswith(".jsonl"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":  # not one JSON value followed by more
                raise
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """A preds.json (dict keyed by instance id, or a list) or a JSONL file of predictions."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InstanceError(f"cannot read the predictions {path}: {e.strerror}") from None
    try:
        data = _json_or_jsonl(text, path)
    except json.JSONDecodeError as e:
        raise InstanceError(f"{path} is not JSON or JSONL predictions: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("instance_id"), str):
        data = [data]  # one line of JSONL, whatever the file's name
    items = list(data.values()) if isinstance(data, dict) else data
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or "instance_id" not in item:
            raise InstanceError(f"{path}: every prediction needs an instance_id")
        out[str(item["instance_id"])] = item
    return out


def gold_predictions(instances: list[Instance]) -> dict[str, dict[str, Any]]:
    """The records' own patches as predictions (model ``gold``), as the harness's
    ``--predictions_path gold`` makes them."""
    return {
        i.instance_id: {
            "instance_id": i.instance_id,
            "model_name_or_path": "gold",
            "model_patch": i.patch,
        }
        for i in instances
    }


# -- --attempts: every attempt's patch --------------------------------------------------------


#: How an attempt's model name is spelled: ``<model>@attempt-<k>``; its reports go under that
#: model folder and its summary is ``<model>@attempt-<k>.<run_id>.json``.
ATTEMPT_MODEL = "{model}@attempt-{k}"


def attempt_predictions(
    predictions_path: Path, predictions: dict[str, dict[str, Any]]
) -> dict[int, dict[str, dict[str, Any]]]:
    """``pgs eval --attempts``: the predictions of every attempt of ``pgs run/batch --attempts``,
    by attempt number, read from ``<dir>/<id>/attempt-<k>/<id>.pred`` beside the predictions
    file; each gets the model name :data:`ATTEMPT_MODEL`."""
    by_attempt: dict[int, dict[str, dict[str, Any]]] = {}
    folder = Path(predictions_path).parent
    for iid, main in predictions.items():
        for path in sorted((folder / iid).glob(f"attempt-*/{iid}.pred")):
            k = path.parent.name.removeprefix("attempt-")
            if not k.isdigit():
                continue
            try:
                pred = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise InstanceError(f"cannot read the attempt's prediction {path}: {e}") from None
            if not isinstance(pred, dict):
                raise InstanceError(f"{path} is not a prediction (instance_id, model_patch)")
            model = ATTEMPT_MODEL.format(model=main.get("model_name_or_path") or "None", k=k)
            by_attempt.setdefault(int(k), {})[iid] = {
                **pred,
                "instance_id": iid,
                "model_name_or_path": model,
            }
    return dict(sorted(by_attempt.items()))
