"""A ``pgs select`` output as the inspector shows it: ``selection.json`` (or one instance's
``instances/<id>.json``) read into a :class:`~agent.inspect.model.SelectionView`.

Per instance: every candidate best rank first, with its patch parsed and the interdiff from
the chosen patch to it (as a run's ``--attempts`` are shown), the probes it changed and how
each of the candidates' fail-to-pass tests ended on it.

- :func:`find_selection`: the ``selection.json`` (or instance file) PATH stands for, or None
  when PATH is something else (a run, a batch);
- :func:`load_selection`: its view, of every instance or of one.

Errors: :class:`~agent.errors.InspectError` for a file that is not JSON or not a selection, and
an instance the selection does not hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.errors import InspectError
from agent.inspect.attempts_view import interdiff_view
from agent.inspect.diff import parse_diff
from agent.inspect.lenient import read_json
from agent.inspect.model import Diff, InstanceSelectionView, SelectCandidateView, SelectionView
from agent.record.selection import InstanceSelection, SelectCandidate, SelectionRecord

#: The file ``pgs select`` writes in its output folder.
SELECTION_FILE = "selection.json"


def _kind(data: Any) -> str | None:
    """``selection`` for a ``selection.json``, ``instance`` for an ``instances/<id>.json``."""
    if not isinstance(data, dict):
        return None
    if "instances" in data and "order" in data:
        return "selection"
    if "instance_id" in data and "candidates" in data and "candidates_hash" in data:
        return "instance"
    return None


def find_selection(path: Path) -> Path | None:
    """The selection file PATH stands for: PATH itself (a ``selection.json`` or an instance's
    file) or the ``selection.json`` of the folder PATH is; None when PATH is no selection."""
    path = Path(path)
    if path.is_dir():
        inside = path / SELECTION_FILE
        return inside if inside.is_file() else None
    if not path.is_file() or path.suffix != ".json" or path.name.endswith(".traj.json"):
        return None
    if path.name == SELECTION_FILE:
        return path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the trajectory loader says what is wrong with it
    return path if _kind(data) is not None else None


def load_selection(path: Path, instance: str | None = None) -> SelectionView:
    """The selection in ``path`` (see :func:`find_selection`), of every instance or of
    ``instance`` only."""
    path = Path(path)
    data = read_json(path)
    kind = _kind(data)
    try:
        if kind == "selection":
            record = SelectionRecord.model_validate(data)
        elif kind == "instance":
            one = InstanceSelection.model_validate(data)
            record = SelectionRecord(order=one.order, instances={one.instance_id: one})
        else:
            raise InspectError(
                f"{path} is JSON but not a pgs select output (no instances and order): pass "
                "the folder pgs select wrote, its selection.json or an instances/<id>.json"
            )
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise InspectError(f"{path} is not a readable selection: {where}: {first['msg']}") from None
    view = SelectionView(record=record, path=path)
    ids = list(record.instances)
    if instance is not None:
        if instance not in record.instances:
            have = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            raise InspectError(
                f"{path} holds no instance {instance}: it holds {have or 'none yet'}"
            )
        ids = [instance]
    if not record.instances:
        view.missing.append("missing: instances (pgs select has finished none yet)")
    view.instances = [instance_view(record.instances[iid]) for iid in ids]
    return view


def _place(c: SelectCandidate) -> tuple[int, int]:
    """Best rank first; unranked candidates (the instance's check failed) last, as read."""
    return (c.rank if c.rank > 0 else 1 << 30, c.index)


def instance_view(selection: InstanceSelection) -> InstanceSelectionView:
    """One instance's candidates side by side, best rank first."""
    chosen = next((c for c in selection.candidates if c.index == selection.chosen), None)
    shows_bug = [t.nodeid for t in selection.added_tests if t.original != "passed"]
    views = []
    for c in sorted(selection.candidates, key=_place):
        between: Diff | None = None
        if chosen is not None and c is not chosen:
            between = interdiff_view(chosen.patch, c.patch)
        e = c.evidence
        views.append(
            SelectCandidateView(
                candidate=c,
                chosen=c is chosen,
                tied=c.index in selection.ties,
                patch=parse_diff(c.patch),
                interdiff=between,
                probes_changed=[
                    p.name
                    for p in selection.probes
                    if p.name in e.probes and e.probes[p.name] != p.original
                ],
                fail_to_pass={n: e.cross.get(n, "not run") for n in shows_bug},
            )
        )
    return InstanceSelectionView(selection=selection, candidates=views)
