"""Several attempts on one issue, one patch chosen by the evidence (``--attempts K``).

:func:`run_attempts` runs the Generator K times on the same task (each attempt is one
:func:`agent.run.run_task.run_task`, in its own sandbox, from the original code; its sampling
temperature from ``--attempt-temperatures``), with ONE Tester property set: the first attempt
whose Tester wrote properties pays for them, every later attempt adopts them as validated
(:mod:`agent.pgs.shared`; no Tester turn, no fresh probes). Attempts stop early when one's
verdict is in ``--attempts-stop-on`` (default ``passed``), or when their total cost reaches
``--attempts-cost-limit``. Then every attempt's final patch is checked again, in one more
sandbox, by the same properties, related tests and inputs, and the best is chosen
(:mod:`agent.pgs.selection`).

Files, under ``<output>/<id>/``: ``attempt-<k>/<id>.traj`` / ``.patch`` / ``.pred`` per attempt
(its whole run, as a single run writes it); ``<id>.traj`` / ``.patch`` / ``.pred``: the chosen
attempt's trajectory and patch, with the ``attempts`` record (every candidate, its evidence,
why the chosen one won; :class:`~agent.pgs.selection.AttemptsRecord`).

Resume: an attempt whose ``.traj`` holds an exit status (not ``interrupted`` nor
``exit_error``) and whose ``.pred`` is written is kept and not run again; the shared
properties are read back from its ``.traj``. ``--attempts 1`` (the default) is a single
:func:`~agent.run.run_task.run_task`, as without this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent.core.loop import Agent, RunResult
from agent.core.secrets import Redactor
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.errors import InputError
from agent.models import GlobalStats, get_model
from agent.pgs.feedback import get_counter
from agent.pgs.related import changed_files, related_tests
from agent.pgs.reviewer import PGS
from agent.pgs.selection import choose, evidence
from agent.pgs.shared import SharedProperties
from agent.record.attempts import AttemptsRecord, Candidate
from agent.record.check import CheckReport
from agent.record.pgs import RoundRecord, Verdict
from agent.record.trajectory import RunRecord, Step
from agent.run.config import RunConfig
from agent.run.hooks import Hooks, RunHook
from agent.run.outputs import RunPaths, output_paths, write_results
from agent.run.reviewer import with_pinned_plugins
from agent.run.run_task import run_task
from agent.run.sandbox import base_commit, close_after_error, open_sandbox
from agent.run.task import Task
from envs.sandbox import Sandbox

#: Exit statuses of an attempt that a resume runs again.
UNFINISHED = {None, "interrupted", "exit_error"}


class AttemptsConfig(BaseModel):
    """Several Generator attempts on one issue (``--attempts`` and its flags)."""

    model_config = ConfigDict(extra="forbid")
    count: int = Field(1, ge=1, description="Generator attempts on the issue")
    temperatures: list[float] = Field(
        default_factory=list,
        description="the sampling temperature of attempt k is the k-th (cycled); empty: the "
        "model's",
    )
    stop_on: list[Verdict] = Field(
        default_factory=lambda: cast(list[Verdict], ["passed"]),
        description="no further attempt once one's verdict is one of these (empty: never)",
    )
    cost_limit: float = Field(
        0.0, ge=0, description="USD across all attempts of one issue; 0 = none"
    )


def add_attempts_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "attempts", "several Generator attempts, one patch chosen by the evidence"
    )
    group.add_argument(
        "--attempts",
        type=int,
        default=1,
        metavar="K",
        help="Generator attempts on each issue, sharing one Tester property set; the patch "
        "is chosen by the checks (default 1: a single run)",
    )
    group.add_argument(
        "--attempt-temperatures",
        metavar="T1,T2,...",
        help="sampling temperature per attempt, cycled (default: --model.temperature for all)",
    )
    group.add_argument(
        "--attempts-stop-on",
        metavar="VERDICTS",
        default="passed",
        help="stop once an attempt's verdict is one of these, comma-separated, or 'never' "
        "(default: passed)",
    )
    group.add_argument(
        "--attempts-cost-limit",
        type=float,
        default=0.0,
        metavar="USD",
        help="total cost of the attempts of one issue; no attempt starts past it (0: none)",
    )


def attempts_config(args: argparse.Namespace) -> AttemptsConfig:
    """The ``attempts`` flags, checked; a bad value is one :class:`InputError`."""
    if args.attempts < 1:
        raise InputError(f"--attempts {args.attempts}: give 1 or more")
    if args.attempts_cost_limit < 0:
        raise InputError(f"--attempts-cost-limit {args.attempts_cost_limit}: give 0 or more")
    temperatures = []
    for word in (args.attempt_temperatures or "").split(","):
        if not word.strip():
            continue
        try:
            temperatures.append(float(word))
        except ValueError:
            raise InputError(
                f"--attempt-temperatures: {word.strip()!r} is not a number (e.g. 0,0.7,1.0)"
            ) from None
    stop = [w.strip() for w in str(args.attempts_stop_on).split(",") if w.strip()]
    if stop == ["never"]:
        stop = []
    known = get_args(Verdict)
    for word in stop:
        if word not in known:
            raise InputError(
                f"--attempts-stop-on: {word!r} is no verdict (one of {', '.join(known)}, or never)"
            )
    return AttemptsConfig(
        count=args.attempts,
        temperatures=temperatures,
        stop_on=cast(list[Verdict], stop),
        cost_limit=args.attempts_cost_limit,
    )


def attempt_paths(output_dir: Path, instance_id: str, attempt: int) -> RunPaths:
    """``<output>/<id>/attempt-<k>/<id>.traj`` and its siblings: every file of
    :func:`output_paths`, in the attempt's folder."""
    folder = output_dir / instance_id / f"attempt-{attempt}"
    return output_paths(output_dir, instance_id).moved(folder)


def remove_attempts(output_dir: Path, instance_id: str) -> None:
    """The attempt folders of an earlier run (``--overwrite``, ``--redo``)."""
    folder = output_dir / instance_id
    for path in sorted(folder.glob("attempt-*")) if folder.is_dir() else []:
        if path.is_dir():
            shutil.rmtree(path)


def _finished(paths: RunPaths) -> RunRecord | None:
    """The ``.traj`` of an attempt that finished (a resume keeps it), else None."""
    try:
        data = RunRecord.read(paths.traj)
    except (OSError, ValueError):
        return None
    if data.info.exit_status is None or data.info.exit_status in UNFINISHED:
        return None
    return data if paths.pred.exists() else None


def costs(data: RunRecord) -> tuple[float, float]:
    """(total, Tester) cost of one attempt's ``.traj``."""
    spent = data.usage()
    return spent["instance_cost"], spent["tester_cost"]


class _AttemptHook(RunHook):
    """An attempt's progress and steps, named, to the run's hooks; its start and end are the
    run's own (:func:`run_attempts` calls them once)."""

    def __init__(self, hooks: RunHook) -> None:
        self.hooks = hooks
        self.prefix = ""

    def on_status(self, text: str) -> None:
        self.hooks.on_status(f"{self.prefix}: {text}")

    def on_sandbox(self, sandbox: Sandbox) -> None:
        self.hooks.on_sandbox(sandbox)

    def on_step(self, agent: Agent, step: Step) -> None:
        self.hooks.on_step(agent, step)


def attempt_config(
    config: RunConfig,
    attempts: AttemptsConfig,
    attempt: int,
    spent: float,
) -> RunConfig:
    """Attempt ``attempt``'s configuration: its temperature and the budget left."""
    model = config.model
    if attempts.temperatures:
        temperature = attempts.temperatures[(attempt - 1) % len(attempts.temperatures)]
        model = model.model_copy(update={"temperature": temperature})
    if attempts.cost_limit:
        left = max(attempts.cost_limit - spent, 1e-12)
        own = model.per_instance_cost_limit
        limit = min(own, left) if own else left
        model = model.model_copy(update={"per_instance_cost_limit": limit})
    # The pgs section stays as given (its ablation is what a resume compares): an attempt
    # that adopts ``shared`` has no Tester turn and no fresh probe (PGS._may_probe).
    return config.model_copy(update={"model": model})


def run_attempts(
    task: Task,
    config: RunConfig,
    output_dir: Path,
    attempts: AttemptsConfig | None = None,
    *,
    hooks: Iterable[RunHook] = (),
    global_stats: GlobalStats | None = None,
) -> RunResult:
    """Run ``task`` ``attempts.count`` times and keep the best patch (the module doc); with
    one attempt, :func:`run_task` itself. An error that ends an attempt ends the run (the
    finished attempts are kept for a resume)."""
    if attempts is None or attempts.count == 1:
        return run_task(task, config, output_dir, hooks=hooks, global_stats=global_stats)
    if config.pgs.feedback == "none":
        raise InputError(
            "--attempts chooses by the PGS check: pass --feedback io, io-min, property or "
            "property-min"
        )
    hook = Hooks(hooks)
    hook.on_start(task, config)
    forward = _AttemptHook(hook)
    done: list[tuple[int, RunRecord]] = []
    shared: SharedProperties | None = None
    spent, stopped = 0.0, None
    for k in range(1, attempts.count + 1):
        paths = attempt_paths(output_dir, task.instance_id, k)
        data = _finished(paths)
        if data is None:
            if attempts.cost_limit and spent >= attempts.cost_limit:
                stopped = f"the attempts' cost limit of ${attempts.cost_limit:g} was reached"
                break
            forward.prefix = f"attempt {k}/{attempts.count}"
            run_task(
                task,
                attempt_config(config, attempts, k, spent),
                output_dir,
                hooks=[forward],
                global_stats=global_stats,
                paths=paths,
                shared=shared,
            )
            data = RunRecord.read(paths.traj)
        else:
            hook.on_status(f"attempt {k}/{attempts.count}: finished before, kept")
        record = data.pgs_record
        if shared is None and config.pgs.feedback not in ("io", "io-min"):
            shared = SharedProperties.from_record(record, k)
        done.append((k, data))
        spent += costs(data)[0]
        if record.verdict in attempts.stop_on and k < attempts.count:
            stopped = f"attempt {k}'s verdict is {record.verdict} (early stop)"
            break
    hook.on_status("checking every attempt's patch by the same evidence")
    own = dataclasses.replace(task, own=(*task.own, output_dir / task.instance_id))
    selection = select(own, config, done, shared, hook)
    selection.count, selection.ran, selection.stopped = attempts.count, len(done), stopped
    selection.total_cost = spent
    return _write_chosen(task, config, output_dir, done, selection, hook)


def select(
    task: Task,
    config: RunConfig,
    done: list[tuple[int, RunRecord]],
    shared: SharedProperties | None,
    hooks: RunHook,
) -> AttemptsRecord:
    """Check every attempt's final patch in one sandbox, by the same properties, related
    tests and inputs, and choose (:func:`agent.pgs.selection.choose`). A single attempt (an
    early stop) keeps its own last check as its evidence: there is nothing to compare."""
    if len(done) == 1:
        return _alone(*done[0], shared)
    box = open_sandbox(
        config, task.repo, uuid.uuid4().hex[:12], hooks, task.image_spec, leave_out=task.own
    )
    candidates: list[Candidate] = []
    try:
        base = base_commit(box)
        checker = PGS(
            with_pinned_plugins(config.pgs, box),
            sandbox=box,
            toolset=Toolset.from_paths(config.tools.bundles),
            tester_model=get_model(config.model),
            counter=get_counter(config.model, config.pgs.tokenizer),
            trajectory=Trajectory(Path(os.devnull), replay_config={}),
            problem_statement=task.problem_statement,
            base=base,
            shared=shared,
        )
        if shared is None:  # no property set to share: the related tests alone judge
            checker.properties = {}
        patches = [data.info.submission or "" for _, data in done]
        repo_tests = None
        if not config.pgs.test_cmd:
            repo_tests = sorted({t for p in patches for t in related_tests(box, changed_files(p))})
        for (k, data), patch in zip(done, patches, strict=True):
            hooks.on_status(f"checking the patch of attempt {k}")
            candidates.append(_candidate(checker, k, data, patch, repo_tests))
        seed = checker.seed_for(1)
    except BaseException:
        close_after_error(box)
        raise
    box.close()
    chosen, reason, ties = choose(candidates)
    first = candidates[0].patch if candidates else ""
    return AttemptsRecord(
        candidates=candidates,
        chosen=chosen.attempt if chosen else None,
        reason=reason,
        ties=ties,
        shared_from=shared.attempt if shared else None,
        seed=seed,
        changed=chosen is not None and chosen.patch != first,
    )


def _alone(k: int, data: RunRecord, shared: SharedProperties | None) -> AttemptsRecord:
    """The record of a single attempt: its own last check is the evidence."""
    own = data.pgs_record
    patch = data.info.submission or ""
    last = own.rounds[-1] if own.rounds else None
    report = last.report if last is not None and last.report is not None else CheckReport()
    shows_bug = shared.shows_bug if shared is not None else set()
    found = evidence(k, patch, report, shows_bug, own.verdict, own.verdict_reason or "")
    found = found.model_copy(update=_about(data))
    _, reason, ties = choose([found])
    return AttemptsRecord(
        candidates=[found],
        chosen=k,
        reason=reason + "; its own last check is the evidence",
        ties=ties,
        shared_from=shared.attempt if shared else None,
        seed=last.seed if last is not None else None,
    )


def _about(data: RunRecord) -> dict[str, Any]:
    """What a candidate records of its own run."""
    own = data.pgs_record
    temperature = (data.replay_config.get("model") or {}).get("temperature")
    cost, tester = costs(data)
    return {
        "exit_status": data.info.exit_status,
        "own_verdict": own.verdict,
        "cost": cost,
        "tester_cost": tester,
        "temperature": temperature,
    }


def _candidate(
    checker: PGS, k: int, data: RunRecord, patch: str, repo_tests: list[str] | None
) -> Candidate:
    about = _about(data)
    checker.checks_run = 0  # every candidate meets the inputs of the same seed
    round_record = RoundRecord(round=k, patch=patch)
    try:
        report = checker.check(patch, round_record, repo_tests=repo_tests)
    except Exception as e:  # one candidate that cannot be checked is not chosen, nothing more
        return Candidate(
            attempt=k,
            patch=patch,
            verdict="unchecked",
            verdict_reason=f"the check could not run: {e}",
            error=str(e)[:500],
            **about,
        )
    verdict, why = checker.verdict_of(report, round_record)
    found = evidence(k, patch, report, checker.shows_bug, verdict, why)
    return found.model_copy(update={**about, "tests_changed": round_record.tests_changed})


def _write_chosen(
    task: Task,
    config: RunConfig,
    output_dir: Path,
    done: list[tuple[int, RunRecord]],
    selection: AttemptsRecord,
    hooks: RunHook,
) -> RunResult:
    """The main ``.traj`` (the chosen attempt's, with the ``attempts`` record), ``.patch``
    and ``.pred``."""
    data = dict(done)[selection.chosen or done[0][0]]
    paths = output_paths(output_dir, task.instance_id)
    traj = Trajectory(paths.traj, replay_config={}, redactor=Redactor.for_config(config))
    traj.record = data.model_copy(update={"attempts": selection})
    chosen = next((c for c in selection.candidates if c.attempt == selection.chosen), None)
    submission = chosen.patch if chosen else ""
    result = RunResult(
        exit_status=traj.info.exit_status or "exit_error",
        submission=submission,
        steps=traj.info.steps or 0,
        trajectory=traj,
    )
    write_results(paths, task, config, traj, submission)
    hooks.on_done(result, paths)
    return result


def summary_lines(trajectory: Trajectory) -> list[str]:
    """What ``pgs run`` prints about the attempts: one line each (status, verdicts, cost),
    the total, the choice and why."""
    record = trajectory.record.attempts
    if record is None:
        return []
    lines = []
    for c in record.candidates:
        mark = "*" if c.attempt == record.chosen else " "
        tester = f", Tester ${c.tester_cost:.4f}" if c.tester_cost else ""
        temp = f", temperature {c.temperature:g}" if c.temperature is not None else ""
        lines.append(
            f" {mark} attempt {c.attempt}: {c.exit_status}, own verdict {c.own_verdict}, "
            f"checked {c.verdict} ({c.issue_passed}/{c.issue_total} issue properties, "
            f"{len(c.broken)} broken, agreement {c.agreement}, {c.patch_lines} lines); "
            f"cost ${c.cost:.4f}{tester}{temp}"
        )
    head = (
        f"attempts: {record.ran} of {record.count} ran"
        + (f" ({record.stopped})" if record.stopped else "")
        + f"; total cost ${record.total_cost:.4f}; properties written once, by attempt "
        f"{record.shared_from}"
    )
    return [head, *lines, f"  chosen: {record.reason}"]
