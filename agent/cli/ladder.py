"""``pgs ladder``: the PGS paper's Table 7 at repository level, in one command.

The ladder's rows (:data:`ROWS`; ``--rows`` picks some, by default the five of Table 7,
:data:`DEFAULT_ROWS`) run over one batch, each with one full ablation setting, each in its own
folder ``OUTPUT/<row>``:

====================  ====================================  ============  ======  ======  ======
row                   Table 7                               feedback      rounds  filter  probes
====================  ====================================  ============  ======  ======  ======
``none``              (the Generator alone; not in Table    none          -       -       -
                      7, ``--rows`` adds it)
``io``                Raw I/O feedback (Self-Edit)          io            N       -       -
``io-min``            + structural minimisation             io-min        N       -       -
``property``          (property generation without          property      1       off     0
                      minimisation; ``--rows`` adds it)
``property-min``      + property generation                 property-min  1       off     0
``filter``            + property check (filtering)          property-min  1       on      0
``pgs``               + iterative refinement (full PGS)     property-min  N       on      P
``pick-then-shrink``  (not in Table 7) full PGS, shrinking  property-min  N       on      P
                      the pool's fewest-token input
====================  ====================================  ============  ======  ======  ======

N and P are the run's ``pgs.rounds`` and ``pgs.fresh_probes`` (default 5 and 1; the shipped
``--config paper`` sets the paper's 5). The paper's other Tester turns come from the run's
configuration too (``pgs.input_generator`` in every property row, ``pgs.examples_filter`` in the
filtered ones, ``pgs.properties_every_round`` in the iterative ones; ``--config paper`` turns
them on). The io rows are Self-Edit, the baseline the paper runs
at the same budget as PGS: the issue's examples as tests (``pgs.issue_examples``), N rounds;
``io-min`` feeds back the failing example with the fewest input tokens, ``io`` the first.
Shrinking follows the mode (on only for ``property-min``: the rows before minimisation feed
back the first failing input found).
The rows set ``pgs.feedback`` and ``pgs.filter`` and leave ``pgs.check.shrink`` to the mode, so
a config or flag that sets one of those is refused: it would make the rows something else.
``pick-then-shrink`` (``--rows`` adds it) is the choosing strategy's ablation: ``pgs`` with
``pgs.check.shrink_order`` set to pick-then-shrink (a config setting it is then refused too).

The batch is either SWE-bench records (``--instances FILE``, with ``pgs batch``'s selection and
environment flags; each row is a :class:`agent.swebench.batch.Batch`, graded as ``pgs eval``
grades, the summary in ``OUTPUT/<row>/eval``) or the bundled examples (``--examples [NAME
...]``, :data:`agent.cli.demo.EXAMPLES`; each row runs every example with
:func:`agent.run.run_task.run_task` and grades it by the hidden tests the agent never saw, as ``pgs
demo`` does, the summary in the shape of ``pgs eval``'s). Resumable: a finished instance (its
``.traj`` holds an exit status) is not run again and a row whose summary is newer than its
``preds.json`` is not graded again (``--redo``: both again); a row folder whose runs used
another setting is refused. Every row shares one
:class:`~agent.models.GlobalStats`, so ``--model.total-cost-limit`` caps the whole ladder.

Then one table, :func:`agent.pgs.compare.compare` over the row folders (rows keyed by the full
setting), as text or as JSON (``--json``), on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from agent.cli.batch import print_statuses
from agent.cli.demo import EXAMPLES, _check_hidden_tests, make_example_repo
from agent.cli.eval import add_environment_flags
from agent.cli.report import add_wide_flag, print_comparison
from agent.core.trajectory import write_atomic
from agent.errors import INTERRUPTED, InputError
from agent.models import GlobalStats
from agent.pgs.compare import ablation_of, compare, prediction_fields, read_predictions
from agent.pgs.config import ablation
from agent.pgs.runner import ShrinkOrder
from agent.record.pgs import FeedbackMode
from agent.record.trajectory import RunRecord
from agent.run.config import RunConfig, add_config_flags, flag_overrides, load_config
from agent.run.outputs import check_output_dir, default_output_dir, output_paths
from agent.run.reviewer import check_models
from agent.run.run_task import run_task
from agent.run.task import load_issue
from agent.swebench import load_instances, parse_python_map, select
from agent.swebench.batch import Batch
from agent.swebench.executors import add_executor_flags, make_executor
from agent.swebench.images import Environments
from agent.swebench.resume import finished_status

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

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


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "ladder",
        help="run the PGS paper's ablation ladder (Table 7) over a batch, grade it, compare",
        description="Run the rows of the PGS paper's Table 7 over one batch, each row in its "
        "own folder OUTPUT/<row>: io (raw I/O feedback, Self-Edit: the issue's examples as "
        "tests, pgs.rounds rounds), io-min (+ structural minimisation: the smallest failing "
        "example, pgs.rounds rounds), property-min (+ property generation: unfiltered, 1 "
        "round), filter (+ property check, 1 round), pgs (+ iterative refinement: pgs.rounds "
        "rounds, pgs.fresh-probes probes); --rows adds none and property (unminimised, "
        "unfiltered, 1 round). Then grade each "
        "row (pgs eval for SWE-bench records; the hidden tests for the bundled examples) and "
        "print one table, a row per full ablation setting (mode, rounds, filter, probes, "
        "shrinking): resolved, verdicts, rounds, feedback tokens, cost. Rerun with the same "
        "--output-dir to resume.",
        epilog="examples: pgs ladder --examples --model gpt-4o-mini --config paper; "
        "pgs ladder --instances verified.jsonl --repos-dir ~/mirrors --model gpt-4o "
        "--output-dir runs/ladder --json",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--instances", type=Path, help="SWE-bench records: JSON list or JSONL")
    source.add_argument(
        "--examples",
        nargs="*",
        metavar="NAME",
        help=f"the bundled examples (default: all of {', '.join(example_names())})",
    )
    parser.add_argument(
        "--rows",
        default=",".join(DEFAULT_ROWS),
        help=f"comma-separated rows, of {', '.join(ROWS)} (default: {','.join(DEFAULT_ROWS)})",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="the ladder's folder, one subfolder per row (default: a new folder "
        "trajectories/<time>-ladder-<model>-<random>); give an earlier one to resume it",
    )
    parser.add_argument(
        "--redo", action="store_true", help="rerun finished instances and grade again"
    )
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    add_wide_flag(parser)
    parser.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML file with the run's sections (e.g. `paper`, the paper's sampling and "
        "budgets); repeat it to stack files, later ones win",
    )
    records = parser.add_argument_group("SWE-bench records (with --instances)")
    records.add_argument("--filter", help="regular expression on instance ids")
    records.add_argument("--slice", dest="slice_", metavar="A:B", help="instances A to B-1")
    records.add_argument("--shuffle", action="store_true", help="shuffle before slicing")
    records.add_argument("--seed", type=int, default=42, help="seed of --shuffle")
    records.add_argument("--workers", type=int, default=1, help="instances run at once")
    records.add_argument(
        "--hints", action="store_true", help="append each instance's hints_text to the issue"
    )
    records.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds for one instance's grading"
    )
    add_environment_flags(records)
    add_executor_flags(records)
    add_config_flags(parser)
    parser.set_defaults(func=cmd_ladder)


def example_names() -> list[str]:
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / "issue.md").is_file())


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


def cmd_ladder(args: argparse.Namespace) -> int:
    config = load_config(args.config, flag_overrides(args))
    rows = choose_rows(args.rows)
    check_config(config, rows)
    if args.workers < 1:
        raise InputError("--workers must be at least 1")
    check_models(config)  # before any row starts
    output_dir = args.output_dir or default_output_dir(f"ladder-{config.model.name}")
    if not args.redo:
        for row in rows:
            check_folder(output_dir / row.name, row, config)
    stats = GlobalStats()
    if args.instances is not None:
        code = run_records(args, config, rows, output_dir, stats)
    else:
        code = run_examples(args, config, rows, output_dir, stats)
    if code:
        return code
    result = compare([output_dir / row.name for row in rows])
    by_dir = {str(output_dir / row.name): row for row in rows}
    for entry in result["rows"]:
        named = [by_dir[run] for run in entry["runs"] if run in by_dir]
        entry["ladder"] = [{"row": r.name, "title": r.title} for r in named]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        title = "the PGS ladder (Table 7 at repository level)"
        print_comparison(result, title=title, wide=args.wide)
        for row in rows:
            err.print(f"{row.name}: {row.title}")
    err.print(f"cost: ${stats.total_cost:.4f}; the rows are in {output_dir}")
    return 0


# -- SWE-bench records ----------------------------------------------------------------------------


def run_records(
    args: argparse.Namespace,
    config: RunConfig,
    rows: Sequence[Row],
    output_dir: Path,
    stats: GlobalStats,
) -> int:
    from agent.swebench.evaluate import evaluate

    chosen = select(
        load_instances(args.instances),
        pattern=args.filter,
        slice_=args.slice_,
        shuffle=args.shuffle,
        seed=args.seed,
    )
    if not chosen:
        raise InputError("no instance left after --filter / --slice")
    envs = Environments(
        repos_dir=args.repos_dir,
        python_map=parse_python_map(args.python_map),
        image_source=args.image_source,
        run_id=RUN_ID,
        registry=args.registry,
    )
    for row in rows:
        folder = output_dir / row.name
        err.print(
            Text.assemble(
                (row.name, "bold"), f": {row.title}, {len(chosen)} instances, in {folder}"
            )
        )
        batch = Batch(
            instances=chosen,
            config=row.config(config),
            output_dir=folder,
            envs=envs,
            hints=args.hints,
            redo=args.redo,
            workers=args.workers,
            stats=stats,
        )
        statuses, skipped = batch.run(
            executor=make_executor(args.executor, args.workers, args.ray_address)
        )
        print_statuses(statuses, skipped, batch)
        if batch.stop.is_set():
            err.print(f"interrupted: rerun with --output-dir {output_dir} to resume")
            return INTERRUPTED
        report_dir = folder / "eval"
        if args.redo or not graded(folder, report_dir):
            err.print(f"{row.name}: grading {len(batch.preds)} predictions")
            evaluate(
                dict(batch.preds),
                chosen,
                envs,
                report_dir,
                workers=args.workers,
                timeout=args.timeout,
                run_id=RUN_ID,
                executor=make_executor(args.executor, args.workers, args.ray_address),
                force=args.redo,
            )
    return 0


def graded(folder: Path, report_dir: Path) -> bool:
    """A summary of this ladder newer than the row's predictions: nothing new to grade."""
    preds = folder / "preds.json"
    summaries = list(report_dir.glob(f"*.{RUN_ID}.json"))
    return (
        preds.is_file()
        and bool(summaries)
        and max(p.stat().st_mtime for p in summaries) >= preds.stat().st_mtime
    )


# -- the bundled examples -------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    name: str
    repo: Path
    instance_id: str
    problem: str


def run_examples(
    args: argparse.Namespace,
    config: RunConfig,
    rows: Sequence[Row],
    output_dir: Path,
    stats: GlobalStats,
) -> int:
    names = args.examples or example_names()
    unknown = [name for name in names if name not in example_names()]
    if unknown:
        raise InputError(
            f"--examples: no bundled example {unknown[0]!r}; there are {', '.join(example_names())}"
        )
    with tempfile.TemporaryDirectory(prefix="pgs-ladder-") as tmp:
        examples = []
        for name in names:
            # Fixed dates: the same commit, so the same image and instance id, on every resume.
            repo = make_example_repo(Path(tmp) / name, name)
            task = load_issue(str(EXAMPLES / name / "issue.md"), repo)
            examples.append(
                Example(
                    name=name,
                    repo=repo,
                    instance_id=task.instance_id,
                    problem=task.problem_statement,
                )
            )
        for row in rows:
            folder = output_dir / row.name
            err.print(
                Text.assemble(
                    (row.name, "bold"), f": {row.title}, {len(examples)} examples, in {folder}"
                )
            )
            for example in examples:
                run_example(example, row, row.config(config), folder, stats, redo=args.redo)
            changed = collect_predictions(folder)
            report_dir = folder / "eval"
            if args.redo or changed or not graded(folder, report_dir):
                grade_examples(examples, folder, report_dir, config.model.name)
    return 0


def run_example(
    example: Example,
    row: Row,
    config: RunConfig,
    folder: Path,
    stats: GlobalStats,
    *,
    redo: bool,
) -> None:
    from agent.run.task import Task

    paths = output_paths(folder, example.instance_id)
    if not redo and finished_status(paths["traj"]):
        err.print(f"  {example.instance_id}: finished before (--redo runs it again)")
        return
    check_output_dir(folder, example.instance_id, overwrite=True)
    task = Task(
        instance_id=example.instance_id, problem_statement=example.problem, repo=example.repo
    )
    try:
        status = run_task(task, config, folder, global_stats=stats).exit_status
    except Exception as e:  # as pgs batch does: the crash is recorded and the ladder goes on
        status = "exit_error"
        record_crash(paths, example.instance_id, config, e)
    err.print(f"  {example.instance_id}: {status}")


def record_crash(
    paths: dict[str, Path], instance_id: str, config: RunConfig, error: Exception
) -> None:
    """A ``.traj`` (exit_error and the message, over what the run saved), ``.patch`` and
    ``.pred`` for a run that crashed (a sandbox that died, an image that failed to build)."""
    try:
        data = RunRecord.read(paths["traj"])
    except (OSError, ValueError):
        data = RunRecord()
    info = data.info
    info.exit_status, info.error = "exit_error", f"{type(error).__name__}: {error}"
    info.instance_id = instance_id
    patch = info.submission or ""
    info.submission = patch
    write_atomic(paths["traj"], data.dumps())
    write_atomic(paths["patch"], patch)
    pred = {
        "instance_id": instance_id,
        "model_name_or_path": config.model.name,
        "model_patch": patch,
        **prediction_fields(data, mode=config.pgs.feedback),
    }
    write_atomic(paths["pred"], json.dumps(pred, indent=1))


def collect_predictions(folder: Path) -> bool:
    """``preds.json`` from the row's ``.pred`` files, as ``pgs batch`` writes it; whether it
    changed (so that a resumed row is graded again only when it ran something). The
    ``.pred`` files are the runs' own record: an instance run again replaces its entry."""
    preds = {}
    for pred_path in sorted(folder.glob("*/*.pred")):
        pred = json.loads(pred_path.read_text(encoding="utf-8"))
        preds[str(pred["instance_id"])] = pred
    path = folder / "preds.json"
    text = json.dumps(preds, indent=2, ensure_ascii=False)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    write_atomic(path, text)
    return True


def grade_examples(examples: Sequence[Example], folder: Path, report_dir: Path, model: str) -> None:
    """The hidden tests of each example on its patch; a summary ``pgs report`` reads."""
    preds = read_predictions(folder)
    resolved: list[str] = []
    unresolved: list[str] = []
    empty: list[str] = []
    errors: dict[str, str] = {}
    for example in examples:
        patch = str((preds.get(example.instance_id) or {}).get("model_patch") or "")
        if not patch.strip():
            empty.append(example.instance_id)
            continue
        err.print(f"  {example.instance_id}: the hidden tests")
        try:
            ok = _check_hidden_tests(example.repo, patch, EXAMPLES / example.name / "hidden") == 0
        except Exception as e:  # graded as an error, as pgs eval grades what it cannot run
            errors[example.instance_id] = f"{type(e).__name__}: {e}"
            continue
        (resolved if ok else unresolved).append(example.instance_id)
    summary = {
        "total_instances": len(examples),
        "submitted_instances": len(preds),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "submitted_ids": sorted(preds),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "empty_patch_ids": sorted(empty),
        "error_ids": sorted(errors),
        "errors": errors,
        "schema_version": 2,
        "run_id": RUN_ID,
        "graded_by": "the bundled examples' hidden tests",
    }
    name = model.replace("/", "__")
    write_atomic(report_dir / f"{name}.{RUN_ID}.json", json.dumps(summary, indent=4))
