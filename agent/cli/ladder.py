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
environment flags; each row is a :class:`agent.swebench.scheduler.Batch`, graded as ``pgs eval``
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from agent.cli.batch import print_statuses
from agent.cli.eval import add_environment_flags
from agent.cli.ladder_examples import example_names, run_examples
from agent.cli.ladder_rows import (
    DEFAULT_ROWS,
    ROWS,
    RUN_ID,
    Row,
    check_config,
    check_folder,
    choose_rows,
    graded,
)
from agent.cli.report import add_wide_flag, print_comparison
from agent.errors import INTERRUPTED, InputError
from agent.models import GlobalStats
from agent.pgs.compare import compare
from agent.run.config import RunConfig, add_config_flags, flag_overrides, load_config
from agent.run.outputs import default_output_dir
from agent.run.reviewer import check_models
from agent.swebench import load_instances, parse_python_map, select
from agent.swebench.executors import add_executor_flags, make_executor
from agent.swebench.images import Environments
from agent.swebench.scheduler import Batch

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


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
