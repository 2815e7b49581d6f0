"""The ladder's rows (:data:`ROWS`): each one full ablation setting of the PGS paper's Table 7
(:class:`Row`), chosen by ``--rows`` (:func:`choose_rows`); the checks that a configuration and a
row folder fit them (:func:`check_config`, :func:`check_folder`); whether a row is graded
(:func:`graded`). The command is :mod:`agent.cli.ladder`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import InputError
from agent.pgs.compare import ablation_of
from agent.pgs.config import ablation
from agent.pgs.runner import ShrinkOrder
from agent.record.pgs import FeedbackMode
from agent.record.trajectory import RunRecord
from agent.run.config import RunConfig

#: The eval summary of a row: ``OUTPUT/<row>/eval/<model>.ladder.json``.
RUN_ID = "ladder"


@dataclass(frozen=True)
class Row:
    """One rung of the ladder: its folder name, Table 7's name for it, its PGS settings."""

    name: str
    title: str
    feedback: FeedbackMode
    filter: bool = True
    #: One round, no fresh probe: every property row of Table 7 but the last refines once (the
    #: io rows, Self-Edit, get the run's rounds, as the paper's baseline does).
    one_shot: bool = True
    #: The choosing strategy's ablation (docs/pgs.md, the counterexample pool): None leaves
    #: ``pgs.check.shrink_order`` as configured (default shrink-then-pick).
    shrink_order: ShrinkOrder | None = None

    def config(self, config: RunConfig) -> RunConfig:
        update: dict[str, Any] = {"feedback": self.feedback, "filter": self.filter}
        if self.one_shot:  # one refinement: no fresh probe, no properties added per round
            update.update(rounds=1, fresh_probes=0, properties_every_round=False)
        if self.shrink_order is not None:
            check = config.pgs.check.model_copy(update={"shrink_order": self.shrink_order})
            update["check"] = check
        return config.model_copy(update={"pgs": config.pgs.model_copy(update=update)})


ROWS = {
    row.name: row
    for row in (
        Row(name="none", title="the Generator alone (no feedback)", feedback="none"),
        Row(name="io", title="Raw I/O feedback (Self-Edit)", feedback="io", one_shot=False),
        Row(
            name="io-min",
            title="+ structural minimisation (the smallest failing example)",
            feedback="io-min",
            one_shot=False,
        ),
        Row(
            name="property",
            title="property generation, unminimised (not in Table 7)",
            feedback="property",
            filter=False,
        ),
        Row(
            name="property-min",
            title="+ property generation",
            feedback="property-min",
            filter=False,
        ),
        Row(name="filter", title="+ property check (filtering)", feedback="property-min"),
        Row(
            name="pgs",
            title="+ iterative refinement (full PGS)",
            feedback="property-min",
            one_shot=False,
        ),
        Row(
            name="pick-then-shrink",
            title="full PGS, the pool's fewest-token input shrunk (not in Table 7)",
            feedback="property-min",
            one_shot=False,
            shrink_order="pick-then-shrink",
        ),
    )
}


#: Table 7's five rows.
DEFAULT_ROWS = ("io", "io-min", "property-min", "filter", "pgs")


def choose_rows(text: str) -> list[Row]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ROWS]
    if unknown or not names:
        problem = f"unknown row {unknown[0]!r}" if unknown else "no row given"
        raise InputError(f"--rows {text!r}: {problem}; the rows are {', '.join(ROWS)}")
    if len(set(names)) < len(names):
        raise InputError(f"--rows {text!r}: a row is named twice")
    return [ROWS[name] for name in names]


def check_config(config: RunConfig, rows: Sequence[Row]) -> None:
    """Refuse settings the rows make themselves, and rows that would come out the same."""
    fixed = sorted(config.pgs.model_fields_set & {"feedback", "filter"})
    fixed += ["check.shrink"] if "shrink" in config.pgs.check.model_fields_set else []
    orders = any(row.shrink_order is not None for row in rows)
    if orders and "shrink_order" in config.pgs.check.model_fields_set:
        fixed.append("check.shrink_order")
    if fixed:
        raise InputError(
            f"pgs.{fixed[0]} is set by each row of the ladder: leave it out of the flags and "
            "--config files (choose rows with --rows)"
        )
    seen: dict[str, str] = {}
    for row in rows:
        key = ablation(row.config(config).pgs).model_dump_json()
        if key in seen:
            raise InputError(
                f"rows {seen[key]} and {row.name} would run the same setting ({key}): give "
                "the pgs row more than one round (--rounds)"
            )
        seen[key] = row.name


def check_folder(folder: Path, row: Row, config: RunConfig) -> None:
    """Refuse to resume a row folder whose runs used another setting (a ladder started with
    other flags): the row would mix two settings."""
    wanted = ablation(row.config(config).pgs)
    for path in sorted(folder.glob("*/*.traj")):
        try:
            data = RunRecord.read(path)
        except (OSError, ValueError):
            continue  # an unreadable run is run again
        found = ablation_of(data)
        if found is not None and found != wanted:
            raise InputError(
                f"{path} ran with another setting ({found.model_dump_json()}) than the {row.name} "
                f"row now has ({wanted.model_dump_json()}): pass --redo to run it again, or "
                "another --output-dir"
            )


def graded(folder: Path, report_dir: Path) -> bool:
    """A summary of this ladder newer than the row's predictions: nothing new to grade."""
    preds = folder / "preds.json"
    summaries = list(report_dir.glob(f"*.{RUN_ID}.json"))
    return (
        preds.is_file()
        and bool(summaries)
        and max(p.stat().st_mtime for p in summaries) >= preds.stat().st_mtime
    )
