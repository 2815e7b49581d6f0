"""``pgs ladder --examples``: the ladder's rows over the bundled examples
(:data:`agent.cli.demo.EXAMPLES`). Each row runs every example with
:func:`agent.run.run_task.run_task` (a crash recorded, as ``pgs batch`` records it), collects
the row's ``preds.json`` and grades each patch by the example's hidden tests, which the agent
never saw, as ``pgs demo`` does; the summary has the shape of ``pgs eval``'s."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from agent.cli.demo import EXAMPLES, _check_hidden_tests, make_example_repo
from agent.cli.ladder_rows import RUN_ID, Row, graded
from agent.core.trajectory_file import write_atomic
from agent.errors import InputError
from agent.models import GlobalStats
from agent.pgs.compare import prediction_fields, read_predictions
from agent.record.trajectory import RunRecord
from agent.run.config import RunConfig
from agent.run.outputs import RunPaths, check_output_dir, output_paths
from agent.run.run_task import run_task
from agent.run.task import load_issue
from agent.swebench.resume import finished_status

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def example_names() -> list[str]:
    """The bundled examples, by name."""
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / "issue.md").is_file())


@dataclass(frozen=True)
class Example:
    """One bundled example, made into a repository for the ladder's run."""

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
    if not redo and finished_status(paths.traj):
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


def record_crash(paths: RunPaths, instance_id: str, config: RunConfig, error: Exception) -> None:
    """A ``.traj`` (exit_error and the message, over what the run saved), ``.patch`` and
    ``.pred`` for a run that crashed (a sandbox that died, an image that failed to build)."""
    try:
        data = RunRecord.read(paths.traj)
    except (OSError, ValueError):
        data = RunRecord()
    info = data.info
    info.exit_status, info.error = "exit_error", f"{type(error).__name__}: {error}"
    info.instance_id = instance_id
    patch = info.submission or ""
    info.submission = patch
    write_atomic(paths.traj, data.dumps())
    write_atomic(paths.patch, patch)
    pred = {
        "instance_id": instance_id,
        "model_name_or_path": config.model.name,
        "model_patch": patch,
        **prediction_fields(data, mode=config.pgs.feedback),
    }
    write_atomic(paths.pred, json.dumps(pred, indent=1))


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
