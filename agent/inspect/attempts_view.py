"""The ``attempts`` record of a run (``--attempts``, :mod:`agent.pgs.selection`) for showing:
every :class:`~agent.record.attempts.Candidate` side by side, with its patch parsed and the
interdiff from the chosen patch to each other one (:class:`~agent.inspect.model.AttemptView`)."""

from __future__ import annotations

from agent.errors import InterdiffError
from agent.inspect.diff import interdiff, parse_diff
from agent.inspect.model import AttemptView, Diff
from agent.record.attempts import AttemptsRecord


def interdiff_view(chosen: str, patch: str) -> Diff:
    """The change from the chosen patch to ``patch``, parsed (or why there is none)."""
    try:
        return parse_diff(interdiff(chosen, patch))
    except InterdiffError as e:
        return Diff(text="", error=f"no interdiff: {e}")


def read_attempts(record: AttemptsRecord | None) -> list[AttemptView] | None:
    """The run record's ``attempts`` candidates side by side; None when it has none."""
    if record is None:
        return None
    chosen = next((c for c in record.candidates if c.attempt == record.chosen), None)
    views = []
    for c in record.candidates:
        between: Diff | None = None
        if chosen is not None and c is not chosen:
            between = interdiff_view(chosen.patch, c.patch)
        views.append(
            AttemptView(
                candidate=c, chosen=c is chosen, patch=parse_diff(c.patch), interdiff=between
            )
        )
    return views
