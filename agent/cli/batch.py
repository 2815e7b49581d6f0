"""``pgs batch``: run the agent over SWE-bench instances, N at a time, resumably
(:mod:`agent.swebench.scheduler`)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.cli.eval import add_environment_flags
from agent.errors import INFRASTRUCTURE, INTERRUPTED, USER_ERROR, print_error
from agent.run.config import add_config_flags, flag_overrides, load_config
from agent.run.outputs import check_writable, default_output_dir
from agent.run.reviewer import check_models
from agent.run.run_attempts import add_attempts_flags, attempts_config
from agent.swebench import (
    Environments,
    InstanceError,
    load_hub_dataset,
    load_instances,
    parse_python_map,
    select,
)
from agent.swebench.executors import add_executor_flags, make_executor
from agent.swebench.scheduler import Batch

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "batch",
        help="run the agent over SWE-bench instances (resumable, N at a time)",
        description="Run the agent over SWE-bench instances, each in its own container of "
        "its instance image, and write <id>/<id>.traj/.patch/.pred and preds.json. Records "
        "from a repository swebench does not know carry their environment themselves: "
        "python, requirements, pip_packages, pre_install, install, test_cmd (or eval_script), "
        "log_parser.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--instances", type=Path, help="SWE-bench records: JSON list or JSONL")
    source.add_argument(
        "--dataset", help="a dataset on the Hugging Face hub (needs the network and `datasets`)"
    )
    parser.add_argument("--split", default="test", help="split of --dataset (default: test)")
    parser.add_argument("--filter", help="regular expression on instance ids")
    parser.add_argument("--slice", dest="slice_", metavar="A:B", help="instances A to B-1")
    parser.add_argument("--shuffle", action="store_true", help="shuffle before slicing")
    parser.add_argument("--seed", type=int, default=42, help="seed of --shuffle")
    parser.add_argument("--workers", type=int, default=1, help="instances run at once")
    add_executor_flags(parser)
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="default: a new folder trajectories/<time>-<model>-<random>; give the folder of "
        "an earlier batch to resume it",
    )
    parser.add_argument("--redo", action="store_true", help="rerun finished instances too")
    parser.add_argument(
        "--stop-after",
        type=int,
        default=3,
        metavar="N",
        help="stop the batch once N instances in a row failed for the same infrastructure "
        "error (the model endpoint down, Docker gone) or mistake in the command (a tool "
        "bundle that fails to install); they and the rest run on resume; 0: never (default: 3)",
    )
    parser.add_argument(
        "--hints", action="store_true", help="append each instance's hints_text to the issue"
    )
    parser.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML file with the run's sections; repeat it to stack files, later ones win",
    )
    add_environment_flags(parser)
    add_attempts_flags(parser)
    add_config_flags(parser)
    parser.set_defaults(func=cmd_batch)


def cmd_batch(args: argparse.Namespace) -> int:
    config = load_config(args.config, flag_overrides(args))
    if args.workers < 1:
        raise InstanceError("--workers must be at least 1")
    if args.stop_after < 0:
        raise InstanceError("--stop-after must be 0 (never) or more")
    if args.instances is not None:
        instances = load_instances(args.instances)
    else:
        instances = load_hub_dataset(args.dataset, args.split)
    chosen = select(
        instances, pattern=args.filter, slice_=args.slice_, shuffle=args.shuffle, seed=args.seed
    )
    if not chosen:
        raise InstanceError("no instance left after --filter / --slice")
    check_models(config)  # before any image work
    output_dir = args.output_dir or default_output_dir(config.model.name)
    check_writable(output_dir)  # before any image work
    envs = Environments(
        repos_dir=args.repos_dir,
        python_map=parse_python_map(args.python_map),
        image_source=args.image_source,
        registry=args.registry,
    )
    batch = Batch(
        instances=chosen,
        config=config,
        output_dir=output_dir,
        envs=envs,
        hints=args.hints,
        redo=args.redo,
        workers=args.workers,
        stop_after=args.stop_after,
        attempts=attempts_config(args),
    )
    executor = make_executor(args.executor, args.workers, args.ray_address)
    err.print(
        f"{len(chosen)} instances, {args.workers} workers ({args.executor}), output in {output_dir}"
    )
    statuses, skipped = batch.run(executor=executor)
    print_statuses(statuses, skipped, batch)
    if batch.stop.is_set():
        err.print(f"interrupted: rerun with --output-dir {output_dir} to resume")
        return INTERRUPTED
    if batch.halted:
        print_error(batch.halted)
        return USER_ERROR if batch.halted_by_mistake else INFRASTRUCTURE
    done = ("submitted", "not started", "skipped")  # skipped: another process runs it
    failed = sum(n for s, n in statuses.items() if not s.startswith(done))
    return 1 if failed else 0


def print_statuses(statuses: Counter[str], skipped: list[str], batch: Batch) -> None:
    table = Table(title="exit statuses", title_justify="left")
    table.add_column("exit status")
    table.add_column("instances", justify="right")
    for status, count in statuses.most_common():
        table.add_row(status, str(count))
    if skipped:
        table.add_row("finished before (skipped)", str(len(skipped)))
    err.print(table)
    verdicts = Counter(str(p.get("pgs_verdict") or "unchecked") for p in batch.preds.values())
    if verdicts:
        shown = ", ".join(f"{v} {n}" for v, n in verdicts.most_common())
        err.print(f"PGS verdicts ({batch.config.pgs.feedback}): {shown}")
    err.print(
        f"cost: ${batch.stats.total_cost:.4f} | predictions: {len(batch.preds)} in "
        f"{batch.preds_path}"
    )
