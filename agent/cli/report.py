"""``pgs report``: Self-Edit and PGS side by side, one row per ablation setting (feedback mode,
rounds, filter, fresh probes, shrinking; :mod:`agent.pgs.compare`)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from agent.errors import USER_ERROR, ReportError, print_error
from agent.pgs.compare import LABELS, VERDICTS, compare

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "report",
        help="compare runs side by side per ablation setting (Self-Edit vs PGS)",
        description="Compare `pgs batch` runs per ablation setting, as the PGS paper's Table 7 "
        "does. A row is one full setting: the feedback mode (none, io = Self-Edit, io-min, "
        "property, property-min = PGS), the most rounds, the soundness filter, the fresh "
        "probes and Hypothesis's shrinking ('-' where the mode does not use it); its columns: the "
        "instances, how many the evaluation resolved, the Tester's verdicts, the feedback "
        "rounds and their tokens, and the cost (Generator + Tester). Each RUN_DIR is the "
        "--output-dir of a `pgs batch` (preds.json and <id>/<id>.traj); the resolved count "
        "comes from a `pgs eval` summary inside it, e.g. after `pgs eval --predictions "
        "RUN_DIR/preds.json --report-dir RUN_DIR/eval` (without one: '-'); with `pgs eval "
        "--attempts`, also how often the chosen patch resolves where an attempt does.",
        epilog="example: pgs batch ... --feedback io --output-dir runs/io; pgs batch ... "
        "--feedback property-min --output-dir runs/pgs; pgs report runs/io runs/pgs",
    )
    parser.add_argument(
        "run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="a `pgs batch` output folder"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as JSON (rows, runs, and one entry per instance)",
    )
    add_wide_flag(parser)
    parser.set_defaults(func=cmd_report)


def add_wide_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wide",
        action="store_true",
        help="one column per figure (about 240 characters wide) even where the terminal is "
        "narrower; by default a table wider than the terminal (its width, or COLUMNS) is "
        "printed with the figures grouped in fewer columns, nothing cut",
    )


def cmd_report(args: argparse.Namespace) -> int:
    try:
        result = compare(args.run_dirs)
    except ReportError as e:
        print_error(str(e))
        return USER_ERROR
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_comparison(result, wide=args.wide)
    return 0


#: The paper's other Tester turns, said after the mode when a row's setting has them.
TURNS = {"inputs": "+inputs", "examples": "+examples", "every_round": "+every round"}


def _setting_flag(setting: dict[str, Any], name: str) -> str:
    """A flag of a row's setting; shrinking says its order when it is not the default."""
    shown = _flag(setting.get(name))
    if name == "shrink" and setting.get("shrink_order") == "pick-then-shrink":
        shown += " (pick first)"
    return shown


def _mode_label(mode: str, setting: dict[str, Any]) -> str:
    """The mode as a row names it, with the paper's other Tester turns the setting has."""
    return " ".join([mode, *(label for key, label in TURNS.items() if setting.get(key))])


def _flag(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def print_comparison(
    result: dict[str, Any], title: str = "ablation settings side by side", *, wide: bool = False
) -> None:
    """The rows as a table on stdout: one column per figure when that fits the width (the
    terminal's, COLUMNS, or unlimited for a file or pipe without COLUMNS) or ``wide`` is asked;
    else :func:`narrow_table`, the same figures in fewer columns, wrapped between words."""
    out = Console(highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:  # a log file: never wrapped
        out = Console(highlight=False, width=WIDE)
    table = wide_table(result, title)
    needed = Measurement.get(out, out.options.update_width(100_000), table).maximum
    if wide or needed <= out.width:
        if needed > out.width:
            out = Console(highlight=False, width=needed)
        out.print(table)
    else:
        out.print(narrow_table(result, title, out.width))
    _print_notes(result)


#: The width of a file or pipe (no terminal, no COLUMNS): the wide table is never wrapped.
WIDE = 320


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    """The figures of one row as the tables print them."""
    resolved = "-" if row["resolved"] is None else f"{row['resolved']}/{row['instances']}"
    graded = ""
    if row["resolved"] is not None and row["graded"] < row["instances"]:
        graded = f" ({row['graded']} graded)"
    rounds, tokens, cost = row["rounds"], row["feedback_tokens"], row["cost"]
    return {
        "resolved": resolved,
        "graded": graded,
        "verdicts": None if row["mode"] == "none" else row["verdicts"],  # no Tester: no verdict
        "rounds": f"{rounds['mean']:.2f} / {rounds['total']}",
        "tokens": f"{tokens['mean']:.1f} / {tokens['total']}",
        "cost": f"${cost['total']:.4f} / ${cost['mean']:.4f}",
        "named": [r["row"] for r in row.get("ladder", [])],
    }


def wide_table(result: dict[str, Any], title: str) -> Table:
    """One column per figure: each setting's flags, the counts and each verdict."""
    table = Table(title=title, title_justify="left")
    # `pgs ladder` names its rows (Table 7's names); `pgs report` has only the settings.
    ladder = any("ladder" in row for row in result["rows"])
    if ladder:
        table.add_column("row", no_wrap=True)
    for column in ("mode", "max rounds", "filter", "probes", "shrink", "instances", "resolved"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for column in VERDICTS:
        table.add_column(column, justify="right")
    for column in (
        "rounds (mean / total)",
        "feedback tokens (mean / total)",
        "cost (total / mean)",
    ):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        setting, cells = row["setting"], _cells(row)
        verdicts = cells["verdicts"]
        table.add_row(
            *([", ".join(cells["named"]) or "-"] if ladder else []),
            _mode_label(row["mode"] if ladder else LABELS.get(row["mode"], row["mode"]), setting),
            *(_setting_flag(setting, n) for n in ("rounds", "filter", "fresh_probes", "shrink")),
            str(row["instances"]),
            cells["resolved"] + cells["graded"],
            *("-" if verdicts is None else str(verdicts[v]) for v in VERDICTS),
            cells["rounds"],
            cells["tokens"],
            cells["cost"],
        )
    return table


def narrow_table(result: dict[str, Any], title: str, width: int) -> Table:
    """The figures of :func:`wide_table` in six columns, ``width`` wide, that wrap between
    words, never inside a number: the setting (its flags as ``rounds=1 filter=on``, only those
    the mode uses), resolved of the instances, the verdicts counted (those of zero left out),
    rounds, feedback tokens and cost. Fits 80 columns."""
    headers = (
        "setting",
        "resolved",
        "verdicts",
        "rounds mean / total",
        "feedback tokens mean / total",
        "cost total / mean",
    )
    ladder = any("ladder" in row for row in result["rows"])
    rows: list[tuple[str, ...]] = []
    for row in result["rows"]:
        setting, cells = row["setting"], _cells(row)
        label = _mode_label(LABELS.get(row["mode"], row["mode"]), setting)
        if ladder:
            label = f"{', '.join(cells['named']) or '-'}: {_mode_label(row['mode'], setting)}"
        flags = [
            f"{short}={_setting_flag(setting, name)}"
            for name, short in NARROW_FLAGS.items()
            if setting.get(name) is not None
        ]
        verdicts = cells["verdicts"]
        counted = "-"  # runs with no verdict: feedback none
        if verdicts is not None:
            counted = " ".join(f"{v}={verdicts[v]}" for v in VERDICTS if verdicts[v]) or "none"
        resolved = "-" if row["resolved"] is None else row["resolved"]
        rows.append(
            (
                " ".join([label, *flags]),
                f"{resolved} of {row['instances']}{cells['graded']}",
                counted,
                cells["rounds"],
                cells["tokens"],
                cells["cost"],
            )
        )
    # A line between rows: a row's cells wrap onto several lines.
    table = Table(title=title, title_justify="left", show_lines=True)
    # The table's own borders and padding: one bar per column and one more, a space each side.
    widths = _column_widths(headers, rows, width - 3 * len(headers) - 1)
    for index, (header, column_width) in enumerate(zip(headers, widths, strict=True)):
        table.add_column(header, justify="left" if index in (0, 2) else "right", width=column_width)
    for cells_of_row in rows:
        table.add_row(*cells_of_row)
    return table


def _column_widths(headers: tuple[str, ...], rows: list[tuple[str, ...]], room: int) -> list[int]:
    """Widths for columns of ``headers`` holding ``rows``' cells in ``room`` characters: each at
    least its longest word (rich's own squeezing cuts words to `…`); the rest of the room goes
    first to the columns that need least more to hold each cell on one line, then to the
    headers the same way."""
    columns = list(zip(headers, *rows, strict=True))
    widths = [max(cell_len(w) for cell in column for w in cell.split()) for column in columns]
    spare = room - sum(widths)
    for lines in ([column[1:] for column in columns], columns):
        longest = [max(cell_len(cell) for cell in cells) for cells in lines]
        for index in sorted(range(len(widths)), key=lambda i: longest[i] - widths[i]):
            more = min(max(spare, 0), max(longest[index] - widths[index], 0))
            widths[index] += more
            spare -= more
    return widths


#: The setting's flags in the narrow table, by their names in the row's setting.
NARROW_FLAGS = {
    "rounds": "rounds",
    "filter": "filter",
    "fresh_probes": "probes",
    "shrink": "shrink",
}


def _print_notes(result: dict[str, Any]) -> None:
    for row in result["rows"]:
        several = row.get("attempts") or {}
        if several.get("instances"):  # --attempts: how often the choice changed the outcome
            err.print(
                f"{row['mode']}: {several['instances']} of {row['instances']} instances ran "
                f"several attempts ({several['total']} attempts in all); the selection "
                f"changed the patch of {several['changed']}"
            )
        if several.get("graded"):  # `pgs eval --attempts`: did the choice keep a resolver?
            err.print(
                f"{row['mode']}: chosen resolves {several['chosen_resolved']} of "
                f"{several['any_resolved']} where an attempt does ({several['graded']} "
                "instances with their attempts graded)"
            )
    for run in result["runs"]:
        report = run["eval_report"] or "no eval report (resolved: -)"
        err.print(
            f"{run['dir']}: {run['instances']} instances, {', '.join(run['modes'])}; {report}"
        )
        for note in run["notes"]:
            err.print(f"  note: {note}")
