"""The run record: one pgs ``.traj`` file, as one typed, versioned document (:class:`RunRecord`).

The layout is SWE-agent's, so its tools read it: ``trajectory`` (one :class:`Step` per step of
the Generator), ``history`` (the conversation, SWE-agent's message dicts), ``info``
(:class:`Info`: submission, exit status, model stats, limits), ``replay_config`` (the resolved
run configuration); pgs adds ``pgs`` (:class:`~agent.record.pgs.PGSRecord`, once PGS ran or
chose not to) and ``attempts`` (:class:`~agent.record.attempts.AttemptsRecord`, with
``--attempts``). ``trajectory_format`` names the layout's version (:data:`TRAJECTORY_FORMAT`),
first in every file written since it existed; a file without it is ``pgs-0``, the layout before
the version was written, and is read the same way.

Reading (:meth:`RunRecord.load`) is tolerant: unknown keys are kept, missing ones defaulted;
written back (:meth:`RunRecord.dumps`), a loaded file keeps its keys and their order, so an old
file rewrites byte for byte. Foreign formats (SWE-agent, mini-swe-agent) become a
:class:`RunRecord` too (:mod:`agent.record.foreign`), with :attr:`RunRecord.missing` saying what
they lacked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from agent.record.attempts import AttemptsRecord
from agent.record.base import Record, load
from agent.record.pgs import PGSRecord
from agent.record.steps import Info, Limits, ModelStats, Step, Usage

__all__ = [
    "TRAJECTORY_FORMAT",
    "UNVERSIONED",
    "Info",
    "Limits",
    "ModelStats",
    "RunRecord",
    "Step",
    "Usage",
    "Writer",
]

#: The version of the layout written today: ``pgs-<n>``.
TRAJECTORY_FORMAT = "pgs-1"
#: The version of a pgs file written before the version was (no ``trajectory_format`` key).
UNVERSIONED = "pgs-0"
#: The writer a record came from: pgs itself, or a foreign agent converted into this layout.
Writer = Literal["pgs", "swe-agent", "mini-swe-agent", "unknown"]


class RunRecord(Record):
    """A whole ``.traj``: the run's steps, conversation, outcome, configuration and PGS record."""

    omitted_when_empty = ("trajectory_format", "pgs", "attempts")
    trajectory_format: str | None = Field(
        TRAJECTORY_FORMAT,
        description="the layout's version; absent in files written before pgs-1 (read as pgs-0)",
    )
    trajectory: list[Step] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    info: Info = Field(default_factory=Info)
    replay_config: dict[str, Any] = Field(default_factory=dict)
    pgs: PGSRecord | None = None
    attempts: AttemptsRecord | None = None
    #: Converted from another agent's format: what that file did not hold, each a sentence
    #: ``"missing: <what>"``. Never written.
    missing: list[str] = Field(default_factory=list, exclude=True)
    #: Which agent wrote the file (``pgs`` for a file of this layout). Never written.
    writer: Writer = Field("pgs", exclude=True)

    @property
    def version(self) -> str:
        """The layout's version: :data:`TRAJECTORY_FORMAT`, or :data:`UNVERSIONED` (pgs-0)."""
        return self.trajectory_format or UNVERSIONED

    @property
    def pgs_record(self) -> PGSRecord:
        """The PGS record (a default one, mode ``none``, when the run has none)."""
        return self.pgs if self.pgs is not None else PGSRecord()

    def usage(self) -> dict[str, float]:
        """Tokens and cost of the whole run: the Generator's ``model_stats`` plus every Tester
        turn's (``pgs.tester``, ``pgs.tester_2``, ...); ``tester_cost``: the Testers' part."""
        out = {"tokens_sent": 0.0, "tokens_received": 0.0, "instance_cost": 0.0}
        testers = [c.info.model_stats for c in self.pgs_record.conversations().values()]
        tester_cost = 0.0
        for stats, is_tester in [(self.info.model_stats, False), *((t, True) for t in testers)]:
            if stats is None:
                continue
            for key in out:
                out[key] += float(getattr(stats, key) or 0)
            if is_tester:
                tester_cost += float(stats.instance_cost or 0)
        return {**out, "tester_cost": tester_cost}

    @classmethod
    def load(cls, data: Any) -> RunRecord:
        """A parsed ``.traj`` (its layout kept, so :meth:`dumps` writes it back as it was)."""
        if isinstance(data, dict) and "trajectory_format" not in data:
            data = {"trajectory_format": None, **data}
            record = load(cls, data)
            assert record._layout is not None
            record._layout.remove("trajectory_format")
            return record
        return load(cls, data)

    @classmethod
    def read(cls, path: Path) -> RunRecord:
        """The ``.traj`` at ``path``."""
        return cls.load(json.loads(Path(path).read_text(encoding="utf-8")))

    def dumps(self) -> str:
        """The file's text, as pgs writes it (one-space indent, UTF-8 kept)."""
        data = self.model_dump(mode="json", warnings=False)  # a step appended as a dict: as is
        return json.dumps(data, indent=1, ensure_ascii=False)
