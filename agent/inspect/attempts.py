"""The ``attempts`` record of a ``.traj`` (``--attempts``, :mod:`agent.pgs.selection`) as
:class:`~agent.inspect.model.AttemptsView`: every candidate side by side, with the interdiff
from the chosen patch to each other one."""

from __future__ import annotations

from agent.errors import InterdiffError
from agent.inspect.diff import interdiff, parse_diff
from agent.inspect.model import AttemptsView, AttemptView, Diff
from agent.record.attempts import AttemptsRecord


def read_attempts(record: AttemptsRecord | None) -> AttemptsView | None:
    """The run record's ``attempts`` side by side; None when it has none."""
    if record is None:
        return None
    chosen = next((c for c in record.candidates if c.attempt == record.chosen), None)
    views = []
    for c in record.candidates:
        between: Diff | None = None
        if chosen is not None and c is not chosen:
            try:
                between = parse_diff(interdiff(chosen.patch, c.patch))
            except InterdiffError as e:
                between = Diff(text="", error=f"no interdiff: {e}")
        views.append(
            AttemptView(
                attempt=c.attempt,
                chosen=c is chosen,
                exit_status=c.exit_status,
                own_verdict=c.own_verdict,
                verdict=c.verdict,
                verdict_reason=c.verdict_reason,
                issue=f"{c.issue_passed} of {c.issue_total}",
                broken=list(c.broken),
                agreement=c.agreement,
                patch_lines=c.patch_lines,
                cost=c.cost,
                tester_cost=c.tester_cost,
                temperature=c.temperature,
                patch=parse_diff(c.patch),
                interdiff=between,
            )
        )
    return AttemptsView(
        count=record.count,
        ran=record.ran,
        stopped=record.stopped,
        chosen=record.chosen,
        reason=record.reason,
        ties=list(record.ties),
        shared_from=record.shared_from,
        total_cost=record.total_cost,
        order=list(record.order),
        candidates=views,
    )
