"""``pgs report`` fits the terminal: at 80, 100 and 140 columns (COLUMNS, or a pseudo-terminal's
size) every line fits, nothing is cut to ``…`` and every figure is there in full; ``--wide``
prints one column per figure whatever the width.

The run folders are the bundled trajectories (``tests/data/*.traj``, each a one-instance batch
folder) and a three-instance batch folder of hand-made trajectories with costs of several
digits and a ``pgs eval`` summary, through the real command line (in this process; in a
pseudo-terminal, a process of its own).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.cli.test_live_view import in_terminal
from tests.pgs.test_compare import make_run, traj, write_eval
from tests.support.inprocess import run_pgs
from tests.support.textutil import pgs_env

Capture = pytest.CaptureFixture[str]
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    folders = []
    for path in sorted(DATA.glob("*.traj")):
        folder = tmp_path / f"run-{path.stem}"
        (folder / path.stem).mkdir(parents=True)
        shutil.copy(path, folder / path.stem / path.name)
        pred = {"instance_id": path.stem, "model_name_or_path": "m", "model_patch": ""}
        (folder / "preds.json").write_text(json.dumps({path.stem: pred}))
        folders.append(folder)
    io = make_run(
        tmp_path / "io",
        {
            "a-1": traj("io", "passed", ["FAILED test_a - assert 1 == 2"], 12.3456, 0.5),
            "a-2": traj("io", "tests-changed", ["x", "y", "z"], 2.0, 0.25),
            "a-3": traj("io", "failed", [], 0.5),
        },
    )
    write_eval(io, resolved=["a-1"], submitted=["a-1", "a-2"])  # a-3 not graded
    return [*folders, io]


def report(
    capfd: Capture, runs: list[Path], *flags: str, columns: int | None
) -> tuple[str, dict[str, object]]:
    env = {} if columns is None else {"COLUMNS": str(columns)}
    unset = ["COLUMNS"] if columns is None else []
    argv = ["report", *map(str, runs)]
    done = run_pgs([*argv, *flags], capfd, env=env, unset=unset)
    assert done.returncode == 0, done.stderr
    data = run_pgs([*argv, "--json"], capfd, env=env, unset=unset)
    assert data.returncode == 0, data.stderr
    return done.stdout, json.loads(data.stdout)


def table_rows(out: str) -> list[list[str]]:
    """The cells of each body row of the narrow table (rows between lines), each cell's
    wrapped lines joined with spaces."""
    rows: list[list[str]] = []
    current: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("│"):
            parts = [part.strip() for part in line.strip("│").split("│")]
            current = current or [[] for _ in parts]
            for cell, part in zip(current, parts, strict=True):
                cell.append(part)
        elif current:
            rows.append([" ".join(filter(None, cell)) for cell in current])
            current = []
    return rows


def costs(data: dict[str, object]) -> list[str]:
    """Every cost figure of the comparison, as the table prints it."""
    rows = data["rows"]
    assert isinstance(rows, list) and len(rows) == 3  # property-min, io, and the foreign run
    return [f"${row['cost'][k]:.4f}" for row in rows for k in ("total", "mean")]


@pytest.mark.parametrize("columns", [80, 100, 140])
def test_the_report_fits_the_width_with_every_figure_in_full(
    runs: list[Path], columns: int, capfd: Capture
) -> None:
    out, data = report(capfd, runs, columns=columns)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns, out
    assert "…" not in out, out
    # 12.3456 + 0.5 + 2.0 + 0.25 + 0.5 (the Generator's and the Tester's), over 3 instances.
    assert "$15.5956" in out and "$5.1985" in out, out
    for cost in costs(data):
        assert re.search(rf"(?<![\d.]){re.escape(cost)}(?!\d)", out), (cost, out)
    text = " ".join(out.split())
    for header in ("setting", "resolved", "verdicts", "rounds", "feedback", "tokens", "cost"):
        assert header in text
    rows = {row[0].split()[0]: row for row in table_rows(out)}
    assert rows["io"] == [
        "io (Self-Edit) shrink=on",
        "1 of 3 (2 graded)",
        "passed=1 tests-changed=1 failed=1",
        "1.33 / 4",
        "3.7 / 11",
        "$15.5956 / $5.1985",
    ], out
    assert rows["property-min"][0] == (
        "property-min (PGS) rounds=5 filter=on probes=1 shrink=on"
    ), out
    assert rows["property-min"][1:3] == ["- of 2", "passed=2"]
    assert rows["unknown"][1:] == [
        "- of 1",
        "unchecked=1",
        "0.00 / 0",
        "0.0 / 0",
        "$0.0000 / $0.0000",
    ]


def test_wide_prints_one_column_per_figure_and_a_pipe_is_never_wrapped(
    runs: list[Path], capfd: Capture
) -> None:
    wide, _ = report(capfd, runs, "--wide", columns=100)
    piped, _ = report(capfd, runs, columns=None)  # no terminal, no COLUMNS: a log file
    for out in (wide, piped):
        header = next(line for line in out.splitlines() if "tests-changed" in line)
        for column in ("mode", "max rounds", "instances", "unchecked", "cost (total / mean)"):
            assert column in header, out
        assert max(len(line) for line in out.splitlines()) > 140 and "…" not in out
        assert "$15.5956 / $5.1985" in out


def test_in_a_terminal_of_100_columns_the_report_fits(runs: list[Path]) -> None:
    env = pgs_env(TERM="xterm-256color")
    for name in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR"):
        env.pop(name, None)
    code, screen = in_terminal(["report", *map(str, runs)], env, columns=100)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen).replace("\r", "")
    assert code == 0, plain
    table = [line for line in plain.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 100, plain
    assert "…" not in plain and "$15.5956 /" in plain
