"""Choosing one patch among several attempts, by the evidence (``--attempts``).

Every attempt's final patch is checked again, in one sandbox, by the same property set (the
one the first Tester wrote and validated, :mod:`agent.pgs.shared`), the same related
repository tests (those of every candidate's changed files) and the same Hypothesis seed, so
every candidate meets the same generated inputs. :func:`evidence` turns one such check into a
:class:`Candidate`; :func:`choose` ranks the candidates, best first, by:

1. the verdict (:data:`VERDICT_ORDER`: passed, partial, tests-only, tests-changed, unchecked,
   failed);
2. more issue properties passed (of those that failed on the original code);
3. fewer regression properties and repository tests broken (failing on the patch);
4. more agreement with the other candidates on the properties' generated inputs: for every
   property, the candidates that end the same way on it (passed, or failed on the same
   shrunk input with the same outcome); Agentless's vote, on the properties' inputs;
5. the smaller patch (lines added and removed);
6. still tied: the earlier attempt (recorded as a tie).

The result is an :class:`AttemptsRecord`: every candidate, its evidence, the chosen one and
why, the ties; the main ``.traj`` keeps it under ``attempts`` and the ``.pred`` carries its
summary (:func:`prediction_fields`). No chooser model: the evidence decides, and a tie left
after the patch size goes to the earlier attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.record.attempts import ORDER, AttemptsRecord, Candidate
from agent.record.check import CheckReport
from agent.record.pgs import Verdict

#: Verdicts, best first (the first key of the order).
VERDICT_ORDER: tuple[Verdict, ...] = (
    "passed",
    "partial",
    "tests-only",
    "tests-changed",
    "unchecked",
    "failed",
)


def patch_lines(patch: str) -> int:
    """Lines a unified diff adds or removes."""
    return sum(
        1 for line in patch.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


def signature(report: CheckReport) -> dict[str, str]:
    """How each property ended on a candidate: ``passed``, or the outcome with the failing
    input and what the code did (the same seed gives every candidate the same inputs)."""
    out: dict[str, str] = {}
    for r in report.results:
        if r.kind == "repo":
            continue
        if not r.failed:
            out[r.nodeid] = r.outcome
        else:
            did = r.returned or r.exception or ""
            out[r.nodeid] = f"{r.outcome}: {r.example or ''} -> {did}"[:500]
    return out


def evidence(
    attempt: int,
    patch: str,
    report: CheckReport,
    shows_bug: set[str],
    verdict: Verdict,
    why: str,
) -> Candidate:
    """The :class:`Candidate` of one selection check (its verdict already judged)."""
    by_id = report.by_id()
    broken = [r.nodeid for r in report.failures() if r.kind in ("regression", "repo")]
    return Candidate(
        attempt=attempt,
        patch=patch,
        patch_lines=patch_lines(patch),
        verdict=verdict,
        verdict_reason=why,
        issue_passed=sum(1 for n in shows_bug if n in by_id and not by_id[n].failed),
        issue_total=len(shows_bug),
        broken=broken + [e.split(": ", 1)[0] for e in report.errors],
        signature=signature(report),
        report=report,
    )


def agree(candidates: Sequence[Candidate]) -> None:
    """Set each candidate's ``agreement``: over every property, the other candidates that
    ended the same way on it."""
    for c in candidates:
        c.agreement = sum(
            1
            for other in candidates
            if other is not c
            for nodeid, ended in c.signature.items()
            if other.signature.get(nodeid) == ended
        )


def rank(c: Candidate) -> tuple[int, int, int, int, int, int]:
    """The sort key of :data:`ORDER` (smaller is better)."""
    return (
        VERDICT_ORDER.index(c.verdict),
        -c.issue_passed,
        len(c.broken),
        -c.agreement,
        c.patch_lines,
        c.attempt,
    )


def _describe(c: Candidate, key: int) -> str:
    values = (
        f"verdict {c.verdict}",
        f"{c.issue_passed} of {c.issue_total} issue properties passed",
        f"{len(c.broken)} regression properties and repository tests broken",
        f"agreement {c.agreement}",
        f"{c.patch_lines} patch lines",
        f"attempt {c.attempt}",
    )
    return values[key]


def choose(candidates: Sequence[Candidate]) -> tuple[Candidate | None, str, list[int]]:
    """The best candidate by :data:`ORDER`, the reason (the first key that sets it apart from
    each other candidate) and the attempts tied with it on every key but the attempt number."""
    if not candidates:
        return None, "no attempt left a candidate", []
    agree(candidates)
    ranked = sorted(candidates, key=rank)
    best = ranked[0]
    if len(ranked) == 1:
        return best, f"attempt {best.attempt} is the only candidate ({best.verdict})", []
    ties = [c.attempt for c in ranked[1:] if rank(c)[:-1] == rank(best)[:-1]]
    reasons = []
    for other in ranked[1:]:
        pairs = enumerate(zip(rank(best), rank(other), strict=True))
        key = next(i for i, (a, b) in pairs if a != b)
        reasons.append(
            f"over attempt {other.attempt} by {ORDER[key]} "
            f"({_describe(best, key)} against {_describe(other, key)})"
        )
    reason = f"attempt {best.attempt} ({best.verdict}): " + "; ".join(reasons)
    if ties:
        reason += f"; tied on the evidence with attempt {', '.join(map(str, ties))}"
    return best, reason, ties


def prediction_fields(record: AttemptsRecord) -> dict[str, Any]:
    """What a ``.pred`` adds from the ``.traj``'s ``attempts``: their count, the chosen one,
    whether the choice changed the outcome of a single attempt, the total cost."""
    return {
        "attempts": record.ran,
        "attempt_chosen": record.chosen,
        "selection_changed": record.changed,
        "cost": record.total_cost,
    }
