"""Trajectories in SWE-agent's ``.traj`` layout, rewritten atomically after every step.

Top level: ``trajectory`` (steps), ``history`` (messages), ``info`` (submission, exit_status,
model_stats), ``replay_config``; pgs adds ``pgs`` (the Tester's work, once it exists). The
host's secrets (:mod:`agent.core.secrets`) are redacted from every write.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agent.core.secrets import Redactor


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
    def __init__(
        self, path: Path, *, replay_config: dict[str, Any], redactor: Redactor | None = None
    ) -> None:
        self.path = path
        #: What every write, and every message to the model, goes through.
        self.redactor = redactor if redactor is not None else Redactor.from_env()
        self.steps: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {"submission": None, "exit_status": None}
        self.replay_config = replay_config
        self.extra: dict[str, Any] = {}

    def as_dict(self) -> dict[str, Any]:
        return {
            "trajectory": self.steps,
            "history": self.history,
            "info": self.info,
            "replay_config": self.replay_config,
            **self.extra,
        }

    def save(self) -> None:
        text = json.dumps(self.as_dict(), indent=1, ensure_ascii=False, default=str)
        write_atomic(self.path, self.redactor.redact(text))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data
