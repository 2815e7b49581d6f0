"""The PGS record of a pgs trajectory (its ``pgs`` key) as the inspector shows it.

:func:`read_pgs` returns a :class:`~agent.inspect.model.PGSRecord`: the verdict, each property
with its kind, rule and fate (kept, dropped, or gone after a later Tester turn), every checked
round (failures, the chosen counterexample and why, the feedback as sent, the change from the
previous candidate) and the Tester's turns with their conversations. Whatever the record lacks
is a ``"missing: <what>"`` note.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agent.errors import InterdiffError
from agent.inspect.diff import interdiff, parse_diff
from agent.inspect.fields import as_dict, as_int, as_list, as_text
from agent.inspect.model import (
    FailingInput,
    Failure,
    PGSRecord,
    Property,
    Round,
    Selection,
    TesterTurn,
    Trajectory,
    Usage,
)
from agent.pgs.report import Coverage
from agent.pgs.validate import property_decorators

#: Reads a Tester turn's conversation (the JSON stored under its key) as a trajectory.
ReadConversation = Callable[[dict[str, Any], str], Trajectory]


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


def _results(report: Any) -> list[dict[str, Any]]:
    results = report.get("results") if isinstance(report, dict) else None
    return [r for r in results or [] if isinstance(r, dict) and r.get("nodeid")]


def _inputs(result: dict[str, Any]) -> list[FailingInput]:
    examples = [e for e in result.get("examples") or [] if isinstance(e, dict)]
    if not examples:  # reports from before the field: the result's own fields
        examples = [result]
    return [
        FailingInput(
            example=e.get("example"),
            category=str(e.get("category") or result.get("category") or "?"),
            explicit=bool(e.get("explicit")),
            returned=e.get("returned"),
            exception=e.get("exception"),
            trace=e.get("trace"),
        )
        for e in examples
    ]


def read_pgs(
    raw: dict[str, Any], replay: dict[str, Any], read_conversation: ReadConversation
) -> PGSRecord:
    """The record under a trajectory's ``pgs`` key; ``replay``: its run configuration (the
    feedback mode when the record does not say it)."""
    record = PGSRecord(
        mode=raw.get("mode") or as_dict(replay.get("pgs")).get("feedback"),
        verdict=raw.get("verdict"),
        verdict_reason=raw.get("verdict_reason"),
        tester_error=raw.get("tester_error"),
    )
    if record.verdict is None:
        record.missing.append("missing: pgs.verdict")
    files = raw.get("properties")
    record.files = {str(k): as_text(v) for k, v in files.items()} if isinstance(files, dict) else {}
    validation = raw.get("validation") if isinstance(raw.get("validation"), dict) else None
    if validation is None:
        record.missing.append("missing: pgs.validation (which properties were kept and why)")
        validation = {}
    record.validation_note = validation.get("note")
    rounds = raw.get("rounds")
    if not isinstance(rounds, list):
        record.missing.append("missing: pgs.rounds (the checked candidates)")
        rounds = []
    record.properties = _properties(raw, validation, rounds, record.files)
    previous: str | None = None
    for i, r in enumerate(x for x in rounds if isinstance(x, dict)):
        record.rounds.append(_round(i + 1, r, previous))
        previous = as_text(r.get("patch")) if "patch" in r else previous
    record.tester_turns, record.tester_usage = _tester_turns(raw, read_conversation)
    return record


def _tester_turns(
    raw: dict[str, Any], read_conversation: ReadConversation
) -> tuple[list[TesterTurn], Usage]:
    """Each Tester turn (from ``tester_turns`` and the ``tester``, ``tester_<n>`` keys) and the
    tokens and cost of their conversations together."""
    turns = as_list(raw.get("tester_turns"))
    keys = [t.get("key") for t in turns if isinstance(t, dict)]
    keys += sorted(k for k in raw if k == "tester" or re.fullmatch(r"tester_\d+", k))
    found: list[TesterTurn] = []
    usage = Usage()
    for key in dict.fromkeys(k for k in keys if k):
        turn_raw = next((t for t in turns if isinstance(t, dict) and t.get("key") == key), {})
        turn = TesterTurn(
            key=str(key),
            why=turn_raw.get("why"),
            files=[str(f) for f in turn_raw.get("properties") or []],
            kept=len(turn_raw.get("kept") or []),
            dropped=len(turn_raw.get("dropped") or []),
        )
        conversation = raw.get(key)
        if isinstance(conversation, dict):
            turn.trajectory = read_conversation(conversation, str(key))
            stats = turn.trajectory.usage
            for name in ("tokens_sent", "tokens_received", "cost", "api_calls"):
                value = getattr(stats, name)
                if value is not None:
                    setattr(usage, name, (getattr(usage, name) or 0) + value)
        found.append(turn)
    return found, usage


def _properties(
    raw: dict[str, Any],
    validation: dict[str, Any],
    rounds: list[Any],
    files: dict[str, str],
) -> list[Property]:
    markers = _markers(files)
    known: dict[str, dict[str, Any]] = {}
    reports = [validation.get("report"), *(r.get("report") for r in rounds if isinstance(r, dict))]
    for report in reports:
        for result in _results(report):
            if result.get("kind") in ("issue", "regression"):
                known.setdefault(result["nodeid"], result)
    original = {r["nodeid"]: r for r in _results(validation.get("report"))}
    props: dict[str, Property] = {}

    def prop(nodeid: str) -> Property:
        if nodeid not in props:
            kind, rule = markers.get(_function(nodeid), (None, None))
            seen = known.get(nodeid, {})
            props[nodeid] = Property(
                nodeid=nodeid, kind=seen.get("kind") or kind, rule=seen.get("rule") or rule
            )
        return props[nodeid]

    turns = [t for t in raw.get("tester_turns") or [] if isinstance(t, dict)]
    final = {"kept": validation.get("kept") or [], "dropped": validation.get("dropped") or []}
    for turn in [*turns, {**final, "key": turns[-1].get("key") if turns else None}]:
        for nodeid in turn.get("kept") or []:
            p = prop(str(nodeid))
            p.status, p.reason, p.turn = "kept", None, p.turn or turn.get("key")
        for dropped in turn.get("dropped") or []:
            if isinstance(dropped, dict) and dropped.get("nodeid"):
                p = prop(str(dropped["nodeid"]))
                p.status, p.reason = "dropped", str(dropped.get("reason") or "")
                p.turn = p.turn or turn.get("key")
    latest = set(final["kept"]) | {
        str(d.get("nodeid")) for d in final["dropped"] if isinstance(d, dict)
    }
    why_kept = validation.get("why_kept")
    for nodeid, reason in (why_kept if isinstance(why_kept, dict) else {}).items():
        if nodeid in props and props[nodeid].status == "kept":
            props[nodeid].reason = str(reason)
    for nodeid, p in props.items():
        if validation and nodeid not in latest:
            before = f"{p.status} in {p.turn}" if p.turn else p.status
            p.reason = f"{before}{': ' + p.reason if p.reason else ''}; not in the final set"
            p.status = "gone"
        before_fix = original.get(nodeid)
        if before_fix is not None:
            p.on_original = f"{before_fix.get('outcome')} ({before_fix.get('category')})"
            inputs = _inputs(before_fix) if before_fix.get("category") != "pass" else []
            p.original_example = inputs[0].example if inputs else None
    return list(props.values())


def _coverage(raw: Any) -> str | None:
    """How much of a check ran, in the words of its verdict's reason."""
    if not isinstance(raw, dict):
        return None
    try:
        return Coverage.model_validate(raw).describe()
    except ValidationError:
        return "the check's coverage is recorded but unreadable"


def _round(index: int, raw: dict[str, Any], previous: str | None) -> Round:
    number = as_int(raw.get("round")) or index
    patch = as_text(raw.get("patch"))
    rnd = Round(number=number, patch=parse_diff(patch))
    if "patch" not in raw:
        rnd.missing.append("missing: the candidate's patch")
    if previous is not None and "patch" in raw:
        try:
            rnd.interdiff = parse_diff(interdiff(previous, patch))
        except InterdiffError as e:
            rnd.missing.append(f"missing: the diff against the previous candidate ({e})")
    report = raw.get("report")
    selection = raw.get("selection") if isinstance(raw.get("selection"), dict) else None
    chosen_id = (selection or {}).get("result", {}).get("nodeid") if selection else None
    if isinstance(report, dict):
        for result in _results(report):
            if result.get("category", "pass") == "pass":
                rnd.passed += 1
                continue
            rnd.failures.append(
                Failure(
                    nodeid=str(result["nodeid"]),
                    kind=str(result.get("kind") or "repo"),
                    category=str(result.get("category")),
                    outcome=str(result.get("outcome")),
                    rule=result.get("rule"),
                    note=result.get("note"),
                    inputs=_inputs(result),
                    chosen=result["nodeid"] == chosen_id,
                )
            )
        rnd.errors = [str(e) for e in report.get("errors") or []]
        rnd.cut = report.get("cut")
        rnd.coverage = _coverage(report.get("coverage"))
    elif raw.get("verdict") != "unchecked":
        rnd.missing.append("missing: the check's report (which tests ran and failed)")
    if selection is not None:
        chosen = selection.get("chosen") if isinstance(selection.get("chosen"), dict) else {}
        rnd.selection = Selection(
            nodeid=str(chosen_id or "?"),
            why=str(selection.get("why") or ""),
            input=selection.get("input"),
            tokens=as_int(selection.get("tokens")),
            counter=selection.get("counter"),
            candidates=as_int(selection.get("candidates")),
            category=selection.get("category"),
            chosen_example=chosen.get("example"),
            issue_example=selection.get("issue_example"),
        )
    rnd.feedback = raw.get("feedback")
    rnd.verdict = raw.get("verdict")
    rnd.note = raw.get("note")
    rnd.tampered = _changes(raw.get("tampered"))
    rnd.tests_changed = _changes(raw.get("tests_changed"))
    rnd.probes = [
        [str(n) for n in p.get("new_kept") or []]
        for p in raw.get("probes") or []
        if isinstance(p, dict)
    ]
    return rnd


def _changes(raw: object) -> list[str]:
    """``path (change)`` of each entry of a round's ``tampered`` or ``tests_changed``."""
    items = raw if isinstance(raw, list) else []
    return [f"{c.get('path')} ({c.get('change')})" for c in items if isinstance(c, dict)]
