"""The PGS panel of ``pgs inspect --tui``: :func:`pgs_text`, the verdict, the Tester's properties
and turns, and every round (its failures, the counterexample chosen, the feedback sent), as rich
:class:`~rich.text.Text` (the shared helpers are :mod:`agent.inspect.tui_text`'s).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from agent.inspect.model import Round, TrajectoryView
from agent.inspect.tui_text import (
    MISSING,
    NONE,
    STATUS_STYLES,
    cut,
    diff_text,
    first_line,
    missing_notes,
    section,
    verdict_text,
)


def pgs_text(traj: TrajectoryView) -> Text:
    """The PGS record: verdict, the Tester's properties and turns, every round."""
    pgs = traj.pgs
    if pgs is None:
        if traj.pgs_absent:
            return Text(traj.pgs_absent)
        return Text("missing: pgs (the Tester's properties, rounds and verdict)", style=MISSING)
    out = Text()
    out.append("Verdict: ", style="bold")
    out.append_text(verdict_text(pgs.verdict))
    if pgs.record.verdict_reason:
        out.append(f": {pgs.record.verdict_reason}")
    out.append(f"\nFeedback mode: {pgs.mode or NONE}\n")
    if pgs.record.tester_error:
        out.append(f"Tester error: {pgs.record.tester_error}\n", style="red")
    missing_notes(out, pgs.missing)

    kept = sum(p.status == "kept" for p in pgs.properties)
    dropped = sum(p.status == "dropped" for p in pgs.properties)
    section(out, f"Properties ({kept} kept, {dropped} dropped)")
    validation = pgs.record.validation
    if validation is not None and validation.note:
        out.append(validation.note + "\n", style="dim")
    if not pgs.properties:
        out.append("(none)\n", style="dim")
    for p in pgs.properties:
        out.append(f"{p.status:<8}", style=STATUS_STYLES.get(p.status, ""))
        out.append(f"{p.kind or 'kind ?':<11}{p.nodeid}\n")
        if p.rule:
            out.append(f"{'':8}rule: {p.rule}\n")
        if p.reason:
            out.append(f"{'':8}reason: {p.reason}\n", style=STATUS_STYLES.get(p.status, ""))
        if p.on_original:
            example = f" with {p.original_example}" if p.original_example else ""
            out.append(f"{'':8}on the original code: {p.on_original}{example}\n", style="dim")
    if pgs.tester_turns:
        section(out, "Tester turns")
        for turn in pgs.tester_turns:
            steps = f", {len(turn.trajectory.steps)} steps" if turn.trajectory else ""
            why = f" ({turn.why})" if turn.why else ""
            out.append(f"{turn.key}{why}: {turn.kept} kept, {turn.dropped} dropped{steps}")
            out.append(f"  {', '.join(turn.files)}\n" if turn.files else "\n", style="dim")

    section(out, f"Rounds ({len(pgs.rounds)})")
    if not pgs.rounds:
        out.append("(none)\n", style="dim")
    for rnd in pgs.rounds:
        _round_text(out, rnd, traj.path)
    out.rstrip()
    return out


def _round_text(out: Text, rnd: Round, where: Path | None) -> None:
    out.append(f"\nRound {rnd.number}", style="bold")
    out.append(f" (step {rnd.step})" if rnd.step else " (the diff the run ended with)")
    out.append(" · verdict ")
    out.append_text(verdict_text(rnd.verdict))
    out.append(f" · {rnd.passed} passed, {len(rnd.failures)} failed\n")
    missing_notes(out, rnd.missing, "  ")
    if rnd.note:
        out.append(f"  {rnd.note}\n", style="dim")
    for failure in rnd.failures:
        chosen = failure.chosen
        out.append("  ▶ " if chosen else "    ", style="bold")
        result = failure.result
        out.append(f"[{result.kind}] {result.nodeid}: {result.category} ({result.outcome})")
        out.append("  chosen\n" if chosen else "\n", style="bold")
        if result.rule:
            out.append(f"      rule: {result.rule}\n")
        for example in failure.inputs[:3]:
            out.append(f"      input: {example.example or NONE}", style="dim")
            got = example.exception or example.returned
            out.append(f" → {first_line(got, 120)}\n" if got else "\n", style="dim")
    for error in rnd.errors:
        out.append(f"  pytest error: {first_line(error, 200)}\n", style="red")
    if rnd.coverage:
        out.append(f"  {rnd.coverage}\n", style="dim")
    if rnd.cut:
        out.append(f"  cut by the time budget: {rnd.cut}\n", style=MISSING)
    if rnd.tampered:
        out.append(
            f"  the Generator changed (ran the Tester's version): {', '.join(rnd.tampered)}\n",
            style="red",
        )
    if rnd.tests_changed:
        out.append(
            f"  the patch changes (ran as at the base commit): {', '.join(rnd.tests_changed)}\n",
            style="red",
        )
    sel = rnd.selection
    if sel is not None:
        out.append("  Counterexample: ", style="bold")
        out.append(f"{sel.input or sel.chosen_example or NONE}")
        tokens = f"{sel.tokens} tokens" if sel.tokens is not None else None
        counter = f"{sel.counter} counter" if sel.counter else None
        detail = ", ".join(x for x in (tokens, counter) if x)
        out.append(f" ({detail})\n" if detail else "\n")
        out.append(f"  chosen: {sel.nodeid}\n  why: {sel.why}\n", style="dim")
    out.append("  Feedback sent:\n", style="bold")
    if rnd.feedback:
        for line in cut(rnd.feedback, where).split("\n"):
            out.append(f"    {line}\n")
    else:
        out.append("    none\n", style="dim")
    for i, new in enumerate(rnd.probes, 1):
        out.append(f"  probe {i}: new kept properties: {', '.join(new) or 'none'}\n", style="dim")
    if rnd.interdiff is not None:
        out.append("  Change from the previous candidate:\n", style="bold")
        diff_text(out, rnd.interdiff, where, "    ")
