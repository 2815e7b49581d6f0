"""``pgs eval``: grade SWE-bench predictions in fresh containers with the network off
(:mod:`agent.swebench.evaluate`)."""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.core.trajectory_file import write_atomic
from agent.run.outputs import check_writable
from agent.swebench import (
    Environments,
    Instance,
    InstanceError,
    load_hub_dataset,
    load_instances,
    parse_python_map,
)
from agent.swebench.evaluate import NO_TEST_OUTPUT, evaluate
from agent.swebench.executors import add_executor_flags, make_executor
from agent.swebench.official import registry_arg
from agent.swebench.predictions import attempt_predictions, gold_predictions, load_predictions
from agent.swebench.reports import Outcome, model_folder, share_graded

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "eval",
        help="grade SWE-bench predictions in fresh containers with the network off",
        description="Grade predictions (preds.json) against SWE-bench instances: apply each "
        "model patch in a fresh container of the instance image (network off), apply "
        "test_patch, run the FAIL_TO_PASS and PASS_TO_PASS tests, grade with swebench's log "
        "parsers and rules. Reports and per-instance logs (report.json, test_output.txt, "
        "run_instance.log, patch.diff) in the swebench harness's layout; the harness's flag "
        "spellings work too (--predictions_path gold, --instance_ids, --run_id, --max_workers, "
        "--report_dir, --rewrite_reports). Rerun with the same --run-id and --report-dir: the "
        "instances graded there are skipped.",
    )
    parser.add_argument(
        "--predictions",
        "--predictions-path",
        required=True,
        metavar="FILE|gold",
        help="preds.json or .jsonl; `gold`: the records' own patches (model name gold)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--instances", type=Path, help="SWE-bench records (JSON list or JSONL): the dataset"
    )
    source.add_argument(
        "--dataset",
        "--dataset-name",
        help="a dataset on the Hugging Face hub (needs the network and `datasets`), or a "
        "records file",
    )
    parser.add_argument("--split", default="test", help="split of --dataset (default: test)")
    parser.add_argument(
        "--instance-ids",
        nargs="+",
        metavar="ID",
        help="grade only these instances of the dataset (they make total_instances)",
    )
    add_environment_flags(parser)
    parser.add_argument(
        "--workers", "--max-workers", type=int, default=1, help="predictions graded at once"
    )
    add_executor_flags(parser)
    parser.add_argument(
        "--report-dir",
        type=Path,
        help="where reports go (default: logs/run_evaluation/<run id>)",
    )
    parser.add_argument(
        "--run-id",
        help="name of this evaluation (default: the time); run again with the same run id and "
        "report folder, the instances graded there before are skipped",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--force",
        action="store_true",
        help="grade again, in new containers, the instances graded before in the report folder",
    )
    again.add_argument(
        "--rewrite-reports",
        nargs="?",
        const=True,
        default=False,
        type=true_or_false,
        metavar="BOOL",
        help="run nothing: grade again the test_output.txt of each instance graded before, "
        "and rewrite its report.json and the summary",
    )
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
    parser.add_argument(
        "--attempts",
        action="store_true",
        help="also grade every attempt's patch of a `pgs batch --attempts` run, read from "
        "<dir>/<id>/attempt-<k>/<id>.pred beside the predictions file, as model "
        "<model>@attempt-<k>; the summary gains attempts_resolved: {id: [k, ...]} "
        "(`pgs report` counts how often the chosen patch resolves where an attempt does)",
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


def true_or_false(text: str) -> bool:
    """A boolean flag's value as the harness's ``str2bool`` takes it."""
    value = text.strip().lower()
    if value in ("true", "yes", "y", "t", "1"):
        return True
    if value in ("false", "no", "n", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def load_dataset(args: argparse.Namespace) -> tuple[list[Instance], list[Instance], str]:
    """The dataset's instances, those of them to grade (``--instance-ids``), and its name."""
    if args.instances is not None:
        instances, name = load_instances(args.instances), str(args.instances)
    elif Path(args.dataset).is_file():
        instances, name = load_instances(Path(args.dataset)), str(args.dataset)
    else:
        instances, name = load_hub_dataset(args.dataset, args.split), str(args.dataset)
    if args.instance_ids:
        wanted = set(args.instance_ids)
        missing = sorted(wanted - {i.instance_id for i in instances})
        if missing:
            raise InstanceError(
                f"--instance-ids not in {name}: {', '.join(missing[:5])}"
                + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            )
        return instances, [i for i in instances if i.instance_id in wanted], name
    return instances, instances, name


def cmd_eval(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise InstanceError("--workers must be at least 1")
    dataset, instances, name = load_dataset(args)
    if args.attempts and args.predictions == "gold":
        raise InstanceError("--attempts needs a predictions file of a `pgs batch --attempts` run")
    if args.predictions == "gold":  # as the harness makes them: the whole dataset's
        predictions = gold_predictions(dataset)
        err.print(f"gold predictions: the patches of the {len(dataset)} records")
    else:
        predictions = load_predictions(Path(args.predictions))
    known = {i.instance_id for i in instances}
    unknown = sorted(set(predictions) - known)
    if unknown and not args.instance_ids:
        err.print(
            f"note: {len(unknown)} predictions have no instance in {name}: {', '.join(unknown[:5])}"
        )
    lacking = sorted(known - set(predictions))
    if lacking and args.instance_ids:
        err.print(
            f"note: no prediction for {len(lacking)} of --instance-ids: {', '.join(lacking[:5])}"
        )
    if not set(predictions) & known:
        selected = "the instances of --instance-ids" if args.instance_ids else "an instance"
        raise InstanceError(f"no prediction in {args.predictions} matches {selected}")
    run_id = args.run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]
    report_dir = args.report_dir or Path("logs") / "run_evaluation" / run_id
    check_writable(report_dir)  # before any image is pulled or built
    envs = Environments(
        repos_dir=args.repos_dir,
        python_map=parse_python_map(args.python_map),
        image_source=args.image_source,
        run_id=run_id,
        registry=args.registry,
    )
    attempts = attempt_predictions(Path(args.predictions), predictions) if args.attempts else {}

    def evaluate_all(
        preds: dict[str, dict[str, Any]], keep: frozenset[str]
    ) -> tuple[list[Outcome], Path]:
        done = total = 0
        with err.status("grading") as spinner:

            def on_start(todo: list[Instance], earlier: list[Outcome]) -> None:
                nonlocal total
                total = len(todo)
                if args.rewrite_reports:
                    rewritten = [o for o in earlier if o.error != NO_TEST_OUTPUT]
                    err.print(
                        f"{len(rewritten)} reports rewritten from their test output in "
                        f"{report_dir}; {len(earlier) - len(rewritten)} instances have none "
                        "(not graded before)"
                    )
                elif earlier := [o for o in earlier if o.instance_id not in keep]:
                    err.print(
                        f"{len(earlier)} graded instances skipped: graded before in {report_dir} "
                        "(--force grades them again, --rewrite-reports regrades their test output)"
                    )
                spinner.update(f"grading {total} predictions")

            def on_done(outcome: Outcome) -> None:
                nonlocal done
                done += 1
                spinner.update(
                    f"graded {done}/{total} (last: {outcome.instance_id}: {outcome.kind})"
                )

            return evaluate(
                preds,
                instances,
                envs,
                report_dir,
                workers=args.workers,
                timeout=args.timeout,
                run_id=run_id,
                on_done=on_done,
                executor=make_executor(args.executor, args.workers, args.ray_address),
                network=args.network,
                commands=args.apply_commands,
                force=args.force,
                rewrite=bool(args.rewrite_reports),
                on_start=on_start,
                scripts=args.eval_scripts,
                keep=keep,
            )

    outcomes, path = evaluate_all(predictions, frozenset())
    print_summary(outcomes, path)
    if args.attempts:
        grade_attempts(attempts, predictions, outcomes, path, report_dir, evaluate_all)
    return 0


def grade_attempts(
    attempts: dict[int, dict[str, dict[str, Any]]],
    predictions: dict[str, dict[str, Any]],
    outcomes: list[Outcome],
    path: Path,
    report_dir: Path,
    evaluate_all: Any,
) -> None:
    """``--attempts``: grade each attempt's predictions as model ``<model>@attempt-<k>`` (an
    attempt whose patch is the chosen one takes the main grading), and add to the main summary
    ``attempts_resolved``: {id: [k, ...]}, every instance with a graded attempt."""
    graded = {o.instance_id for o in outcomes}
    if not attempts:
        err.print(
            "note: --attempts: no <id>/attempt-<k>/<id>.pred beside the predictions: "
            "nothing more to grade"
        )
    resolved: dict[str, list[int]] = {}
    for k, preds in attempts.items():
        preds = {iid: p for iid, p in preds.items() if iid in graded}
        if not preds:
            continue
        shared = frozenset(
            iid for iid, p in preds.items() if share_graded(predictions[iid], p, report_dir)
        )
        model = model_folder(next(iter(preds.values())))
        err.print(
            f"attempt {k}: {len(preds)} predictions, model {model}; {len(shared)} of them the "
            "chosen patch, graded above"
        )
        attempt_outcomes, attempt_path = evaluate_all(preds, shared)
        for o in attempt_outcomes:
            resolved.setdefault(o.instance_id, [])
            if o.kind == "resolved":
                resolved[o.instance_id].append(k)
        n = sum(o.kind == "resolved" for o in attempt_outcomes)
        err.print(f"attempt {k}: resolved {n}/{len(attempt_outcomes)}; report: {attempt_path}")
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary["attempts_resolved"] = dict(sorted(resolved.items()))
    write_atomic(path, json.dumps(summary, indent=4))
    chosen = set(summary.get("resolved_ids") or [])
    some = [iid for iid, ks in resolved.items() if ks]
    err.print(
        f"attempts: {len(resolved)} instances with attempts graded; an attempt resolves "
        f"{len(some)}; the chosen patch resolves {sum(iid in chosen for iid in some)} of those"
    )


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
            Text(o.kind, style=styles[o.kind]),
            o.counts("FAIL_TO_PASS"),
            o.counts("PASS_TO_PASS"),
            "before" if o.earlier else f"{o.seconds:.1f}s",
            Text((o.error or o.reason or "; ".join(o.deviations))[:80]),
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
