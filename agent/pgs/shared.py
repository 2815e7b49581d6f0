"""One Tester property set shared by several attempts on one issue (``--attempts``).

The first attempt whose Tester wrote properties pays for them; every later attempt, and the
check that chooses among the attempts (:mod:`agent.pgs.selection`), adopts that set as it was
validated on the original code (:meth:`agent.pgs.reviewer.PGS.adopt`): the same files, the same
kept properties, the same issue properties that show the bug. It is read back from that
attempt's ``.traj`` (its ``pgs`` record), so a resumed run finds it without the Tester.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.record.pgs import PGSRecord, ValidationRecord


@dataclass(frozen=True)
class SharedProperties:
    """The property set of attempt :attr:`attempt`, validated once."""

    attempt: int
    #: ``{path: text}`` of the property files (the record's ``properties``).
    properties: dict[str, str]
    kept: list[str]
    #: Kept issue properties that failed on the original code.
    shows_bug: set[str]
    validation: ValidationRecord = field(default_factory=ValidationRecord)

    @classmethod
    def from_record(cls, record: PGSRecord, attempt: int) -> SharedProperties | None:
        """The set a run's record holds; None when its Tester wrote nothing that was kept."""
        validation = record.validation
        if not record.properties or validation is None or not validation.kept:
            return None
        by_id = validation.report.by_id() if validation.report is not None else {}
        shows_bug = {
            n
            for n in validation.kept
            if n in by_id and by_id[n].kind == "issue" and by_id[n].category != "pass"
        }
        return cls(
            attempt=attempt,
            properties=dict(record.properties),
            kept=list(validation.kept),
            shows_bug=shows_bug,
            validation=validation.model_copy(deep=True),
        )
