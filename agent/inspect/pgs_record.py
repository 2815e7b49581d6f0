"""The PGS record of a pgs trajectory (its ``pgs`` key) as the inspector shows it.

:func:`read_pgs` returns a :class:`~agent.inspect.model.PGSPanel`: the verdict, each property
with its kind, rule and fate (kept, dropped, or gone after a later Tester turn), every checked
round (failures, the chosen counterexample and why, the feedback as sent, the change from the
previous candidate) and the Tester's turns with their conversations. Whatever the record lacks
is a ``"missing: <what>"`` note.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from agent.errors import InterdiffError
from agent.inspect.diff import interdiff, parse_diff
from agent.inspect.lenient import as_dict
from agent.inspect.model import (
    Failure,
    PGSPanel,
    Property,
    Round,
    TesterTurnView,
    TrajectoryView,
    UsageView,
)
from agent.pgs.validate import property_decorators
from agent.record.check import CheckReport, FailingInput, TestResult
from agent.record.foreign import conversations
from agent.record.pgs import PGSRecord as RecordedPGS
from agent.record.pgs import RoundRecord
from agent.record.trajectory import RunRecord

#: Shows a Tester turn's conversation (stored under its key, as a run record) as a trajectory.
ReadConversation = Callable[[RunRecord, str], TrajectoryView]


def _markers(files: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """``{function name: (kind, rule)}`` from ``@pytest.mark.pgs_issue("rule")`` markers."""
    found: dict[str, tuple[str, str | None]] = {}
    for function, name, deco in property_decorators(files):
        if name not in ("pgs_issue", "pgs_regression"):
            continue
        rule = None
        if isinstance(deco, ast.Call) and deco.args:
            try:
                rule = str(ast.literal_eval(deco.args[0]))
            except ValueError:
                rule = ast.unparse(deco.args[0])
        found[function] = ("issue" if name == "pgs_issue" else "regression", rule)
    return found


def _function(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1].split("[", 1)[0]


def _results(report: CheckReport | None) -> list[TestResult]:
    return list(report.results) if report is not None else []


def _inputs(result: TestResult) -> list[FailingInput]:
    """Every input ``result`` failed on, as the plugin recorded them (reports from before
    ``examples`` existed: the result's own fields)."""
    if result.examples:
        return list(result.examples)
    own = result.model_dump(include=set(FailingInput.model_fields))
    return [FailingInput.model_validate(own)]


def read_pgs(
    pgs: RecordedPGS,
    unreadable: list[str],
    replay: dict[str, Any],
    read_conversation: ReadConversation,
) -> PGSPanel:
    """The run record's ``pgs``; ``unreadable``: the record's missing notes of values under
    ``pgs`` that did not read; ``replay``: its run configuration (the feedback mode when the
    record does not say it)."""
    given = pgs.model_fields_set
    record = PGSPanel(
        record=pgs,
        mode=pgs.mode if "mode" in given else as_dict(replay.get("pgs")).get("feedback"),
        verdict=pgs.verdict if "verdict" in given else None,
    )
    record.missing.extend(unreadable)
    if record.verdict is None:
        record.missing.append("missing: pgs.verdict")
    if pgs.validation is None:
        record.missing.append("missing: pgs.validation (which properties were kept and why)")
    if "rounds" not in given:
        record.missing.append("missing: pgs.rounds (the checked candidates)")
    record.properties = _properties(pgs, dict(pgs.properties or {}))
    previous: str | None = None
    for i, r in enumerate(pgs.rounds):
        record.rounds.append(_round(i + 1, r, previous))
        previous = r.patch if "patch" in r.model_fields_set else previous
    record.tester_turns, record.tester_usage = _tester_turns(pgs, read_conversation)
    return record


def _tester_turns(
    pgs: RecordedPGS, read_conversation: ReadConversation
) -> tuple[list[TesterTurnView], UsageView]:
    """Each Tester turn (from ``tester_turns`` and the ``tester``, ``tester_<n>`` keys) and the
    tokens and cost of their conversations together."""
    stored = conversations(pgs)
    keys = [t.key for t in pgs.tester_turns] + sorted(stored)
    found: list[TesterTurnView] = []
    usage = UsageView()
    for key in dict.fromkeys(k for k in keys if k):
        turn_record = next((t for t in pgs.tester_turns if t.key == key), None)
        turn = TesterTurnView(key=key, record=turn_record)
        conversation = stored.get(key)
        if conversation is not None:
            turn.trajectory = read_conversation(conversation, key)
            stats = turn.trajectory.usage
            for name in ("tokens_sent", "tokens_received", "cost", "api_calls"):
                value = getattr(stats, name)
                if value is not None:
                    setattr(usage, name, (getattr(usage, name) or 0) + value)
        found.append(turn)
    return found, usage


def _properties(pgs: RecordedPGS, files: dict[str, str]) -> list[Property]:
    markers = _markers(files)
    validation = pgs.validation
    known: dict[str, TestResult] = {}
    reports = [validation.report if validation else None, *(r.report for r in pgs.rounds)]
    for report in reports:
        for result in _results(report):
            if result.kind in ("issue", "regression"):
                known.setdefault(result.nodeid, result)
    original = {r.nodeid: r for r in _results(validation.report if validation else None)}
    props: dict[str, Property] = {}

    def prop(nodeid: str) -> Property:
        if nodeid not in props:
            kind, rule = markers.get(_function(nodeid), (None, None))
            seen = known.get(nodeid)
            props[nodeid] = Property(
                nodeid=nodeid,
                kind=(seen.kind if seen else None) or kind,
                rule=(seen.rule if seen else None) or rule,
            )
        return props[nodeid]

    turns = [(t.key or None, t.kept, t.dropped) for t in pgs.tester_turns]
    final_kept = validation.kept if validation else []
    final_dropped = validation.dropped if validation else []
    last_key = turns[-1][0] if turns else None
    for key, kept, dropped in [*turns, (last_key, final_kept, final_dropped)]:
        for nodeid in kept:
            p = prop(nodeid)
            p.status, p.reason, p.turn = "kept", None, p.turn or key
        for gone in dropped:
            if gone.nodeid:
                p = prop(gone.nodeid)
                p.status, p.reason = "dropped", gone.reason
                p.turn = p.turn or key
    latest = set(final_kept) | {d.nodeid for d in final_dropped}
    for nodeid, reason in ((validation.why_kept if validation else None) or {}).items():
        if nodeid in props and props[nodeid].status == "kept":
            props[nodeid].reason = reason
    for nodeid, p in props.items():
        if validation is not None and nodeid not in latest:
            before = f"{p.status} in {p.turn}" if p.turn else p.status
            p.reason = f"{before}{': ' + p.reason if p.reason else ''}; not in the final set"
            p.status = "gone"
        before_fix = original.get(nodeid)
        if before_fix is not None:
            p.on_original = f"{before_fix.outcome} ({before_fix.category})"
            inputs = _inputs(before_fix) if before_fix.category != "pass" else []
            p.original_example = inputs[0].example if inputs else None
    return list(props.values())


def _round(index: int, raw: RoundRecord, previous: str | None) -> Round:
    number = raw.round or index
    has_patch = "patch" in raw.model_fields_set
    rnd = Round(record=raw, number=number, patch=parse_diff(raw.patch))
    if not has_patch:
        rnd.missing.append("missing: the candidate's patch")
    if previous is not None and has_patch:
        try:
            rnd.interdiff = parse_diff(interdiff(previous, raw.patch))
        except InterdiffError as e:
            rnd.missing.append(f"missing: the diff against the previous candidate ({e})")
    report, selection = raw.report, raw.selection
    chosen_id = selection.result.nodeid if selection and selection.result else None
    if report is not None:
        for result in report.results:
            if not result.failed:
                rnd.passed += 1
                continue
            rnd.failures.append(
                Failure(result, inputs=_inputs(result), chosen=result.nodeid == chosen_id)
            )
        rnd.errors = list(report.errors)
        rnd.cut = report.cut
        rnd.coverage = report.coverage.describe() if report.coverage is not None else None
    elif raw.verdict != "unchecked":
        rnd.missing.append("missing: the check's report (which tests ran and failed)")
    rnd.tampered = [f"{c.path} ({c.change})" for c in raw.tampered]
    rnd.tests_changed = [f"{c.path} ({c.change})" for c in raw.tests_changed]
    rnd.probes = [list(p.new_kept) for p in raw.probes]
    return rnd
