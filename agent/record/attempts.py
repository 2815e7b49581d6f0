"""Several attempts on one issue and the choice among them: the ``.traj``'s ``attempts``.

Written by :mod:`agent.run.run_attempts`; the choice itself is :mod:`agent.pgs.selection`'s.
"""

from __future__ import annotations

from pydantic import Field

from agent.record.base import Record
from agent.record.check import CheckReport
from agent.record.pgs import GuardedChange, Verdict

#: The keys of the order, as recorded and as the reason names them.
ORDER = (
    "verdict",
    "issue properties passed",
    "regression properties and repository tests broken",
    "agreement with the other candidates",
    "patch size",
    "attempt number",
)


class Candidate(Record):
    """One attempt's final patch and the evidence the selection check found on it."""

    attempt: int = Field(description="1 for the first attempt")
    exit_status: str | None = Field(None, description="how the attempt's run ended")
    own_verdict: Verdict | None = Field(
        None, description="the verdict of the attempt's own last check (its .traj)"
    )
    patch: str = ""
    patch_lines: int = Field(0, description="lines added and removed")
    verdict: Verdict = Field("unchecked", description="the verdict of the selection check")
    verdict_reason: str = ""
    issue_passed: int = Field(0, description="issue properties that showed the bug and pass")
    issue_total: int = Field(0, description="issue properties that showed the bug")
    broken: list[str] = Field(
        default_factory=list,
        description="regression properties and repository tests failing on the patch",
    )
    agreement: int = Field(
        0, description="(property, other candidate) pairs that end the same way on it"
    )
    #: {property node id: how it ended}, what agreement compares (not written to the record).
    signature: dict[str, str] = Field(default_factory=dict, exclude=True)
    tests_changed: list[GuardedChange] = Field(default_factory=list)
    report: CheckReport | None = Field(None, description="the selection check's report")
    cost: float = Field(0.0, description="the attempt's cost, Generator and Tester, USD")
    tester_cost: float = Field(0.0, description="the part its Tester cost (attempt 1 only)")
    temperature: float | None = Field(None, description="the attempt's sampling temperature")
    error: str | None = Field(None, description="why the selection check could not run")


class AttemptsRecord(Record):
    """Several attempts on one issue and the choice among them (the ``.traj``'s ``attempts``)."""

    count: int = Field(0, description="attempts asked for (--attempts)")
    ran: int = Field(0, description="attempts that ran (early stop and the cost limit end it)")
    stopped: str | None = Field(None, description="why no further attempt ran, if any")
    order: list[str] = Field(default_factory=lambda: list(ORDER))
    candidates: list[Candidate] = Field(default_factory=list)
    chosen: int | None = Field(None, description="the chosen attempt")
    reason: str = ""
    ties: list[int] = Field(
        default_factory=list, description="attempts equal to the chosen one on every key"
    )
    shared_from: int | None = Field(
        None, description="the attempt whose Tester wrote the shared properties"
    )
    seed: int | None = Field(None, description="the Hypothesis seed of the selection check")
    changed: bool = Field(
        False, description="the chosen patch differs from the first attempt's (a single run's)"
    )
    total_cost: float = 0.0
