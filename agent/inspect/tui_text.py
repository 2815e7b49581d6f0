"""What each panel of ``pgs inspect --tui`` shows, as rich :class:`~rich.text.Text`.

Plain functions of the inspector's records (:mod:`agent.inspect.model`): the header, a step, the
issue, the result, a batch and a batch row, and the helpers the other panels' texts share; the PGS
record's panel is :mod:`agent.inspect.tui_pgs_text`, a ``pgs select`` output
:mod:`agent.inspect.tui_select_text` (``pgs inspect`` prints it). :mod:`agent.inspect.tui` puts
them on screen. A text longer than :data:`MAX_CHARS` is cut, with a note of how much was left out
and where the whole text is.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from agent.inspect.model import (
    BatchRow,
    BatchView,
    Diff,
    Round,
    StepView,
    TrajectoryView,
    UsageView,
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


def missing_notes(out: Text, notes: list[str], indent: str = "") -> None:
    for note in notes:
        out.append(f"{indent}{note}\n", style=MISSING)


def section(out: Text, title: str) -> None:
    out.append(f"\n{title}\n", style=HEADING)


def summary_text(traj: TrajectoryView, position: tuple[int, int] | None = None) -> Text:
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
    missing_notes(out, traj.missing)
    out.rstrip()
    return out


def step_text(traj: TrajectoryView, step: StepView) -> Text:
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
    missing_notes(out, step.missing)
    for title, key, text in (
        ("Thought", "thought", step.thought or step.response),
        ("Action", "action", step.action),
        ("Observation", "observation", step.observation),
    ):
        section(out, title)
        if f"missing: {key}" in step.missing:
            out.append(f"missing: {key}\n", style=MISSING)
        elif not text.strip():
            out.append("(empty)\n", style="dim")
        else:
            out.append(cut(text, traj.path) + "\n")
    if step.state:  # after the rest: a state may hold the whole diff so far
        section(out, "State after the step")
        for key, value in step.state.items():
            out.append(f"{key}: ", style="bold")
            out.append(cut(value, traj.path) + "\n", style="dim")
    out.rstrip()
    return out


def round_of(traj: TrajectoryView, number: int) -> Round | None:
    rounds = traj.pgs.rounds if traj.pgs is not None else []
    return next((r for r in rounds if r.number == number), None)


def issue_text(traj: TrajectoryView) -> Text:
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


def result_text(traj: TrajectoryView) -> Text:
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
    if u == UsageView():
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
    section(out, "Final diff")
    if traj.submission is None:
        out.append("missing: info.submission (the final patch)\n", style=MISSING)
    else:
        diff_text(out, traj.submission, traj.path)
    out.rstrip()
    return out


def batch_text(batch: BatchView) -> Text:
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
    missing_notes(out, batch.missing)
    out.rstrip()
    return out


def row_text(row: BatchRow) -> Text:
    out = Text()
    if row.eval_error:
        out.append(f"{row.instance_id}: not graded: {row.eval_error}\n", style="red")
    missing_notes(out, [f"{row.instance_id}: {note}" for note in row.missing])
    out.rstrip()
    return out
