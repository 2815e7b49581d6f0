"""What each panel of ``pgs inspect --tui`` shows, as rich :class:`~rich.text.Text`.

Plain functions of the inspector's records (:mod:`agent.inspect.model`): the header, a step, the
issue, the result, the PGS record, a batch and a batch row. :mod:`agent.inspect.tui` puts them
on screen; ``pgs inspect`` prints a ``pgs select`` output with :func:`selection_text`. A text
longer than :data:`MAX_CHARS` is cut, with a note of how much was left out and where the whole
text is.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from agent.inspect.model import (
    Batch,
    BatchRow,
    Diff,
    InstanceSelectionView,
    Round,
    SelectCandidateView,
    SelectionView,
    StepView,
    Trajectory,
    Usage,
)

#: Characters of one text (an observation, a diff, a feedback message) drawn at most.
MAX_CHARS = 100_000
NONE = "-"

HEADING = "bold underline"
MISSING = "yellow"
VERDICT_STYLES = {
    "passed": "bold green",
    "failed": "bold red",
    "partial": "bold yellow",
    "tests-only": "bold yellow",
    "tests-changed": "bold red",
}
STATUS_STYLES = {"kept": "green", "dropped": "red", "gone": "dim"}
DIFF_STYLES = {"added": "green", "removed": "red", "context": "", "note": "dim italic"}


def cut(text: str, where: Path | None) -> str:
    if len(text) <= MAX_CHARS:
        return text
    rest = len(text) - MAX_CHARS
    source = where if where is not None else "the file"
    return f"{text[:MAX_CHARS]}\n… {rest:,} more characters not shown here (all of it: {source})"


def money(cost: float | None) -> str:
    if cost is None:
        return NONE
    return f"${cost:.4f}" if 0 < cost < 0.01 else f"${cost:.2f}"


def seconds(duration: float | None) -> str:
    if duration is None:
        return NONE
    return f"{duration:.0f} s" if duration >= 10 else f"{duration:.1f} s"


def first_line(text: str, width: int = 60) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def verdict_text(verdict: str | None) -> Text:
    return Text(verdict or NONE, style=VERDICT_STYLES.get(verdict or "", "bold"))


def _missing(out: Text, notes: list[str], indent: str = "") -> None:
    for note in notes:
        out.append(f"{indent}{note}\n", style=MISSING)


def _section(out: Text, title: str) -> None:
    out.append(f"\n{title}\n", style=HEADING)


def summary_text(traj: Trajectory, position: tuple[int, int] | None = None) -> Text:
    """The header: which run, how it ended, the issue's first line, and what the file lacks."""
    out = Text()
    out.append(traj.instance_id, style="bold")
    if position is not None:
        out.append(f"  (instance {position[0] + 1} of {position[1]})")
    writer = {"pgs": "pgs", "swe-agent": "SWE-agent"}.get(traj.writer, "an unknown writer")
    out.append(f"  written by {writer}", style="dim")
    if traj.path is not None:
        out.append(f"  {traj.path}", style="dim")
    out.append("\nexit: ")
    out.append(traj.exit_status or NONE, style="bold")
    out.append(f" · {len(traj.steps)} steps · cost {money(traj.total_cost)}")
    out.append(f" · time {seconds(traj.duration)}")
    if traj.model_name:
        out.append(f" · model {traj.model_name}")
    if traj.pgs is not None:
        out.append(" · verdict ")
        out.append_text(verdict_text(traj.pgs.verdict))
    if traj.limits_hit:
        out.append(f" · limit hit: {', '.join(traj.limits_hit)}", style="bold red")
    if traj.error:
        out.append(f"\nerror: {first_line(traj.error, 200)}", style="bold red")
    if traj.issue:
        out.append(f"\nissue: {first_line(traj.issue, 200)}")
    out.append("\n")
    _missing(out, traj.missing)
    out.rstrip()
    return out


def step_text(traj: Trajectory, step: StepView) -> Text:
    """One step: its facts, then thought, action and observation (each said when missing)."""
    out = Text()
    out.append(f"Step {step.index} of {len(traj.steps)}", style="bold")
    facts = []
    if step.tool:
        facts.append(step.tool)
    facts.append(f"exit {step.exit_code if step.exit_code is not None else NONE}")
    if step.execution_time is not None:
        facts.append(f"{step.execution_time:.2f} s")
    if step.usage is not None:
        u = step.usage
        facts.append(
            f"{u.tokens_sent or 0} tokens sent, {u.tokens_received or 0} received, {money(u.cost)}"
        )
    else:
        facts.append(f"~{step.estimated_tokens} tokens (estimated)")
    out.append(" · " + " · ".join(facts) + "\n")
    if step.round is not None:
        rnd = round_of(traj, step.round)
        out.append(f"this submission was checked in round {step.round}: ")
        out.append_text(verdict_text(rnd.verdict if rnd else None))
        out.append(" (PGS panel)\n")
    _missing(out, step.missing)
    for title, key, text in (
        ("Thought", "thought", step.thought or step.response),
        ("Action", "action", step.action),
        ("Observation", "observation", step.observation),
    ):
        _section(out, title)
        if f"missing: {key}" in step.missing:
            out.append(f"missing: {key}\n", style=MISSING)
        elif not text.strip():
            out.append("(empty)\n", style="dim")
        else:
            out.append(cut(text, traj.path) + "\n")
    if step.state:  # after the rest: a state may hold the whole diff so far
        _section(out, "State after the step")
        for key, value in step.state.items():
            out.append(f"{key}: ", style="bold")
            out.append(cut(value, traj.path) + "\n", style="dim")
    out.rstrip()
    return out


def round_of(traj: Trajectory, number: int) -> Round | None:
    rounds = traj.pgs.rounds if traj.pgs is not None else []
    return next((r for r in rounds if r.number == number), None)


def issue_text(traj: Trajectory) -> Text:
    if traj.issue is None:
        return Text("missing: the issue text", style=MISSING)
    return Text(cut(traj.issue, traj.path))


def diff_text(out: Text, diff: Diff, where: Path | None, indent: str = "") -> None:
    """A diff, file by file, added lines green and removed ones red."""
    if diff.empty:
        out.append(f"{indent}(empty patch)\n", style="dim")
        return
    if diff.error or not diff.files:
        if diff.error:
            out.append(f"{indent}{diff.error}; the text as it is:\n", style=MISSING)
        out.append(cut(diff.text, where) + "\n")
        return
    shown = 0
    for file in diff.files:
        name = f"{file.old_path} → {file.path}" if file.old_path else file.path
        out.append(f"{indent}{name}", style="bold")
        out.append(f"  {file.status}, +{file.added} -{file.removed}\n", style="dim")
        for hunk in file.hunks:
            out.append(f"{indent}{hunk.header}\n", style="cyan")
            for line in hunk.lines:
                if shown > MAX_CHARS:
                    out.append(f"{indent}… the rest is not shown here\n", style=MISSING)
                    return
                mark = {"added": "+", "removed": "-", "context": " "}.get(line.kind, "")
                out.append(f"{indent}{mark}{line.text}\n", style=DIFF_STYLES[line.kind])
                shown += len(line.text) + 1


def result_text(traj: Trajectory) -> Text:
    """How the run ended: exit status, limits, usage, the final diff."""
    out = Text()
    out.append("Exit status: ", style="bold")
    out.append((traj.exit_status or "missing: info.exit_status") + "\n")
    if traj.error:
        out.append(f"Error: {cut(traj.error, traj.path)}\n", style="red")
    out.append("Limits hit: ", style="bold")
    out.append((", ".join(traj.limits_hit) or "none") + "\n")
    out.append("Limits in force: ", style="bold")
    out.append((", ".join(traj.limits) or "not recorded") + "\n")
    u = traj.usage
    out.append("Generator: ", style="bold")
    if u == Usage():
        out.append("missing: info.model_stats (tokens and cost)\n", style=MISSING)
    else:
        out.append(
            f"{u.tokens_sent if u.tokens_sent is not None else NONE} tokens sent, "
            f"{u.tokens_received if u.tokens_received is not None else NONE} received, "
            f"{u.api_calls if u.api_calls is not None else NONE} calls, {money(u.cost)}\n"
        )
    if traj.pgs is not None:
        t = traj.pgs.tester_usage
        out.append("Tester: ", style="bold")
        out.append(
            f"{t.tokens_sent or 0} tokens sent, {t.tokens_received or 0} received, "
            f"{money(t.cost)}\n"
        )
    out.append("Time: ", style="bold")
    out.append(seconds(traj.duration) + "\n")
    _section(out, "Final diff")
    if traj.submission is None:
        out.append("missing: info.submission (the final patch)\n", style=MISSING)
    else:
        diff_text(out, traj.submission, traj.path)
    out.rstrip()
    return out


def pgs_text(traj: Trajectory) -> Text:
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
    _missing(out, pgs.missing)

    kept = sum(p.status == "kept" for p in pgs.properties)
    dropped = sum(p.status == "dropped" for p in pgs.properties)
    _section(out, f"Properties ({kept} kept, {dropped} dropped)")
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
        _section(out, "Tester turns")
        for turn in pgs.tester_turns:
            steps = f", {len(turn.trajectory.steps)} steps" if turn.trajectory else ""
            why = f" ({turn.why})" if turn.why else ""
            out.append(f"{turn.key}{why}: {turn.kept} kept, {turn.dropped} dropped{steps}")
            out.append(f"  {', '.join(turn.files)}\n" if turn.files else "\n", style="dim")

    _section(out, f"Rounds ({len(pgs.rounds)})")
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
    _missing(out, rnd.missing, "  ")
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


def batch_text(batch: Batch) -> Text:
    out = Text()
    out.append(f"{batch.path}", style="bold")
    out.append(f"  {len(batch.rows)} instances")
    steps = sum(r.steps or 0 for r in batch.rows)
    cost = sum(r.cost or 0.0 for r in batch.rows)
    out.append(f" · {steps} steps · {money(cost)}")
    if batch.eval_report is not None:
        out.append(f" · resolved {batch.resolved} of {batch.graded} graded")
        out.append(f"  ({batch.eval_report})", style="dim")
    out.append("\nenter opens an instance (escape comes back, n/p go to the next/previous)\n")
    for note in batch.notes:
        out.append(note + "\n", style="dim")
    _missing(out, batch.missing)
    out.rstrip()
    return out


def row_text(row: BatchRow) -> Text:
    out = Text()
    if row.eval_error:
        out.append(f"{row.instance_id}: not graded: {row.eval_error}\n", style="red")
    _missing(out, [f"{row.instance_id}: {note}" for note in row.missing])
    out.rstrip()
    return out


# -- pgs select -----------------------------------------------------------------------------------


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
    _missing(out, view.missing)
    if len(view.instances) > 1:
        _section(out, "Instances")
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
