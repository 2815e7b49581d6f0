"""A ``pgs select`` output as rich :class:`~rich.text.Text`: :func:`selection_text`, the files it
read, one line per instance, then each instance in full (``pgs inspect`` prints it; the shared
helpers are :mod:`agent.inspect.tui_text`'s).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from agent.inspect.model import InstanceSelectionView, SelectCandidateView, SelectionView
from agent.inspect.tui_text import (
    MISSING,
    NONE,
    diff_text,
    first_line,
    missing_notes,
    seconds,
    section,
)


def _names(items: list[str], most: int = 10) -> str:
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def selection_text(view: SelectionView) -> Text:
    """A ``pgs select`` output: the files it read, one line per instance, then each instance
    in full (every candidate, its evidence, its patch and the change from the chosen one)."""
    out = Text()
    record = view.record
    out.append("pgs select", style="bold")
    out.append(f"  {view.path}", style="dim")
    count = len(record.instances)
    out.append(f"\n{count} instance{'' if count == 1 else 's'}")
    if record.predictions:
        files = len(record.predictions)
        out.append(f" from {files} prediction file{'' if files == 1 else 's'}: ")
        out.append(_names([Path(f).name for f in record.predictions], 5), style="dim")
    out.append("\norder of the keys: " + " > ".join(record.order) + "\n")
    missing_notes(out, view.missing)
    if len(view.instances) > 1:
        section(out, "Instances")
        for inst in view.instances:
            out.append(f"{inst.instance_id}", style="bold")
            chosen = inst.chosen
            if inst.selection.error:
                out.append(f"  error: {first_line(inst.selection.error, 120)}\n", style="red")
            elif chosen is None:
                out.append("  nothing chosen\n", style=MISSING)
            else:
                models = ", ".join(s.model or s.file for s in chosen.candidate.sources)
                out.append(
                    f"  candidate {chosen.candidate.index} of {len(inst.candidates)} ({models})"
                    f"  {first_line(inst.selection.reason, 100)}\n"
                )
    for inst in view.instances:
        instance_text(out, inst, view.path)
    out.rstrip()
    return out


def instance_text(out: Text, inst: InstanceSelectionView, where: Path | None) -> None:
    """One instance: the choice, the reason and the ties, what the original code showed, then
    every candidate best rank first."""
    s = inst.selection
    chosen = inst.chosen
    out.append(f"\n━━ {s.instance_id}", style="bold")
    if chosen is not None:
        out.append(f": candidate {chosen.candidate.index} of {len(inst.candidates)} chosen\n")
    else:
        out.append(f": none of {len(inst.candidates)} candidates chosen\n", style=MISSING)
    if s.error:
        out.append(f"error: {s.error}\n", style="bold red")
    if s.reason:
        out.append("reason: ", style="bold")
        out.append(s.reason + "\n")
    out.append("ties: ", style="bold")
    out.append(
        (
            ", ".join(f"candidate {i}" for i in s.ties) + " (equal on every key; the first read "
            "is chosen)"
            if s.ties
            else "none"
        )
        + "\n"
    )
    out.append("probes (the issue's own code): ", style="bold")
    out.append((", ".join(p.name for p in s.probes) or "none") + "\n")
    fail_first = [t for t in s.added_tests if t.original != "passed"]
    out.append("tests the candidates add: ", style="bold")
    out.append(f"{len(s.added_tests)}, {len(fail_first)} failing on the original code\n")
    for t in s.added_tests:
        by = ", ".join(map(str, t.by))
        out.append(f"  {t.nodeid}  by {by or NONE}, on the original code: {t.original or NONE}\n")
    out.append("related test files: ", style="bold")
    out.append((_names(s.related) or "none") + "\n")
    if s.seconds:
        out.append(
            "time: " + ", ".join(f"{k} {seconds(v)}" for k, v in s.seconds.items()) + "\n",
            style="dim",
        )
    for c in inst.candidates:
        _candidate_text(out, c, len(s.probes), where)


def _candidate_text(out: Text, c: SelectCandidateView, probes: int, where: Path | None) -> None:
    cand, e = c.candidate, c.candidate.evidence
    out.append(f"\nCandidate {cand.index}", style="bold")
    out.append(f" · rank {cand.rank or NONE}")
    if c.chosen:
        out.append(" · chosen", style="bold green")
    elif c.tied:
        out.append(" · tied with the chosen one", style="bold yellow")
    out.append("\n")
    out.append(f"  sources ({len(cand.sources)}):\n")
    for source in cand.sources:
        out.append(f"    {source.model or NONE}", style="bold")
        out.append(f"  {source.file}\n", style="dim")
    if e.error:
        out.append(f"  its check did not run: {e.error}\n", style="red")
    out.append("  applies: ")
    if e.applies:
        out.append("yes\n")
    else:
        out.append(f"no ({e.apply_error or 'no command applied it'})\n", style="red")
    out.append(f"  repository tests broken: {len(e.broken)} ({e.related_run} related tests ran)\n")
    for name in e.broken:
        out.append(f"    {name}\n", style="red")
    out.append(f"  issue's probes changed: {e.probes_changed} of {probes}")
    out.append(f" ({', '.join(c.probes_changed)})\n" if c.probes_changed else "\n")
    out.append(
        f"  candidates' fail-to-pass tests passed: {e.fail_to_pass_passed} of "
        f"{e.fail_to_pass_total}\n"
    )
    for nodeid, how in c.fail_to_pass.items():
        out.append(f"    {'✓' if how == 'passed' else '✗'} {nodeid} ({how})\n", style="dim")
    cluster = "none (not checked)" if e.cluster < 0 else str(e.cluster)
    out.append(f"  behaviour cluster: {cluster}, {e.cluster_sources} votes\n")
    out.append(f"  own tests: {e.own_tests} added or changed, {e.own_tests_failing} failing\n")
    if e.tests_changed:
        out.append(f"  test files changed: {', '.join(e.tests_changed)}\n")
    named = f"{e.issue_files} of {e.code_files}" if e.code_files else f"{e.issue_files}"
    out.append(f"  changed code files the issue names: {named}\n")
    out.append(f"  patch: {e.patch_lines} lines added and removed\n")
    out.append(
        f"  check: {seconds(e.seconds)} · key: {', '.join(f'{k:g}' for k in cand.key)}\n",
        style="dim",
    )
    if c.interdiff is not None:
        out.append("  Change from the chosen patch (interdiff):\n", style="bold")
        if c.interdiff.error:
            out.append(f"    {c.interdiff.error}\n", style=MISSING)
        else:
            diff_text(out, c.interdiff, where, "    ")
    out.append("  Patch:\n", style="bold")
    diff_text(out, c.patch, where, "    ")
