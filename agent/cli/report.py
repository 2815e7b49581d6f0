"""``pgs report``: Self-Edit and PGS side by side, one row per ablation setting (feedback mode,
rounds, filter, fresh probes, shrinking; :mod:`agent.pgs.compare`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.errors import USER_ERROR, ReportError, print_error
from agent.pgs.compare import LABELS, VERDICTS, compare

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "report",
        help="compare runs side by side per ablation setting (Self-Edit vs PGS)",
        description="Compare `pgs batch` runs per ablation setting, as the PGS paper's Table 7 "
        "does. A row is one full setting: the feedback mode (none, io = Self-Edit, property, "
        "property-min = PGS), the most rounds, the soundness filter, the fresh probes and "
        "Hypothesis's shrinking ('-' where the mode does not use it); its columns: the "
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
    parser.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    try:
        result = compare(args.run_dirs)
    except ReportError as e:
        print_error(str(e))
        return USER_ERROR
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_comparison(result)
    return 0


def _flag(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def print_comparison(result: dict[str, Any], title: str = "ablation settings side by side") -> None:
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
        setting = row["setting"]
        resolved = "-" if row["resolved"] is None else f"{row['resolved']}/{row['instances']}"
        if row["resolved"] is not None and row["graded"] < row["instances"]:
            resolved += f" ({row['graded']} graded)"
        unchecked_mode = row["mode"] == "none"  # no Tester: no verdict to count
        rounds, tokens, cost = row["rounds"], row["feedback_tokens"], row["cost"]
        named = [r["row"] for r in row.get("ladder", [])]
        table.add_row(
            *([", ".join(named) or "-"] if ladder else []),
            row["mode"] if ladder else LABELS.get(row["mode"], row["mode"]),
            *(_flag(setting.get(name)) for name in ("rounds", "filter", "fresh_probes", "shrink")),
            str(row["instances"]),
            resolved,
            *("-" if unchecked_mode else str(row["verdicts"][v]) for v in VERDICTS),
            f"{rounds['mean']:.2f} / {rounds['total']}",
            f"{tokens['mean']:.1f} / {tokens['total']}",
            f"${cost['total']:.4f} / ${cost['mean']:.4f}",
        )
    out = Console(highlight=False)
    if not out.is_terminal:  # a log file: never wrapped
        out = Console(highlight=False, width=320)
    out.print(table)
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
