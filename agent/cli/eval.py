"""``pgs eval``: grade SWE-bench predictions in fresh containers with the network off
(:mod:`agent.swebench.evaluate`)."""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.core.run import check_writable
from agent.swebench import Environments, InstanceError, load_instances, parse_python_map
from agent.swebench.evaluate import Outcome, evaluate, load_predictions
from agent.swebench.executors import add_executor_flags, make_executor
from agent.swebench.official import registry_arg

err = Console(stderr=True, highlight=False, soft_wrap=True)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "eval",
        help="grade SWE-bench predictions in fresh containers with the network off",
        description="Grade predictions (preds.json) against SWE-bench instances: apply each "
        "model patch in a fresh container of the instance image (network off), apply "
        "test_patch, run the FAIL_TO_PASS and PASS_TO_PASS tests, grade with swebench's log "
        "parsers and rules. Reports in the swebench harness's shape.",
    )
    parser.add_argument("--predictions", required=True, type=Path, help="preds.json or .jsonl")
    parser.add_argument(
        "--instances", required=True, type=Path, help="SWE-bench records (JSON list or JSONL)"
    )
    add_environment_flags(parser)
    parser.add_argument("--workers", type=int, default=1, help="predictions graded at once")
    add_executor_flags(parser)
    parser.add_argument(
        "--report-dir",
        type=Path,
        help="where reports go (default: logs/run_evaluation/<run id>)",
    )
    parser.add_argument("--run-id", help="name of this evaluation (default: the time)")
    parser.add_argument(
        "--network",
        action="store_true",
        help="give the evaluation containers network access, so tests that need the internet "
        "can pass (off by default: such tests are reported as not checkable here)",
    )
    parser.add_argument(
        "--apply-commands",
        choices=["harness", "cloud"],
        default="harness",
        help="how the model patch is applied, read from the installed swebench: its harness's "
        "GIT_APPLY_CMDS (default), or its cloud (Modal, sb-cli) harness's two commands",
    )
    parser.add_argument(
        "--eval-scripts",
        choices=["record", "harness"],
        default="record",
        help="the tests' script: the record's eval_script where it has one (default), or the "
        "one the installed swebench writes from its table, as reports graded before a record's "
        "fix were (e.g. astropy-8872's SETUPTOOLS_USE_DISTUTILS)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds for one instance's tests"
    )
    parser.set_defaults(func=cmd_eval)


def add_environment_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by ``pgs batch`` and ``pgs eval``: where repositories and images come from."""
    parser.add_argument(
        "--repos-dir",
        type=Path,
        help="folder of clones or bare repositories named OWNER__NAME (default: clone from "
        "GitHub into the cache)",
    )
    parser.add_argument(
        "--python-map",
        action="append",
        default=[],
        metavar="WANTED=USED",
        help="use Python USED where an instance needs WANTED, which has no base image here "
        "(e.g. 3.10=3.11); recorded as a deviation from the official environment",
    )
    parser.add_argument(
        "--image-source",
        choices=["build", "official"],
        default="build",
        help="build instance images here (default), or pull swebench's published images: "
        "the record's `image`, else swebench/sweb.eval.x86_64.<id>:latest (needs a registry)",
    )
    parser.add_argument(
        "--registry",
        "--image-namespace",
        type=registry_arg,
        metavar="HOST:PORT",
        help="a registry shared by the nodes: with --image-source official, pull "
        "HOST:PORT/<image> from it (a mirror) instead of Docker Hub; with build, pull an "
        "instance image from it before building one, and push each image built here to it "
        "(127.0.0.1:PORT works over plain HTTP)",
    )


def cmd_eval(args: argparse.Namespace) -> int:
    instances = load_instances(args.instances)
    predictions = load_predictions(args.predictions)
    known = {i.instance_id for i in instances}
    unknown = sorted(set(predictions) - known)
    if unknown:
        err.print(
            f"note: {len(unknown)} predictions have no instance in {args.instances}: "
            f"{', '.join(unknown[:5])}"
        )
    if not set(predictions) & known:
        raise InstanceError(f"no prediction in {args.predictions} matches an instance")
    run_id = args.run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]
    report_dir = args.report_dir or Path("logs") / "run_evaluation" / run_id
    check_writable(report_dir)  # before any image is pulled or built
    envs = Environments(
        args.repos_dir,
        parse_python_map(args.python_map),
        args.image_source,
        run_id,
        registry=args.registry,
    )
    total = len(set(predictions) & known)
    executor = make_executor(args.executor, args.workers, args.ray_address)
    done = 0
    with err.status(f"grading {total} predictions") as spinner:

        def on_done(outcome: Outcome) -> None:
            nonlocal done
            done += 1
            spinner.update(f"graded {done}/{total} (last: {outcome.instance_id}: {outcome.kind})")

        outcomes, path = evaluate(
            predictions,
            instances,
            envs,
            report_dir,
            workers=args.workers,
            timeout=args.timeout,
            run_id=run_id,
            on_done=on_done,
            executor=executor,
            network=args.network,
            commands=args.apply_commands,
            scripts=args.eval_scripts,
        )
    print_summary(outcomes, path)
    return 0


def print_summary(outcomes: list[Outcome], path: Path) -> None:
    table = Table(title="SWE-bench evaluation", title_justify="left")
    for column in ("instance", "result", "FAIL_TO_PASS", "PASS_TO_PASS", "time", "note"):
        table.add_column(column)
    styles = {
        "resolved": "green",
        "unresolved": "yellow",
        "not_checkable": "magenta",
        "error": "red",
        "empty": "dim",
    }
    for o in outcomes:
        table.add_row(
            o.instance_id,
            f"[{styles[o.kind]}]{o.kind}[/]",
            o.counts("FAIL_TO_PASS"),
            o.counts("PASS_TO_PASS"),
            f"{o.seconds:.1f}s",
            (o.error or o.reason or "; ".join(o.deviations))[:80],
        )
    out = Console(highlight=False)
    if not out.is_terminal:  # a log file: one line per instance, never wrapped
        out = Console(highlight=False, width=200)
    out.print(table)
    resolved = sum(o.kind == "resolved" for o in outcomes)
    unchecked = [o for o in outcomes if o.kind == "not_checkable"]
    for o in unchecked:
        err.print(f"not checkable here: {o.instance_id}: {o.reason}")
    note = f"; not checkable here {len(unchecked)}" if unchecked else ""
    err.print(f"resolved {resolved}/{len(outcomes)}{note}; report: {path}")
