"""``pgs inspect --tui``: the terminal inspector, driven by Textual's own test harness (a headless
app, real key presses) over real input:

- the bundled demo's trajectory, written by a real ``pgs demo`` (a Docker sandbox, the recorded
  session through the scripted server): steps, a failed round with its counterexample and
  feedback, the verdict;
- a hand-written ``.traj`` in SWE-agent's layout with keys missing (no ``replay_config``, no
  ``model_stats``, no PGS record, steps without ``observation`` or ``execution_time``);
- a batch folder of both run folders, ``preds.json`` and a ``pgs eval`` summary.

Each test asserts what the panels show a person. The async tests run with ``asyncio.run`` (no
pytest async plugin needed); screenshots are saved as SVG artefacts in the test's tmp dir.
``pgs inspect --tui`` itself in a real pseudo-terminal: test_inspect_tui_terminal.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static, TabbedContent

from agent.inspect.load import load_trajectory
from agent.inspect.tui import MAX_CHARS, InspectApp, TrajectoryScreen, load_target
from tests.support.inspect_tui import FOREIGN_ID, FOREIGN_ISSUE, swe_agent_traj

SIZE = (140, 45)
DEMO_ID = "stats__issue"


# --------------------------------------------------------------------------- input


@pytest.fixture(scope="module")
def demo_traj(demo_run: Path) -> Path:
    """The ``.traj`` a real ``pgs demo`` writes (its run folder holds the .patch and .pred; the
    suite's one run, tests/conftest.py: read, never written)."""
    return demo_run / f"{DEMO_ID}.traj"


@pytest.fixture
def batch(demo_traj: Path, foreign_traj: Path, tmp_path: Path) -> Path:
    """Two run folders (the demo's, the foreign one), preds.json and a `pgs eval` summary."""
    folder = tmp_path / "batch"
    shutil.copytree(demo_traj.parent, folder / DEMO_ID)
    shutil.copytree(foreign_traj.parent, folder / FOREIGN_ID)
    preds = [
        {"instance_id": iid, "model_name_or_path": "demo-replay", "model_patch": ""}
        for iid in (DEMO_ID, FOREIGN_ID)
    ]
    (folder / "preds.json").write_text(json.dumps(preds))
    summary = {
        "submitted_ids": [DEMO_ID, FOREIGN_ID],
        "resolved_ids": [DEMO_ID],
        "unresolved_ids": [FOREIGN_ID],
    }
    (folder / "demo-replay.tui.json").write_text(json.dumps(summary))
    return folder


# --------------------------------------------------------------------------- driving the app

Script = Callable[[InspectApp, Pilot[None]], Awaitable[None]]


def drive(path: Path, script: Script) -> None:
    """Run the app headless over PATH and play ``script`` on it."""

    async def play() -> None:
        app = InspectApp(load_target(path))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await script(app, pilot)

    asyncio.run(play())


def shown(app: InspectApp, widget_id: str) -> str:
    """The text a Static of the current screen shows."""
    content = app.screen.query_one(f"#{widget_id}", Static).content
    return content.plain if isinstance(content, Text) else str(content)


def active_panel(app: InspectApp) -> str | None:
    return app.screen.query_one("#panels", TabbedContent).active


def rows(app: InspectApp, table_id: str) -> list[list[str]]:
    table = app.screen.query_one(f"#{table_id}", DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def screenshot(app: InspectApp, where: Path, name: str) -> Path:
    saved = Path(app.save_screenshot(filename=f"{name}.svg", path=str(where)))
    assert saved.read_text().lstrip().startswith("<svg")
    return saved


# --------------------------------------------------------------------------- one trajectory


@pytest.mark.docker
def test_j_moves_to_the_next_step_and_the_step_panel_shows_its_observation(
    demo_traj: Path, tmp_path: Path
) -> None:
    traj = load_trajectory(demo_traj)
    first, third = traj.steps[0], traj.steps[2]

    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        assert DEMO_ID in shown(app, "summary")
        assert "exit: submitted" in shown(app, "summary")
        assert "median() is wrong for an even number of values" in shown(app, "summary")
        assert [r[0] for r in rows(app, "steps")] == [str(s.index) for s in traj.steps]
        assert rows(app, "steps")[0][3] == "str_replace_editor view /repo/stats.py"
        assert "Step 1 of 7" in shown(app, "step-text")
        assert first.observation.splitlines()[0] in shown(app, "step-text")

        await pilot.press("j", "j")
        await pilot.pause()
        step = shown(app, "step-text")
        assert step.startswith("Step 3 of 7 · str_replace_editor · exit 0")
        assert "The file /repo/stats.py has been edited." in step
        assert third.observation.strip() in step
        assert first.observation.splitlines()[0] not in step
        screenshot(app, tmp_path, "step-3")

        await pilot.press("k")
        await pilot.pause()
        assert shown(app, "step-text").startswith("Step 2 of 7")
        await pilot.press("down", "down", "down")  # the step list has the focus
        await pilot.pause()
        step = shown(app, "step-text")
        assert step.startswith("Step 5 of 7 · submit")
        assert "this submission was checked in round 1: failed" in step
        assert rows(app, "steps")[4][2] == "1: failed"

    drive(demo_traj, script)


@pytest.mark.docker
def test_the_pgs_panel_shows_properties_the_counterexample_the_feedback_and_the_verdict(
    demo_traj: Path, tmp_path: Path
) -> None:
    record = load_trajectory(demo_traj).pgs
    assert record is not None
    first = record.rounds[0]
    selection = first.selection
    assert selection is not None and first.feedback

    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        assert "verdict passed" in shown(app, "summary")
        await pilot.press("tab")
        assert active_panel(app) == "step" and app.screen.focused is not None
        assert app.screen.focused.id == "step-panel"
        await pilot.press("tab", "tab", "tab")
        await pilot.pause()
        assert active_panel(app) == "pgs"
        pgs = shown(app, "pgs-text")
        assert pgs.startswith("Verdict: passed: ")
        assert "Feedback mode: property-min" in pgs
        # The two first properties, and the one the fresh probe added after round 2.
        assert "Properties (3 kept, 0 dropped)" in pgs
        assert (
            "kept    regression .pgs/properties/test_median_bounds.py::test_median_within_bounds"
            in pgs
        )
        assert "kept    issue      .pgs/properties/test_median.py::test_median_of_even_count" in pgs
        assert "kept    regression .pgs/properties/test_median.py::test_median_of_odd_count" in pgs
        assert "rule: for an even number of values the median is the mean" in pgs
        assert "Round 1 (step 5) · verdict failed · " in pgs
        assert "▶ [issue] .pgs/properties/test_median.py::test_median_of_even_count" in pgs
        assert f"Counterexample: {selection.input} " in pgs
        assert "values=[" in (selection.input or "")
        assert f"why: {selection.why}" in pgs
        assert "Feedback sent:\n    Round 1 of 5. Property violated:" in pgs
        for line in (first.feedback or "").splitlines():
            assert f"    {line}" in pgs
        assert "Round 2 (step 7) · verdict passed · " in pgs
        assert "Change from the previous candidate:" in pgs
        screenshot(app, tmp_path, "pgs")

        await pilot.press("tab")
        assert app.screen.focused is not None and app.screen.focused.id == "steps"
        await pilot.press("shift+tab", "shift+tab")
        assert active_panel(app) == "result"
        result = shown(app, "result-text")
        assert "Exit status: submitted" in result
        assert "Limits in force: 100 steps, 3600 s, $3.00" in result
        assert "+    middle = len(ordered) // 2" in result
        await pilot.press("shift+tab")
        assert active_panel(app) == "issue"
        assert "`median([1, 2, 3, 4])` returns `3`" in shown(app, "issue-text")

    drive(demo_traj, script)


@pytest.mark.docker
def test_slash_filters_the_steps_and_escape_brings_them_back(demo_traj: Path) -> None:
    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"submit")
        await pilot.pause()
        assert [r[0] for r in rows(app, "steps")] == ["5", "7"]
        assert shown(app, "step-text").startswith("Step 5 of 7")
        await pilot.press("q")  # typed into the filter, not quitting
        await pilot.pause()
        assert app.is_running and rows(app, "steps") == []
        assert "no step holds 'submitq'" in shown(app, "step-text")
        await pilot.press("backspace", "enter", "j")
        await pilot.pause()
        assert shown(app, "step-text").startswith("Step 7 of 7")
        await pilot.press("escape")
        await pilot.pause()
        assert len(rows(app, "steps")) == 7
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running

    drive(demo_traj, script)


def test_a_foreign_trajectory_says_what_it_lacks(foreign_traj: Path, tmp_path: Path) -> None:
    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        summary = shown(app, "summary")
        assert f"{FOREIGN_ID}  written by SWE-agent" in summary
        assert f"issue: {FOREIGN_ISSUE}." in summary
        assert "missing: replay_config (the run's configuration)" in summary
        assert "missing: info.model_stats (tokens and cost)" in summary
        assert "missing: execution_time (in 2 of 3 steps)" in summary
        assert "missing: observation (in 1 of 3 steps)" in summary
        assert "Found 1 matches" in shown(app, "step-text")
        assert "open_file: n/a" in shown(app, "step-text")
        await pilot.press("j", "j")
        await pilot.pause()
        step = shown(app, "step-text")
        assert step.startswith("Step 3 of 3 · exit - · ")
        assert "Observation\nmissing: observation" in step
        assert "Action\nsubmit" in step
        await pilot.press("tab", "tab", "tab", "tab")
        assert active_panel(app) == "pgs"
        assert shown(app, "pgs-text") == (
            "missing: pgs (the Tester's properties, rounds and verdict)"
        )
        await pilot.press("shift+tab")
        result = shown(app, "result-text")
        assert "Limits in force: not recorded" in result
        assert "Generator: missing: info.model_stats (tokens and cost)" in result
        assert "+    return max(len(self.parts) - 1, 0)" in result
        screenshot(app, tmp_path, "foreign")
        await pilot.press("n", "escape")  # no batch: neither does anything
        await pilot.pause()
        assert isinstance(app.screen, TrajectoryScreen) and app.is_running

    drive(foreign_traj, script)


def test_a_long_observation_is_cut_with_a_note_of_where_the_rest_is(tmp_path: Path) -> None:
    data = swe_agent_traj()
    data["trajectory"][0]["observation"] = "".join(f"line {i}\n" for i in range(100_000))
    path = tmp_path / "long.traj"
    path.write_text(json.dumps(data))
    whole = len(data["trajectory"][0]["observation"])

    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        step = shown(app, "step-text")
        assert "line 0\nline 1\n" in step and "line 99999" not in step
        assert f"… {whole - MAX_CHARS:,} more characters not shown here (all of it: {path})" in step

    drive(path, script)


# --------------------------------------------------------------------------- a batch


@pytest.mark.docker
def test_a_batch_opens_instances_with_enter_and_moves_between_them_with_n_and_p(
    batch: Path, tmp_path: Path
) -> None:
    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        assert "2 instances" in shown(app, "batch-summary")
        assert "resolved 1 of 2 graded" in shown(app, "batch-summary")
        table = rows(app, "instances")
        assert [r[0] for r in table] == [FOREIGN_ID, DEMO_ID]
        assert table[0][1:3] == ["submitted", "3"] and table[0][5:] == ["-", "unresolved"]
        assert table[1][1:3] == ["submitted", "7"] and table[1][5:] == ["passed", "resolved"]
        screenshot(app, tmp_path, "batch")

        await pilot.press("down", "enter")  # the second row
        await pilot.pause()
        assert isinstance(app.screen, TrajectoryScreen)
        assert shown(app, "summary").startswith(f"{DEMO_ID}  (instance 2 of 2)")
        assert "issue: median() is wrong for an even number of values" in shown(app, "summary")
        assert "median of an even number of values is the mean" in shown(app, "issue-text")
        screenshot(app, tmp_path, "batch-instance-2")

        await pilot.press("p")
        await pilot.pause()
        assert shown(app, "summary").startswith(f"{FOREIGN_ID}  (instance 1 of 2)")
        assert "missing: pgs" in shown(app, "summary")
        await pilot.press("n")
        await pilot.pause()
        assert shown(app, "summary").startswith(f"{DEMO_ID}  (instance 2 of 2)")
        await pilot.press("n")  # no third: it stays
        await pilot.pause()
        assert shown(app, "summary").startswith(f"{DEMO_ID}  (instance 2 of 2)")

        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.query_one("#instances", DataTable).cursor_row == 1
        await pilot.press("k", "enter")
        await pilot.pause()
        assert shown(app, "summary").startswith(f"{FOREIGN_ID}  (instance 1 of 2)")
        await pilot.press("n")
        await pilot.pause()
        assert shown(app, "summary").startswith(f"{DEMO_ID}  (instance 2 of 2)")
        assert len(app.screen_stack) == 2  # the batch and one instance: n replaced it

    drive(batch, script)


def test_a_batch_row_without_a_trajectory_opens_to_what_is_missing(
    foreign_traj: Path, tmp_path: Path
) -> None:
    folder = foreign_traj.parent.parent
    preds = [{"instance_id": iid, "model_patch": ""} for iid in (FOREIGN_ID, "lost__run-1")]
    (folder / "preds.json").write_text(json.dumps(preds))

    async def script(app: InspectApp, pilot: Pilot[None]) -> None:
        assert "missing: an evaluation report" in shown(app, "batch-summary")
        await pilot.press("j")
        await pilot.pause()
        notes = shown(app, "row-notes")
        assert "lost__run-1: missing: the trajectory (lost__run-1/lost__run-1.traj)" in notes
        await pilot.press("enter")
        await pilot.pause()
        assert "missing: the trajectory (lost__run-1/lost__run-1.traj)" in shown(app, "summary")
        assert shown(app, "step-text") == "missing: the trajectory (lost__run-1/lost__run-1.traj)"

    drive(folder, script)
