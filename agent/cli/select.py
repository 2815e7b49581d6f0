"""``pgs select``: choose one patch per instance among the patches of other agents' prediction
files (or of pgs's own ``--attempts`` runs), by the evidence of sealed checks
(:mod:`agent.swebench.selection`). With ``--model`` (and the usual model, tools and pgs flags,
or ``--config``), the Tester writes each instance's properties once and they are evidence too
(:mod:`agent.swebench.selection.properties`)."""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.cli.eval import add_environment_flags
from agent.pgs.runner import CheckSettings
from agent.record.selection import InstanceSelection
from agent.run.config import RunConfig, add_config_flags, flag_overrides, load_config
from agent.run.outputs import check_writable
from agent.run.reviewer import check_models
from agent.swebench import Environments, InstanceError, load_instances, parse_python_map
from agent.swebench.selection.candidates import read_candidates
from agent.swebench.selection.properties import check_tester_config
from agent.swebench.selection.run import select_all

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "select",
        help="choose one patch per SWE-bench instance among several agents' predictions",
        description="Choose one patch per instance among the patches of several prediction "
        "files (SWE-bench predictions from any agent; pgs .traj files or run folders give "
        "each --attempts attempt's patch). Identical patches are merged, keeping every "
        "source. Each candidate is checked in a fresh container of the instance image "
        "(network off): the related repository tests against it, the issue's own code run "
        "on it, every candidate's added tests run on it; the evidence ranks them (docs/select.md). "
        "Writes OUTPUT_DIR/preds.json (the chosen patches, for pgs eval), "
        "OUTPUT_DIR/selection.json (every candidate, its evidence, its rank, why) and "
        "OUTPUT_DIR/instances/<id>.json; run again into the same folder, finished instances "
        "are kept. With --model, the Tester writes each instance's properties once on the "
        "original code (validated there as pgs does) and every candidate is checked by them "
        "with the same inputs; no model, no properties.",
    )
    parser.add_argument(
        "--predictions",
        nargs="+",
        required=True,
        type=Path,
        metavar="FILE",
        help="prediction files (JSON object or list, or JSONL; instance_id, "
        "model_name_or_path, model_patch), pgs .traj files or pgs run folders",
    )
    parser.add_argument(
        "--instances", type=Path, required=True, help="SWE-bench records (JSON list or JSONL)"
    )
    parser.add_argument(
        "--instance-ids", nargs="+", metavar="ID", help="select only for these instances"
    )
    parser.add_argument(
        "--output-dir", type=Path, required=True, help="where preds.json and selection.json go"
    )
    add_environment_flags(parser)
    parser.add_argument("--workers", type=int, default=1, help="instances checked at once")
    parser.add_argument(
        "--budget",
        type=float,
        default=120.0,
        help="seconds the related test files may take on the original code (default 120; "
        "the rest are left out, for every candidate alike)",
    )
    parser.add_argument(
        "--test-timeout", type=float, default=60.0, help="seconds per test (default 60)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML file with the model, tools and pgs sections (the Tester's); repeat it to "
        "stack files, later ones win; implies the Tester, as --model does",
    )
    add_config_flags(parser, sections=("model", "tools", "pgs"))
    parser.set_defaults(func=cmd_select)


def tester_config(args: argparse.Namespace) -> RunConfig | None:
    """The Tester's configuration when a model is given (``--model`` or ``--config``), else
    None: no properties."""
    overrides = flag_overrides(args)
    if not args.config and not overrides:
        return None
    config = load_config(args.config, overrides)
    check_tester_config(config)
    check_models(config)
    return config


def _wanted(args: argparse.Namespace) -> list[Any]:
    instances = load_instances(args.instances)
    if args.instance_ids:
        known = {i.instance_id for i in instances}
        missing = sorted(set(args.instance_ids) - known)
        if missing:
            raise InstanceError(f"--instance-ids not in {args.instances}: {', '.join(missing[:5])}")
        instances = [i for i in instances if i.instance_id in set(args.instance_ids)]
    return instances


def cmd_select(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise InstanceError("--workers must be at least 1")
    model = tester_config(args)
    instances = _wanted(args)
    candidates = read_candidates(args.predictions)
    have = [i for i in instances if candidates.get(i.instance_id)]
    if not have:
        raise InstanceError(
            "no prediction in the files given has a patch for an instance of "
            f"{args.instances}: check the instance ids"
        )
    check_writable(args.output_dir)
    total = sum(len(candidates[i.instance_id]) for i in have)
    err.print(
        f"{len(have)} instances, {total} distinct candidates from {len(args.predictions)} "
        f"files; output in {args.output_dir}"
        + (
            f"; the Tester's properties by {model.pgs.tester_model or model.model.name}"
            if model
            else ""
        )
    )
    envs = Environments(
        repos_dir=args.repos_dir,
        python_map=parse_python_map(args.python_map),
        image_source=args.image_source,
        run_id="select-" + time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4],
        registry=args.registry,
    )
    settings = CheckSettings(budget=args.budget, test_timeout=args.test_timeout)
    done = 0
    with err.status("selecting") as spinner:

        def on_status(iid: str, text: str) -> None:
            spinner.update(f"{done}/{len(have)} done | {iid}: {text}")

        def on_done(selection: InstanceSelection, reused: bool) -> None:
            nonlocal done
            done += 1
            said = "kept from the earlier run" if reused else _short(selection)
            err.print(f"[{done}/{len(have)}] {selection.instance_id}: {said}")

        result = select_all(
            have,
            candidates,
            envs,
            settings,
            args.output_dir,
            predictions=[str(p) for p in args.predictions],
            workers=args.workers,
            on_done=on_done,
            on_status=on_status,
            model=model,
        )
    selections = list(result.record.instances.values())
    print_table(selections)
    if model is not None:
        cost = sum(s.properties.cost for s in selections if s.properties is not None)
        err.print(f"the Tester's properties cost ${cost:.4f}")
    err.print(
        f"wrote {args.output_dir / 'preds.json'} and {args.output_dir / 'selection.json'}; "
        f"grade it with: pgs eval --predictions {args.output_dir / 'preds.json'} "
        f"--instances {args.instances}"
    )
    failed = [s for s in result.record.instances.values() if s.error]
    return 1 if failed and len(failed) == len(result.record.instances) else 0


def _short(selection: InstanceSelection) -> str:
    if selection.error:
        return f"error: {selection.error}"
    said = f"chose candidate {selection.chosen} of {len(selection.candidates)}"
    written = selection.properties
    if written is not None:  # --model: what the Tester's properties amount to
        trouble = written.error or written.tester_error
        said += (
            f"; the Tester's properties could not be used ({trouble[:200]})"
            if trouble
            else f"; {len(written.kept)} properties kept, {len(written.shows_bug)} show the bug"
        )
    return said


def print_table(selections: list[InstanceSelection]) -> None:
    out = Console(highlight=False)
    table = Table(title="pgs select")
    props = any(s.properties is not None for s in selections)  # the Tester's (--model)
    names = ["instance", "cands", "chosen", "sources", "broken"]
    names += ["props"] * props + ["probes", "f2p", "ties"]
    for name in names:
        table.add_column(name, overflow="fold")
    table.add_column("why", overflow="fold", ratio=1)
    for s in selections:
        chosen = next((c for c in s.candidates if c.index == s.chosen), None)
        if chosen is None:
            blank = [""] * (len(names) - 3)
            table.add_row(s.instance_id, str(len(s.candidates)), "-", *blank, s.error or s.reason)
            continue
        e = chosen.evidence
        passed = [f"{e.issue_properties_passed}/{e.issue_properties_total}"] * props
        table.add_row(
            s.instance_id,
            str(len(s.candidates)),
            str(chosen.index),
            str(len(chosen.sources)),
            str(len(e.broken)),
            *passed,
            f"{e.probes_changed}/{len(s.probes)}",
            f"{e.fail_to_pass_passed}/{e.fail_to_pass_total}",
            str(len(s.ties)),
            s.reason[:160],
        )
    out.print(table)
