"""Trajectories in SWE-agent's ``.traj`` layout, rewritten atomically after every step.

Top level: ``trajectory`` (steps), ``history`` (messages), ``info`` (submission, exit_status,
model_stats), ``replay_config``; pgs adds ``pgs`` (the Tester's work, once it exists). Secrets
(API keys and tokens found in the environment) are redacted from every write.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Environment variables whose values are secrets wherever they appear.
SECRET_ENV_VARS = ("OPENAI_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "ANTHROPIC_API_KEY", "HF_TOKEN")
REDACTED = "***"


def secrets_from_env(extra_vars: Iterable[str] = ()) -> list[str]:
    names = {*SECRET_ENV_VARS, *extra_vars}
    return [v for n in names if len(v := os.environ.get(n, "")) >= 6]


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


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
    def __init__(self, path: Path, *, replay_config: dict[str, Any], secrets: Iterable[str] = ()):
        self.path = path
        self.secrets = [s for s in secrets if s]
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
        write_atomic(self.path, redact(text, self.secrets))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data
