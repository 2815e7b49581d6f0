"""A user's own sandbox kind, named in a config by its import path
(``type: tests.support.sandboxes:MarkedSandbox``): the host sandbox with one variable set from
its own config field, and a record of each sandbox it opened."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import ConfigDict, Field

from envs.local import LocalSandbox, LocalSandboxConfig
from envs.registry import SandboxSettings

PATH = "tests.support.sandboxes:MarkedSandbox"


class MarkedConfig(SandboxSettings):
    model_config = ConfigDict(extra="forbid")
    type: str = PATH
    marker: str = Field("unset", description="the value of PGS_MARKER in every command")


class MarkedSandbox(LocalSandbox):
    config_class = MarkedConfig
    #: (run id, marker) of every sandbox opened.
    opened: ClassVar[list[tuple[str, str]]] = []

    @classmethod
    def from_config(cls, config: MarkedConfig, *, repo: Path, run_id: str) -> MarkedSandbox:
        cls.opened.append((run_id, config.marker))
        return cls(repo, LocalSandboxConfig(env={"PGS_MARKER": config.marker}))


class NoConfigClass:
    """Not a sandbox class: it has no config_class."""
