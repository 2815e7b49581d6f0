"""The counterexample pool of a check, and the nine ways of choosing from it (PGS, Table 1).

The plugin's pool pass (``agent/pgs/pgs_pytest_plugin.py``) runs every input of a failing
property to the end and records each distinct failing input (:class:`~agent.record.check.PoolInput`)
with its runtime and the repository lines it runs; the host counts its tokens under the
Generator's tokenizer (:func:`count_pool`), so a run's record holds the three measures of
every pooled input and each strategy of the paper's Table 1 can be computed offline
(:func:`choose`), from any recorded report.

The pool a strategy chooses from (:func:`candidates`) is the paper's "set of all
property-violating inputs": the drawn inputs (generated, the Tester's explicit examples,
replayed ones; not Hypothesis's shrink steps) of every failing test of the check, in the
first category of :data:`~agent.record.check.PRIORITY` that has one (property violations
before wrong answers...), as the feedback ranks them. pgs's own feedback picks the fewest
tokens among those and the shrunk ones (:func:`agent.pgs.feedback.select_failure`).
"""

from __future__ import annotations

import logging
from typing import Literal

from agent.errors import TokenizerUnavailable
from agent.pgs.feedback import Selection, failure_input
from agent.pgs.tokens import SimpleCounter, TokenCounter
from agent.record.check import DRAWN, PRIORITY, CheckReport, PoolInput, TestResult

logger = logging.getLogger(__name__)

Feature = Literal["lines", "runtime", "tokens"]
Statistic = Literal["min", "median", "max"]
#: Table 1's nine strategies: (line coverage, runtime, token count) x (min, median, max).
FEATURES: tuple[Feature, ...] = ("lines", "runtime", "tokens")
STATISTICS: tuple[Statistic, ...] = ("min", "median", "max")
STRATEGIES: tuple[tuple[Feature, Statistic], ...] = tuple(
    (f, s) for f in FEATURES for s in STATISTICS
)
#: The paper's (and pgs's) choice: the fewest tokens.
FEWEST_TOKENS: tuple[Feature, Statistic] = ("tokens", "min")


def strategy_name(feature: Feature, statistic: Statistic) -> str:
    return f"{feature}-{statistic}"


def count_pool(report: CheckReport, counter: TokenCounter) -> None:
    """Give every pooled input of ``report`` its token count (its arguments, as the feedback
    measures an input) under ``counter``; the simple rule when the counter fails part-way,
    for all of them (counts of one kind only)."""
    pooled = [(r, p) for r in report.results for p in r.pool]
    if not pooled:
        return
    try:
        counts = [counter.count(failure_input(r, p)) for r, p in pooled]
        name = counter.name
    except TokenizerUnavailable as exc:
        logger.warning("counting the pool's tokens with the simple rule: %s", exc)
        simple = SimpleCounter()
        counts = [simple.count(failure_input(r, p)) for r, p in pooled]
        name = simple.name
    for (_, pooled_input), tokens in zip(pooled, counts, strict=True):
        pooled_input.tokens = tokens
    report.pool_counter = name


def candidates(report: CheckReport) -> list[tuple[TestResult, PoolInput]]:
    """The drawn pooled inputs of every failing test, in the first category of
    :data:`~agent.record.check.PRIORITY` that has one."""
    every = [
        (r, p) for r in report.failures() if not r.regressed for p in r.pool if p.source in DRAWN
    ]
    for category in PRIORITY:
        found = [(r, p) for r, p in every if p.category == category]
        if found:
            return found
    return []


def measure(pooled: PoolInput, feature: Feature) -> float | None:
    value = {"lines": pooled.lines, "runtime": pooled.runtime, "tokens": pooled.tokens}[feature]
    return None if value is None else float(value)


def choose(
    pool: list[tuple[TestResult, PoolInput]], feature: Feature, statistic: Statistic
) -> tuple[TestResult, PoolInput] | None:
    """The input ``statistic`` picks by ``feature`` (the median: the lower middle one), ties
    broken by fewer tokens, then the shorter text; None when no input has the measure."""
    measured = [(r, p) for r, p in pool if measure(p, feature) is not None]
    if not measured:
        return None
    ranked = sorted(
        measured,
        key=lambda rp: (
            measure(rp[1], feature),
            rp[1].tokens if rp[1].tokens is not None else 0,
            len(rp[1].example or ""),
            rp[1].example or "",
            rp[0].nodeid,
        ),
    )
    if statistic == "min":
        return ranked[0]
    if statistic == "max":
        # The largest measure; among equals, still the fewest tokens.
        top = measure(ranked[-1][1], feature)
        return next(rp for rp in ranked if measure(rp[1], feature) == top)
    return ranked[(len(ranked) - 1) // 2]


def selection_of(
    chosen: tuple[TestResult, PoolInput], counter: TokenCounter, *, candidates: int, why: str
) -> Selection:
    """A :class:`~agent.pgs.feedback.Selection` of one pooled input, to render its feedback."""
    result, pooled = chosen
    text = failure_input(result, pooled)
    return Selection(
        result=result,
        chosen=pooled,
        category=pooled.category,
        mode="property-min",
        input=text,
        tokens=counter.count(text),
        counter=counter.name,
        candidates=candidates,
        why=why,
    )
