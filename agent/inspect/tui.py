"""``pgs inspect PATH --tui``: the inspector in a terminal, for runs on a remote machine.

The same records as the HTML page (:mod:`agent.inspect.load`; nothing here reads a file), in a
Textual app:

- one trajectory (:class:`TrajectoryScreen`): a header (the instance, exit status, steps, cost,
  verdict, the issue's first line, and every part the file lacks), the step list (number, the
  action's first line, exit code, the round a submission started) and four panels: the selected
  step (thought, action, observation), the issue, the result (exit status, limits hit and in
  force, tokens and cost, the final diff) and PGS (each property's kind, kept or dropped with the
  reason; each round's failures, the chosen counterexample and why, the feedback as sent, the
  verdict);
- a batch (:class:`BatchScreen`): the table of instances (exit status, steps, cost, time,
  verdict, resolved); Enter opens one, Escape comes back.

Keys (the footer shows them): j/k (and up/down in the step list) move between steps, n/p to the
next or previous instance of a batch, tab/shift+tab between panels (up/down/page keys scroll
the focused one), / filters the steps by a text (in thought, action or observation), Escape
clears the filter or goes back to the batch, q or Ctrl-C quits. SIGTERM and SIGHUP end it as
they end any pgs command (exit code 130), the terminal given back as it was.

A text longer than :data:`MAX_CHARS` is cut, with a note of how much was left out and where the
whole text is. :func:`run_tui` raises :class:`~agent.inspect.load.InspectError` for a PATH that
cannot be inspected, or when there is no terminal to draw on.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static, TabbedContent, TabPane

from agent.inspect.load import InspectError, load_batch, load_trajectory, resolve
from agent.inspect.model import Batch, BatchRow, Diff, Round, Step, Trajectory, Usage

#: Characters of one text (an observation, a diff, a feedback message) drawn at most.
MAX_CHARS = 100_000
#: The panels, in the order tab visits them ("steps" is the step list).
PANELS = ("steps", "step", "issue", "result", "pgs")
NONE = "-"
#: Signals that end the app as they end any pgs command.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

HEADING = "bold underline"
MISSING = "yellow"
VERDICT_STYLES = {"passed": "bold green", "failed": "bold red", "tests-only": "bold yellow"}
STATUS_STYLES = {"kept": "green", "dropped": "red", "gone": "dim"}
DIFF_STYLES = {"added": "green", "removed": "red", "context": "", "note": "dim italic"}


def run_tui(path: Path, *, eval_report: Path | None = None) -> int:
    """Load PATH (a ``.traj``, a run folder or a batch folder) and browse it until q."""
    target = load_target(path, eval_report=eval_report)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise InspectError(
            "--tui needs a terminal (stdin and stdout are not one here): run it in a terminal, "
            "or leave out --tui to write the HTML page"
        )
    app = InspectApp(target, stop_signals=True)
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        app.run()
    finally:
        for sig, handler in handlers.items():  # the event loop's end reset them to the default
            if handler is not None:
                signal.signal(sig, handler)
    if app.stopped_by is not None:
        # Raised again for the handler in force before: under `pgs`, "interrupted by SIGTERM"
        # and exit code 130, as for any command.
        signal.raise_signal(app.stopped_by)
    return 0


def load_target(path: Path, *, eval_report: Path | None = None) -> Trajectory | Batch:
    """What PATH holds: one trajectory, or a batch's rows (each trajectory read when opened)."""
    target = resolve(path)
    if target.is_dir():
        return load_batch(target, eval_report=eval_report)
    if eval_report is not None:
        raise InspectError("--eval goes with a batch folder, not with one trajectory")
    return load_trajectory(target)


def open_row(row: BatchRow) -> Trajectory:
    """A batch row's trajectory; a row without a readable one becomes a record that says so."""
    if row.traj_path is None:
        missing = row.missing or [f"missing: the trajectory of {row.instance_id}"]
        return Trajectory(path=None, instance_id=row.instance_id, missing=list(missing))
    try:
        traj = load_trajectory(row.traj_path)
    except InspectError as e:
        missing = [f"missing: a readable trajectory ({e})"]
        return Trajectory(path=row.traj_path, instance_id=row.instance_id, missing=missing)
    traj.instance_id = row.instance_id  # the batch's name for it, as in the table
    return traj


# -- texts: what each panel shows ------------------------------------------------------------


def _cut(text: str, where: Path | None) -> str:
    if len(text) <= MAX_CHARS:
        return text
    rest = len(text) - MAX_CHARS
    source = where if where is not None else "the file"
    return f"{text[:MAX_CHARS]}\n… {rest:,} more characters not shown here (all of it: {source})"


def _money(cost: float | None) -> str:
    if cost is None:
        return NONE
    return f"${cost:.4f}" if 0 < cost < 0.01 else f"${cost:.2f}"


def _seconds(duration: float | None) -> str:
    if duration is None:
        return NONE
    return f"{duration:.0f} s" if duration >= 10 else f"{duration:.1f} s"


def _first_line(text: str, width: int = 60) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _verdict(verdict: str | None) -> Text:
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
    out.append(f" · {len(traj.steps)} steps · cost {_money(traj.total_cost)}")
    out.append(f" · time {_seconds(traj.duration)}")
    if traj.model_name:
        out.append(f" · model {traj.model_name}")
    if traj.pgs is not None:
        out.append(" · verdict ")
        out.append_text(_verdict(traj.pgs.verdict))
    if traj.limits_hit:
        out.append(f" · limit hit: {', '.join(traj.limits_hit)}", style="bold red")
    if traj.error:
        out.append(f"\nerror: {_first_line(traj.error, 200)}", style="bold red")
    if traj.issue:
        out.append(f"\nissue: {_first_line(traj.issue, 200)}")
    out.append("\n")
    _missing(out, traj.missing)
    out.rstrip()
    return out


def step_text(traj: Trajectory, step: Step) -> Text:
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
            f"{u.tokens_sent or 0} tokens sent, {u.tokens_received or 0} received, {_money(u.cost)}"
        )
    else:
        facts.append(f"~{step.estimated_tokens} tokens (estimated)")
    out.append(" · " + " · ".join(facts) + "\n")
    if step.round is not None:
        rnd = _round(traj, step.round)
        out.append(f"this submission was checked in round {step.round}: ")
        out.append_text(_verdict(rnd.verdict if rnd else None))
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
            out.append(_cut(text, traj.path) + "\n")
    if step.state:  # after the rest: a state may hold the whole diff so far
        _section(out, "State after the step")
        for key, value in step.state.items():
            out.append(f"{key}: ", style="bold")
            out.append(_cut(value, traj.path) + "\n", style="dim")
    out.rstrip()
    return out


def _round(traj: Trajectory, number: int) -> Round | None:
    rounds = traj.pgs.rounds if traj.pgs is not None else []
    return next((r for r in rounds if r.number == number), None)


def issue_text(traj: Trajectory) -> Text:
    if traj.issue is None:
        return Text("missing: the issue text", style=MISSING)
    return Text(_cut(traj.issue, traj.path))


def diff_text(out: Text, diff: Diff, where: Path | None, indent: str = "") -> None:
    """A diff, file by file, added lines green and removed ones red."""
    if diff.empty:
        out.append(f"{indent}(empty patch)\n", style="dim")
        return
    if diff.error or not diff.files:
        if diff.error:
            out.append(f"{indent}{diff.error}; the text as it is:\n", style=MISSING)
        out.append(_cut(diff.text, where) + "\n")
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
        out.append(f"Error: {_cut(traj.error, traj.path)}\n", style="red")
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
            f"{u.api_calls if u.api_calls is not None else NONE} calls, {_money(u.cost)}\n"
        )
    if traj.pgs is not None:
        t = traj.pgs.tester_usage
        out.append("Tester: ", style="bold")
        out.append(
            f"{t.tokens_sent or 0} tokens sent, {t.tokens_received or 0} received, "
            f"{_money(t.cost)}\n"
        )
    out.append("Time: ", style="bold")
    out.append(_seconds(traj.duration) + "\n")
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
    out.append_text(_verdict(pgs.verdict))
    if pgs.verdict_reason:
        out.append(f": {pgs.verdict_reason}")
    out.append(f"\nFeedback mode: {pgs.mode or NONE}\n")
    if pgs.tester_error:
        out.append(f"Tester error: {pgs.tester_error}\n", style="red")
    _missing(out, pgs.missing)

    kept = sum(p.status == "kept" for p in pgs.properties)
    dropped = sum(p.status == "dropped" for p in pgs.properties)
    _section(out, f"Properties ({kept} kept, {dropped} dropped)")
    if pgs.validation_note:
        out.append(pgs.validation_note + "\n", style="dim")
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
    out.append_text(_verdict(rnd.verdict))
    out.append(f" · {rnd.passed} passed, {len(rnd.failures)} failed\n")
    _missing(out, rnd.missing, "  ")
    if rnd.note:
        out.append(f"  {rnd.note}\n", style="dim")
    for failure in rnd.failures:
        chosen = failure.chosen
        out.append("  ▶ " if chosen else "    ", style="bold")
        out.append(f"[{failure.kind}] {failure.nodeid}: {failure.category} ({failure.outcome})")
        out.append("  chosen\n" if chosen else "\n", style="bold")
        if failure.rule:
            out.append(f"      rule: {failure.rule}\n")
        for example in failure.inputs[:3]:
            out.append(f"      input: {example.example or NONE}", style="dim")
            got = example.exception or example.returned
            out.append(f" → {_first_line(got, 120)}\n" if got else "\n", style="dim")
    for error in rnd.errors:
        out.append(f"  pytest error: {_first_line(error, 200)}\n", style="red")
    if rnd.cut:
        out.append(f"  cut by the time budget: {rnd.cut}\n", style=MISSING)
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
        for line in _cut(rnd.feedback, where).split("\n"):
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
    out.append(f" · {steps} steps · {_money(cost)}")
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


# -- screens ---------------------------------------------------------------------------------


class TrajectoryScreen(Screen[None]):
    """One trajectory: header, step list, and the step, issue, result and PGS panels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "step(1)", "next step"),
        Binding("k", "step(-1)", "previous step"),
        Binding("n", "instance(1)", "next instance"),
        Binding("p", "instance(-1)", "previous instance"),
        Binding("tab", "panel(1)", "next panel"),
        Binding("shift+tab", "panel(-1)", "previous panel", show=False),
        Binding("slash", "search", "filter steps"),
        Binding("escape", "back", "back"),
    ]

    def __init__(self, traj: Trajectory, position: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.traj = traj
        #: (index, count) within a batch; None for a trajectory on its own.
        self.position = position
        self.by_index = {step.index: step for step in traj.steps}
        #: The step numbers in the list, in its order (a filter leaves some out).
        self.listed: list[int] = []
        self.shown: int | None = None

    def compose(self) -> ComposeResult:
        yield Static(summary_text(self.traj, self.position), id="summary")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield Input(placeholder="filter steps (enter: keep, escape: clear)", id="search")
                yield DataTable(id="steps", cursor_type="row", zebra_stripes=True)
            with TabbedContent(id="panels", initial="step"):
                for name, title, text in (
                    ("step", "Step", Text()),
                    ("issue", "Issue", issue_text(self.traj)),
                    ("result", "Result", result_text(self.traj)),
                    ("pgs", "PGS", pgs_text(self.traj)),
                ):
                    with TabPane(title, id=name), VerticalScroll(id=f"{name}-panel"):
                        yield Static(text, id=f"{name}-text")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#search", Input).display = False
        table = self.query_one("#steps", DataTable)
        table.add_columns("#", "exit", "round", "action")
        self.fill("")
        table.focus()

    def fill(self, query: str) -> None:
        """The step list, only the steps whose texts hold ``query`` (any case)."""
        table = self.query_one("#steps", DataTable)
        table.clear()
        self.listed = []
        needle = query.lower()
        for step in self.traj.steps:
            texts = (step.thought, step.action, step.observation, step.response)
            if needle and not any(needle in t.lower() for t in texts):
                continue
            exit_code = NONE if step.exit_code is None else str(step.exit_code)
            rnd = _round(self.traj, step.round) if step.round is not None else None
            verdict = f"{step.round}: {rnd.verdict or NONE}" if rnd else ""
            action = _first_line(step.action) or _first_line(step.thought) or "(no action)"
            table.add_row(str(step.index), exit_code, verdict, action, key=str(step.index))
            self.listed.append(step.index)
        if self.listed:
            table.move_cursor(row=0)
            self.show_step(self.listed[0])
        else:
            self.shown = None
            if not self.traj.steps:
                said = [m for m in self.traj.missing if "trajectory" in m]
                text = Text(said[0] if said else "no steps", style=MISSING)
            else:
                text = Text(f"no step holds {query!r} (escape clears the filter)", style=MISSING)
            self.query_one("#step-text", Static).update(text)

    def show_step(self, index: int) -> None:
        if index == self.shown or index not in self.by_index:
            return
        self.shown = index
        self.query_one("#step-text", Static).update(step_text(self.traj, self.by_index[index]))
        self.query_one("#step-panel", VerticalScroll).scroll_home(animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "steps" and 0 <= event.cursor_row < len(self.listed):
            self.show_step(self.listed[event.cursor_row])

    def on_input_changed(self, event: Input.Changed) -> None:
        self.fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.display = False
        self.query_one("#steps", DataTable).focus()

    def action_step(self, delta: int) -> None:
        table = self.query_one("#steps", DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)))

    def action_instance(self, delta: int) -> None:
        app = self.app
        if isinstance(app, InspectApp) and self.position is not None:
            app.open_instance(self.position[0] + delta)

    def action_panel(self, delta: int) -> None:
        focused = self.focused
        current = "steps"
        for name in PANELS[1:]:
            panel = self.query_one(f"#{name}-panel", VerticalScroll)
            if focused is not None and (focused is panel or panel in focused.ancestors):
                current = name
        target = PANELS[(PANELS.index(current) + delta) % len(PANELS)]
        if target == "steps":
            self.query_one("#steps", DataTable).focus()
        else:
            self.query_one("#panels", TabbedContent).active = target
            self.query_one(f"#{target}-panel", VerticalScroll).focus()

    def action_search(self) -> None:
        search = self.query_one("#search", Input)
        search.display = True
        search.focus()

    def action_back(self) -> None:
        search = self.query_one("#search", Input)
        if search.display or search.value:
            search.value = ""  # Input.Changed refills the list
            search.display = False
            self.query_one("#steps", DataTable).focus()
        elif self.position is not None:
            self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "instance":
            return self.position is not None
        return True


class BatchScreen(Screen[None]):
    """The instances of a batch; Enter opens the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "move(1)", "down", show=False),
        Binding("k", "move(-1)", "up", show=False),
        Binding("enter", "open", "open instance"),
    ]
    COLUMNS = ("instance", "exit status", "steps", "cost", "time", "verdict", "resolved")

    def __init__(self, batch: Batch) -> None:
        super().__init__()
        self.record = batch

    def compose(self) -> ComposeResult:
        yield Static(batch_text(self.record), id="batch-summary")
        yield DataTable(id="instances", cursor_type="row", zebra_stripes=True)
        yield Static(id="row-notes")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#instances", DataTable)
        table.add_columns(*self.COLUMNS)
        for row in self.record.rows:
            table.add_row(
                row.instance_id,
                row.exit_status or NONE,
                NONE if row.steps is None else str(row.steps),
                _money(row.cost),
                _seconds(row.duration),
                _verdict(row.verdict),
                row.resolved or NONE,
                key=row.instance_id,
            )
        table.focus()

    def select(self, index: int) -> None:
        self.query_one("#instances", DataTable).move_cursor(row=index)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self.record.rows[event.cursor_row]
        self.query_one("#row-notes", Static).update(row_text(row))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_move(self, delta: int) -> None:
        table = self.query_one("#instances", DataTable)
        table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)))

    def action_open(self) -> None:
        app = self.app
        if isinstance(app, InspectApp):
            app.open_instance(self.query_one("#instances", DataTable).cursor_row)


class InspectApp(App[None]):
    """``pgs inspect --tui``: a trajectory, or a batch whose instances open one at a time."""

    TITLE = "pgs inspect"
    CSS = """
    #summary { height: auto; max-height: 12; padding: 0 1; background: $boost; }
    #body { height: 1fr; }
    #left { width: 42%; min-width: 30; }
    #search { margin: 0; }
    #steps { height: 1fr; }
    #panels { width: 1fr; }
    TabPane { padding: 0; }
    VerticalScroll { padding: 0 1; }
    VerticalScroll:focus { background: $boost; }
    #batch-summary { height: auto; max-height: 10; padding: 0 1; background: $boost; }
    #instances { height: 1fr; }
    #row-notes { height: auto; max-height: 6; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(self, target: Trajectory | Batch, *, stop_signals: bool = False) -> None:
        """``stop_signals``: SIGINT, SIGTERM and SIGHUP end the app (see :meth:`on_mount`)."""
        super().__init__()
        self.target = target
        self.stop_signals = stop_signals
        #: The signal that ended the app, if one did.
        self.stopped_by: signal.Signals | None = None
        where = target.path if isinstance(target, Batch) else target.path or target.instance_id
        self.sub_title = str(where)

    def on_mount(self) -> None:
        if not self.stop_signals:
            return
        # A KeyboardInterrupt raised by a signal handler inside Textual's event loop ends in
        # one of its tasks (a traceback on the terminal); the loop's own handlers exit the app
        # cleanly instead. A signal the parent ignores (nohup's SIGHUP) stays ignored.
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                loop.add_signal_handler(sig, self.stop, sig)

    def stop(self, sig: signal.Signals) -> None:
        self.stopped_by = sig
        self.exit()

    def get_default_screen(self) -> Screen[None]:
        if isinstance(self.target, Batch):
            return BatchScreen(self.target)
        return TrajectoryScreen(self.target)

    def open_instance(self, index: int) -> None:
        """Show the batch's ``index``-th instance, in place of the one shown if there is one."""
        batch = self.target
        if not isinstance(batch, Batch):
            return
        if not 0 <= index < len(batch.rows):
            self.notify("no more instances that way", timeout=2)
            return
        self.batch_screen.select(index)
        screen = TrajectoryScreen(open_row(batch.rows[index]), (index, len(batch.rows)))
        if isinstance(self.screen, TrajectoryScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    @property
    def batch_screen(self) -> BatchScreen:
        (found,) = (s for s in self.screen_stack if isinstance(s, BatchScreen))
        return found
