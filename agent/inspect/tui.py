"""``pgs inspect PATH --tui``: the inspector in a terminal, for runs on a remote machine.

The same records as the HTML page (:mod:`agent.inspect.load`; nothing here reads a file), in a
Textual app; what each panel shows is drawn by :mod:`agent.inspect.tui_text` (the PGS panel by
:mod:`agent.inspect.tui_pgs_text`):

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
whole text is. :func:`run_tui` raises :class:`~agent.errors.InspectError` for a PATH that
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

from agent.errors import STOP_SIGNALS
from agent.inspect.batch_view import load_batch
from agent.inspect.load import InspectError, load_trajectory, resolve
from agent.inspect.model import BatchRow, BatchView, TrajectoryView
from agent.inspect.tui_pgs_text import pgs_text
from agent.inspect.tui_text import (
    MAX_CHARS,
    MISSING,
    NONE,
    batch_text,
    first_line,
    issue_text,
    money,
    result_text,
    round_of,
    row_text,
    seconds,
    step_text,
    summary_text,
    verdict_text,
)
from agent.record.trajectory import RunRecord

__all__ = ["MAX_CHARS", "BatchScreen", "InspectApp", "TrajectoryScreen", "load_target", "run_tui"]

#: The panels, in the order tab visits them ("steps" is the step list).
PANELS = ("steps", "step", "issue", "result", "pgs")


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


def load_target(path: Path, *, eval_report: Path | None = None) -> TrajectoryView | BatchView:
    """What PATH holds: one trajectory, or a batch's rows (each trajectory read when opened)."""
    target = resolve(path)
    if target.is_dir():
        return load_batch(target, eval_report=eval_report)
    if eval_report is not None:
        raise InspectError("--eval goes with a batch folder, not with one trajectory")
    return load_trajectory(target)


def open_row(row: BatchRow) -> TrajectoryView:
    """A batch row's trajectory; a row without a readable one becomes a record that says so."""
    if row.traj_path is None:
        missing = row.missing or [f"missing: the trajectory of {row.instance_id}"]
        empty = RunRecord(writer="unknown", missing=list(missing))
        return TrajectoryView(empty, path=None, instance_id=row.instance_id, missing=list(missing))
    try:
        traj = load_trajectory(row.traj_path)
    except InspectError as e:
        missing = [f"missing: a readable trajectory ({e})"]
        empty = RunRecord(writer="unknown", missing=list(missing))
        return TrajectoryView(
            empty, path=row.traj_path, instance_id=row.instance_id, missing=missing
        )
    traj.instance_id = row.instance_id  # the batch's name for it, as in the table
    return traj


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

    def __init__(self, traj: TrajectoryView, position: tuple[int, int] | None = None) -> None:
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
            rnd = round_of(self.traj, step.round) if step.round is not None else None
            verdict = f"{step.round}: {rnd.verdict or NONE}" if rnd else ""
            action = first_line(step.action) or first_line(step.thought) or "(no action)"
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

    def __init__(self, batch: BatchView) -> None:
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
                money(row.cost),
                seconds(row.duration),
                verdict_text(row.verdict),
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

    def __init__(self, target: TrajectoryView | BatchView, *, stop_signals: bool = False) -> None:
        """``stop_signals``: SIGINT, SIGTERM and SIGHUP end the app (see :meth:`on_mount`)."""
        super().__init__()
        self.target = target
        self.stop_signals = stop_signals
        #: The signal that ended the app, if one did.
        self.stopped_by: signal.Signals | None = None
        where = target.path if isinstance(target, BatchView) else target.path or target.instance_id
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
        if isinstance(self.target, BatchView):
            return BatchScreen(self.target)
        return TrajectoryScreen(self.target)

    def open_instance(self, index: int) -> None:
        """Show the batch's ``index``-th instance, in place of the one shown if there is one."""
        batch = self.target
        if not isinstance(batch, BatchView):
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
