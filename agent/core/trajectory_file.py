"""Trajectories in SWE-agent's ``.traj`` layout, rewritten atomically after every step.

The file's layout is :class:`agent.record.trajectory.RunRecord` (``trajectory_format``,
``trajectory``, ``history``, ``info``, ``replay_config``, ``pgs``, ``attempts``). The host's
secrets (:mod:`agent.core.secrets`) are redacted from every write.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from agent.core.secrets import Redactor
from agent.record.trajectory import Info, RunRecord, Step


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that a reader (or a crash) sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Trajectory:
    """The run's ``.traj`` file: its :class:`~agent.record.trajectory.RunRecord`, saved
    atomically, redacted, after every step."""

    def __init__(
        self, path: Path, *, replay_config: dict[str, Any], redactor: Redactor | None = None
    ) -> None:
        self.path = path
        #: What every write, and every message to the model, goes through.
        self.redactor = redactor if redactor is not None else Redactor.from_env()
        self.record = RunRecord(info=Info(submission=None, exit_status=None))
        self.record.replay_config = replay_config

    @property
    def steps(self) -> list[Step]:
        return self.record.trajectory

    @steps.setter
    def steps(self, steps: list[Step]) -> None:
        self.record.trajectory = steps

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.record.history

    @history.setter
    def history(self, history: list[dict[str, Any]]) -> None:
        self.record.history = history

    @property
    def info(self) -> Info:
        return self.record.info

    @info.setter
    def info(self, info: Info | dict[str, Any]) -> None:
        self.record.info = info if isinstance(info, Info) else Info.model_validate(info)

    @property
    def extra(self) -> RunRecord:
        """The keys beside the steps (``pgs``, ``attempts``), by key: the record itself."""
        return self.record

    @extra.setter
    def extra(self, extra: dict[str, Any]) -> None:
        for key, value in extra.items():
            self.record[key] = value

    @property
    def replay_config(self) -> dict[str, Any]:
        return self.record.replay_config

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = self.record.model_dump(mode="json")
        return data

    def save(self) -> None:
        write_atomic(self.path, self.redactor.redact(self.record.dumps()))


def load(path: Path) -> RunRecord:
    """The ``.traj`` at ``path``, as written."""
    return RunRecord.read(path)
