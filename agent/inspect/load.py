"""Read what ``pgs inspect`` shows: a ``.traj`` file, a run folder or a batch folder.

- :func:`load` decides what PATH is (:func:`resolve`) and returns a
  :class:`~agent.inspect.model.TrajectoryView` or a :class:`~agent.inspect.model.BatchView`;
- :func:`load_trajectory` / :func:`trajectory_from_dict`
  (:mod:`agent.inspect.trajectory_view`): one ``.traj``, in pgs's layout or SWE-agent's, or an
  older or foreign file with keys missing: every missing part becomes a ``"missing: <what>"``
  note, never an exception; its PGS record is read by :mod:`agent.inspect.pgs_record`;
- :func:`load_batch` (:mod:`agent.inspect.batch_view`): a batch folder's rows, with ``resolved``
  from a ``pgs eval`` summary;
- :mod:`agent.inspect.lenient`: the lenient readers these share.

Errors: :class:`InspectError` (a ValueError) for a PATH that cannot be inspected at all (it
does not exist, is not JSON, is JSON but not a trajectory, or a folder without trajectories);
its message is one sentence that says what to pass instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.errors import InspectError
from agent.inspect.batch_view import load_batch
from agent.inspect.lenient import KINDS, TRAJ_KEYS
from agent.inspect.model import BatchView, TrajectoryView
from agent.inspect.trajectory_view import load_trajectory, trajectory_from_dict

__all__ = [
    "KINDS",
    "TRAJ_KEYS",
    "InspectError",
    "load",
    "load_batch",
    "load_trajectory",
    "resolve",
    "trajectory_from_dict",
]


def resolve(path: Path) -> Path:
    """The ``.traj`` file PATH stands for (a file, or a run folder holding one), or the batch
    folder it is; :class:`InspectError` when it is neither."""
    path = Path(path)
    if not path.exists():
        raise InspectError(f"{path} does not exist: pass {KINDS}")
    if path.is_file():
        return path
    direct = sorted([*path.glob("*.traj"), *path.glob("*.traj.json")])  # .json: mini-swe-agent
    nested = sorted([*path.glob("*/*.traj"), *path.glob("*/*.traj.json")])
    if len(direct) == 1:  # --attempts: attempt-<k>/<id>.traj beside <id>.traj is one run
        nested = [p for p in nested if not _attempt_of(p, direct[0])]
    if len(direct) == 1 and not nested and not (path / "preds.json").is_file():
        return direct[0]
    if direct or nested or (path / "preds.json").is_file():
        return path
    raise InspectError(f"{path} holds no .traj file and no preds.json: pass {KINDS}")


def _attempt_of(path: Path, main: Path) -> bool:
    """``path`` is one attempt of the run ``main`` holds (``<id>/attempt-<k>/<id>.traj``)."""
    return re.fullmatch(r"attempt-\d+", path.parent.name) is not None and path.name == main.name


def load(path: Path) -> TrajectoryView | BatchView:
    """A ``.traj`` or a run folder (one trajectory) or a batch folder; see :data:`KINDS`."""
    target = resolve(path)
    return load_batch(target) if target.is_dir() else load_trajectory(target)
