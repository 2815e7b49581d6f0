"""``pgs batch``: run the agent over SWE-bench instances, N at a time, resumably.

Each instance gets a working tree at ``base_commit`` (cloned from the mirror into a temporary
folder, sharing its objects), its instance image (:mod:`agent.swebench`), and one
:func:`agent.run.run_task.run_task` in its own container, with the repository at ``/testbed``. All
instances share one :class:`~agent.models.GlobalStats`, so ``--model.total-cost-limit`` caps
the whole batch: no instance starts once it is reached.

Files, in ``--output-dir``: ``<id>/<id>.traj`` / ``.patch`` / ``.pred`` per instance, and
``preds.json`` (a dict keyed by instance id, the harness's format), read, merged and rewritten
atomically under a lock on the folder after each instance (:mod:`agent.core.locks`), so a
Ctrl-C or a kill never loses a finished prediction, and two batches (or ``pgs run``) writing
into one folder keep each other's. Each instance is claimed (a lock on its folder, by the
driver) for its run: one another process is running is skipped. Every file
and progress line goes through the run's redactor (:mod:`agent.core.secrets`). Each
prediction also records its feedback mode and what it cost (:func:`agent.pgs.compare.
prediction_fields`: ``pgs_mode``, ``pgs_verdict``, ``pgs_rounds``, ``pgs_feedback_tokens``,
``cost``), which ``pgs report`` compares. The SWE-bench harness ignores these keys: swebench
4.1's ``get_predictions_from_file`` only checks that each prediction is a dict with an
``instance_id``, and ``run_evaluation`` / ``grading`` / ``reporting`` read only
``instance_id``, ``model_name_or_path`` and ``model_patch`` by name.

Resume: an instance whose ``.traj`` holds an exit status (other than ``interrupted``) is
skipped and its ``.pred`` kept in ``preds.json``; ``--redo`` runs it again. A finished run made
with another model or ablation setting (:func:`result_setting`) is refused: skipping it would
mix two settings in one folder. A crash in one instance is recorded as ``exit_error`` with its
message in the ``.traj`` and the batch goes on. A crash of the infrastructure (:data:`RETRIED`:
the model endpoint after its retries, Docker, an image build, the disk, a repository that
could not be found, cloned or checked out at its base commit: :class:`~agent.errors.SetupFailed`)
is not the instance's result: no prediction, and a resume runs it again; what failed is on its
line on the terminal and in ``batch.log``; ``stop_after`` of them in a row with the
same error stop the batch (:attr:`Batch.halted`), leaving the rest untouched. So is a mistake
in the command that shows only once an instance runs (:data:`MISTAKES`: a tool bundle whose
install.sh fails, a config error): every instance would fail the same way.

Ctrl-C (or SIGTERM, or SIGHUP: :mod:`agent.cli.signals`) once: no new instance starts, the
running ones finish, exit code 130; twice: stop now (containers of running instances are
removed; a repeated SIGHUP is ignored). Each instance's
progress row is a run hook (:class:`agent.swebench.progress.SlotHook`); the command itself is
:mod:`agent.cli.batch`.

Where instances run is an :class:`~agent.swebench.executors.Executor`: threads here (the default),
or Ray tasks on a cluster (``--executor ray``), which run :func:`run_detached` in a scratch folder
on their node and return its files; the driver writes them (:meth:`Batch.land`, the ``.traj`` last,
since it marks the instance finished) and ``preds.json``, and stops submitting once the total cost
reaches ``--model.total-cost-limit`` (each task carries the budget left). Only the driver
writes into the output folder, and holds the claims."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.live import Live

from agent.core.locks import claim, folder_lock
from agent.core.secrets import Redactor
from agent.core.trajectory_file import write_atomic
from agent.errors import (
    INFRASTRUCTURE_ERRORS,
    INTERRUPTED,
    AuthenticationFailed,
    Claimed,
    ConfigError,
    InputError,
    ModelNotFound,
    RateLimited,
    RunFailed,
    ServerError,
    SetupFailed,
    ToolConfigError,
    ToolInstallError,
    Unreachable,
)
from agent.models import GlobalStats, model_kind
from agent.pgs.compare import ablation_of, prediction_fields
from agent.pgs.config import ablation
from agent.record.trajectory import Info, RunRecord
from agent.run.attempts import AttemptsConfig, remove_attempts, run_attempts
from agent.run.config import RunConfig
from agent.run.hooks import Hooks, RunHook
from agent.run.outputs import make_output_dir, output_paths
from agent.run.runlog import BatchLog, RunLog
from agent.run.task import Task
from agent.swebench import (
    TESTBED,
    Environments,
    Instance,
    find_mirror,
    official,
    working_tree,
)
from agent.swebench.executors import Executor, LocalExecutor
from agent.swebench.progress import Progress, SlotHook
from envs import scratch
from envs.docker_util import remove_own_containers
from envs.errors import EnvError

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
logger = logging.getLogger(__name__)
#: The batch's exit statuses, as SWE-agent writes them: {instances_by_exit_status: {status:
#: [ids]}, total_cost}, rewritten as instances finish.
EXIT_STATUSES = "run_batch_exit_statuses.yaml"

#: Exit statuses that do not count as finished: the instance runs again on resume.
UNFINISHED = {"interrupted"}
#: Errors of the machine or of the model endpoint, not of the agent: an instance they ended
#: has no result (it is not finished, a resume runs it again), and several in a row of the same
#: one stop the batch (``--stop-after``). The model's are raised after its retries; a
#: repository that could not be prepared (:class:`SetupFailed`) is the data's or the machine's.
RETRIED: tuple[type[Exception], ...] = (
    *INFRASTRUCTURE_ERRORS,
    SetupFailed,
    Unreachable,
    ServerError,
    RateLimited,
    AuthenticationFailed,
    ModelNotFound,
)
#: Mistakes in the command that show only once an instance runs (a tool bundle whose
#: install.sh fails in the sandbox, a config the run rejects): the same for every instance, so,
#: as :data:`RETRIED`, not the instance's result, run again on resume, and counted towards
#: ``--stop-after``.
MISTAKES: tuple[type[Exception], ...] = (ConfigError, ToolConfigError, ToolInstallError)
#: What an instance that failed for infrastructure shows as in the exit statuses.
INFRASTRUCTURE = "exit_error (infrastructure)"
#: What an instance that failed on a mistake in the command (:data:`MISTAKES`) shows as.
MISTAKE = "exit_error (mistake in the command)"


def infrastructure_failure(error: BaseException) -> str | None:
    """``"<Error>: <first line>"`` when ``error`` (or the cause of a :class:`RunFailed`) is one
    of :data:`RETRIED` or :data:`MISTAKES`; None for any other error (the instance's own
    result)."""
    if isinstance(error, RunFailed) and isinstance(error.__cause__, Exception):
        error = error.__cause__
    if not isinstance(error, (*RETRIED, *MISTAKES)):
        return None
    first = (str(error).splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"[:300]


def _failed_for_infrastructure(info: Info) -> bool:
    """A ``.traj``'s ``info`` of a run an infrastructure error ended: marked by the batch, or
    (a ``pgs run``, a batch before the mark) its recorded error names one of :data:`RETRIED`."""
    if info.exit_status != "exit_error":
        return False
    if info.infrastructure or info.mistake:
        return True
    name = (info.error or "").split(":", 1)[0]
    return name in {cls.__name__ for cls in _classes((*RETRIED, *MISTAKES))}


def _classes(roots: tuple[type[Exception], ...]) -> list[type[Exception]]:
    """``roots`` and their subclasses (SandboxClosed is a SandboxError)."""
    classes, found = list(roots), []
    while classes:
        cls = classes.pop()
        found.append(cls)
        classes.extend(cls.__subclasses__())
    return found


def _is_mistake(error: BaseException) -> bool:
    """``error`` (or the cause of a :class:`RunFailed`) is one of :data:`MISTAKES`."""
    if isinstance(error, RunFailed) and isinstance(error.__cause__, Exception):
        error = error.__cause__
    return isinstance(error, MISTAKES)


def _read_traj(traj_path: Path) -> RunRecord | None:
    try:
        return RunRecord.read(traj_path)
    except (OSError, ValueError):  # not JSON, or not a trajectory (ValidationError)
        return None


def finished_status(traj_path: Path) -> str | None:
    """The exit status recorded in a ``.traj``, or None if it has none (or cannot be read), or
    the run was interrupted or failed for infrastructure (:data:`RETRIED`)."""
    data = _read_traj(traj_path)
    return _status_of(data.info) if data is not None else None


def _status_of(info: Info) -> str | None:
    status = info.exit_status
    if not status or status in UNFINISHED or _failed_for_infrastructure(info):
        return None
    return status


def _instances(n: int) -> str:
    return f"{n} instance{'' if n == 1 else 's'}"


def result_setting(config: RunConfig) -> dict[str, Any]:
    """What changes an instance's result, by name: the model, and the feedback mode with the
    rest of the ablation setting (:func:`agent.pgs.config.ablation`)."""
    return {"model": config.model.name, **ablation(config.pgs).model_dump()}


def recorded_setting(data: RunRecord) -> dict[str, Any] | None:
    """:func:`result_setting` of the run a ``.traj`` holds; None when it does not say (a run
    that crashed before the agent started)."""
    model = (data.replay_config.get("model") or {}).get("name")
    setting = ablation_of(data)
    if not model or setting is None:
        return None
    return {"model": model, **setting.model_dump()}


@dataclass
class Batch:
    instances: list[Instance]
    config: RunConfig
    output_dir: Path
    envs: Environments
    hints: bool = False
    redo: bool = False
    workers: int = 1
    #: Stop once this many instances in a row failed for the same infrastructure error (0:
    #: never).
    stop_after: int = 3
    stats: GlobalStats = field(default_factory=GlobalStats)
    stop: threading.Event = field(default_factory=threading.Event)
    #: Set by a second interrupt: containers are being removed, the process is leaving.
    abandoning: threading.Event = field(default_factory=threading.Event)
    preds: dict[str, dict[str, Any]] = field(default_factory=dict)
    preds_lock: threading.Lock = field(default_factory=threading.Lock)
    #: Instances of this run that failed for infrastructure: what failed (:data:`RETRIED`).
    infrastructure: dict[str, str] = field(default_factory=dict)
    #: Why the batch stopped early (several instances in a row failed the same way), or None.
    halted: str | None = None
    #: The batch stopped early on a mistake in the command (:data:`MISTAKES`), not the machine.
    halted_by_mistake: bool = False
    #: Generator attempts per instance (``--attempts``, :mod:`agent.run.attempts`).
    attempts: AttemptsConfig = field(default_factory=AttemptsConfig)

    @cached_property
    def redactor(self) -> Redactor:
        """What every file and line the batch writes goes through (:mod:`agent.core.secrets`)."""
        return Redactor.for_config(self.config)

    def write(self, path: Path, text: str) -> None:
        write_atomic(path, self.redactor.redact(text))

    @property
    def preds_path(self) -> Path:
        return self.output_dir / "preds.json"

    # -- predictions ---------------------------------------------------------------------------

    def load_preds(self) -> None:
        self.preds = self._read_preds()

    def _read_preds(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.preds_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}
        return (
            {str(k): v for k, v in data.items() if isinstance(v, dict)}
            if isinstance(data, dict)
            else {}
        )

    def save_pred(self, pred: dict[str, Any] | None, instance_id: str | None = None) -> None:
        """Put ``pred`` into ``preds.json`` (None: take ``instance_id`` out), read, merged and
        written under the folder's lock: another batch or thread writing into the same folder
        keeps its predictions (:mod:`agent.core.locks`)."""
        iid = str(pred["instance_id"]) if pred is not None else str(instance_id)
        with self.preds_lock, folder_lock(self.output_dir):
            preds = self._read_preds()
            if pred is None and iid not in preds:
                self.preds = preds
                return
            if pred is None:
                del preds[iid]
            else:
                preds[iid] = pred
            self.write(self.preds_path, json.dumps(preds, indent=2, ensure_ascii=False))
            self.preds = preds

    def save_status(self, instance_id: str, status: str) -> None:
        """Put ``instance_id`` under ``status`` in :data:`EXIT_STATUSES` (out of any other it
        was under, from an earlier run of the folder), read, merged and rewritten atomically
        under the folder's lock, as ``preds.json`` is."""
        path = self.output_dir / EXIT_STATUSES
        with self.preds_lock, folder_lock(self.output_dir):
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError):
                data = None
            found = data.get("instances_by_exit_status") if isinstance(data, dict) else None
            by_status: dict[str, list[str]] = {}
            for name, ids in (found if isinstance(found, dict) else {}).items():
                kept = [str(i) for i in ids or [] if str(i) != instance_id]
                if kept:
                    by_status[str(name)] = kept
            by_status.setdefault(status, []).append(instance_id)
            out = {
                "instances_by_exit_status": by_status,
                "total_cost": round(self.stats.total_cost, 6),
            }
            self.write(path, yaml.safe_dump(out, sort_keys=False))

    # -- one instance ------------------------------------------------------------------------

    def pending(self) -> tuple[list[Instance], list[str], list[str]]:
        """Instances to run, those skipped because they finished before (resume), and those
        run again because they failed for infrastructure before (:data:`RETRIED`).

        A finished run made with another model or ablation setting (:func:`result_setting`)
        is refused (:class:`InputError`): skipping it would mix two settings in one folder."""
        todo, skipped, retried = [], [], []
        wanted = result_setting(self.config)
        for instance in self.instances:
            paths = output_paths(self.output_dir, instance.instance_id)
            data = None if self.redo else _read_traj(paths["traj"])
            if data is not None and _failed_for_infrastructure(data.info):
                retried.append(instance.instance_id)
            if data is not None and _status_of(data.info):
                self._check_setting(paths["traj"], data, wanted)
                skipped.append(instance.instance_id)
                pred = self.preds.get(instance.instance_id)
                if pred is None and paths["pred"].exists():
                    with contextlib.suppress(OSError, json.JSONDecodeError):
                        pred = json.loads(paths["pred"].read_text(encoding="utf-8"))
                if isinstance(pred, dict) and "pgs_mode" not in pred:  # from before the fields
                    pred = self.prediction(instance, str(pred.get("model_patch") or ""))
                    self.write(paths["pred"], json.dumps(pred, indent=1))
                if isinstance(pred, dict) and pred != self.preds.get(instance.instance_id):
                    self.save_pred(pred)
            else:
                todo.append(instance)
        return todo, skipped, retried

    def _check_setting(self, traj: Path, data: RunRecord, wanted: dict[str, Any]) -> None:
        found = recorded_setting(data)
        if found is None or found == wanted:
            return
        key = next(k for k in wanted if found.get(k) != wanted.get(k))
        raise InputError(
            f"{self.output_dir} holds finished runs made with {key} {found.get(key)!r} "
            f"({traj.name}), this batch has {key} {wanted.get(key)!r}: pass another "
            "--output-dir, or --redo to run them again with this setting"
        )

    def run_one(self, instance: Instance, slot: int, progress: Progress) -> str:
        iid = instance.instance_id
        started = time.monotonic()
        hook = SlotHook(progress, slot, iid)
        limit = self.config.model.total_cost_limit
        if self.stop.is_set():
            return "not started"
        if limit and self.stats.total_cost >= limit:
            return "not started (total cost limit)"
        hook.on_status("starting")
        try:
            log_path = output_paths(self.output_dir, iid)["log"]
            with RunLog(log_path, this_thread=True) as log:  # this instance's lines only
                exit_status, patch = self._run(instance, Hooks([hook, log]))
        except KeyboardInterrupt:
            raise
        except Exception as e:
            if self.abandoning.is_set():  # its container went with the second interrupt
                self._mark_interrupted(instance)
                return "interrupted"
            exit_status, patch = "exit_error", self._record_crash(instance, e)
            failure = infrastructure_failure(e)
            if failure is not None:  # no result: no prediction, a resume runs it again
                exit_status = MISTAKE if _is_mistake(e) else INFRASTRUCTURE
                self.infrastructure[iid] = failure
        finally:
            with progress.lock:
                progress.slots.pop(slot, None)
        pred_path = output_paths(self.output_dir, iid)["pred"]
        if exit_status in (INFRASTRUCTURE, MISTAKE):
            pred_path.unlink(missing_ok=True)
            self.save_pred(None, iid)
        else:
            pred = self.prediction(instance, patch)
            self.write(pred_path, json.dumps(pred, indent=1))
            self.save_pred(pred)
        with progress.lock:
            progress.done += 1
            progress.failed += not exit_status.startswith("submitted")
            progress.durations.append(time.monotonic() - started)
            progress.statuses[exit_status] += 1
        return exit_status

    def prediction(self, instance: Instance, patch: str) -> dict[str, Any]:
        """The harness's three keys, plus the feedback mode and its cost from the ``.traj``."""
        traj_path = output_paths(self.output_dir, instance.instance_id)["traj"]
        data = _read_traj(traj_path) or RunRecord()
        return {
            "instance_id": instance.instance_id,
            "model_name_or_path": self.config.model.name,
            "model_patch": patch,
            **prediction_fields(data, mode=self.config.pgs.feedback),
        }

    def _run(self, instance: Instance, hook: RunHook) -> tuple[str, str]:
        config = self.config
        status = hook.on_status
        with scratch.temporary_directory(f"pgs-{instance.instance_id[:40]}-") as tmp:
            status("preparing the repository")
            tree = self._prepare(instance, Path(tmp) / "repo", status)
            if config.sandbox.takes_image:  # the instance image, the repository at /testbed
                image = self.envs.image(instance, status)
                update: dict[str, Any] = {"image": image.tag, "repo_path": TESTBED}
                if self.envs.image_source == "official":
                    env = config.sandbox.model_dump().get("env") or {}
                    update["python"] = official.SANDBOX_PYTHON
                    update["env"] = {**official.SANDBOX_ENV, **env}
                sandbox = config.sandbox.updated(**update)
                config = config.model_copy(update={"sandbox": sandbox})
            problem = instance.problem_statement
            if self.hints and instance.hints_text.strip():
                problem += f"\n\nHints:\n{instance.hints_text.strip()}"
            task = Task(instance_id=instance.instance_id, problem_statement=problem, repo=tree)
            if self.redo:  # the attempts of an earlier run are not resumed
                remove_attempts(self.output_dir, instance.instance_id)
            result = run_attempts(
                task,
                config,
                self.output_dir,
                self.attempts,
                hooks=[hook],
                global_stats=self.stats,
            )
        return result.exit_status, result.submission

    def _prepare(self, instance: Instance, dest: Path, status: Any) -> Path:
        """The instance's working tree at ``base_commit`` in ``dest``; a repository that cannot
        be found, cloned or checked out here is :class:`SetupFailed` (no result, retried)."""
        try:
            mirror = find_mirror(instance, self.envs.repos_dir, status)
            return working_tree(instance, mirror, dest)
        except (InputError, EnvError) as e:  # InstanceError, MissingData; a clone, a checkout
            raise SetupFailed(f"the repository could not be prepared: {e}") from e

    def _record_crash(self, instance: Instance, error: Exception) -> str:
        """Leave a ``.traj`` (exit_error, the message) and a ``.patch``; the submitted patch."""
        paths = output_paths(self.output_dir, instance.instance_id)
        if isinstance(error, RunFailed) and isinstance(error.__cause__, Exception):
            error = error.__cause__  # the files are written; the error is what ended the run
        message = f"{type(error).__name__}: {error}"
        # the agent ran and saved its state before the crash, or nothing is there yet
        data = _read_traj(paths["traj"]) or RunRecord()
        info = data.info
        info.exit_status, info.error, info.instance_id = "exit_error", message, instance.instance_id
        if isinstance(error, RETRIED):  # not finished: resume runs it again
            info.infrastructure = True
        if isinstance(error, MISTAKES):  # the same: the command's, not the instance's
            info.mistake = True
        patch = info.submission or ""
        info.submission = patch
        self.write(paths["traj"], data.dumps())
        patch = self.redactor.redact(patch)
        self.write(paths["patch"], patch)
        return patch  # run_one writes the .pred

    # -- the batch -----------------------------------------------------------------------------

    def run(
        self, console: Console = err, executor: Executor | None = None
    ) -> tuple[Counter[str], list[str]]:
        """Run every pending instance; (exit statuses of this run, ids skipped by resume).
        What the batch logs goes to ``batch.log`` (each instance's own lines to its
        ``<id>.log``), its exit statuses to :data:`EXIT_STATUSES`."""
        make_output_dir(self.output_dir)
        with BatchLog(self.output_dir / "batch.log", self.redactor):
            logger.info(
                "batch of %s (%d workers) into %s: model %s, feedback %s",
                _instances(len(self.instances)),
                self.workers,
                self.output_dir,
                self.config.model.name,
                self.config.pgs.feedback,
            )
            statuses, skipped = self._run_all(console, executor)
            logger.info("batch ended: %s", dict(statuses.most_common()))
            return statuses, skipped

    def _run_all(
        self, console: Console, executor: Executor | None
    ) -> tuple[Counter[str], list[str]]:
        self.load_preds()
        todo, skipped, retried = self.pending()
        if skipped:
            console.print(f"resume: {len(skipped)} finished instances skipped (--redo reruns)")
        if retried:
            mistakes = [i for i in retried if self._failed_on_mistake(i)]
            cause = (
                "on a mistake in the command"
                if len(mistakes) == len(retried)
                else "for infrastructure"
                if not mistakes
                else "for infrastructure or on a mistake in the command"
            )
            console.print(
                f"resume: {_instances(len(retried))} retried: "
                f"{'they' if len(retried) > 1 else 'it'} failed {cause}"
            )
        executor = executor or LocalExecutor(self.workers)
        progress = Progress(total=len(todo), workers=self.workers, stats=self.stats)
        queue = deque(todo)
        free = list(range(self.workers))
        free_lock = threading.Lock()
        by_id = {i.instance_id: i for i in todo}
        slots: dict[str, int] = {}
        #: The instances this process holds (agent.core.locks.claim), released as they land.
        claims: dict[str, contextlib.ExitStack] = {}
        #: What failed, for the instances that ended last in a row for infrastructure.
        streak: list[str] = []

        def job(instance: Instance) -> str:
            with free_lock:
                slot = free.pop(0)
            try:
                return self.run_one(instance, slot, progress)
            finally:
                with free_lock:
                    free.append(slot)

        statuses: Counter[str] = Counter()
        interrupts = 0
        limit = self.config.model.total_cost_limit
        with Live(progress.render(), console=console, refresh_per_second=4) as live:
            while queue or executor.in_flight():
                try:
                    while queue and executor.in_flight() < self.workers:
                        if self.stop.is_set() or self.halted:
                            break
                        if limit and self.stats.total_cost >= limit:
                            break
                        instance = queue.popleft()
                        held = self._claim(instance)
                        if isinstance(held, str):
                            statuses[held] += 1
                            with progress.lock:
                                progress.total -= 1
                            live.console.print(f"{instance.instance_id}: {held}")
                            continue
                        claims[instance.instance_id] = held
                        if executor.shares_files:
                            executor.submit(instance.instance_id, job, instance)
                        else:
                            slots[instance.instance_id] = self._submit_detached(
                                executor, instance, progress
                            )
                    if not executor.in_flight():
                        break
                    done = executor.wait(0.25)
                except KeyboardInterrupt:
                    interrupts += 1
                    self.stop.set()
                    if interrupts >= 2:
                        self._abandon(executor, console)
                    console.print(
                        "interrupted: no new instance starts; the running ones finish "
                        "(Ctrl-C or SIGTERM again to stop now)"
                    )
                    continue
                for item in done:
                    if item.key in slots:
                        with progress.lock:
                            progress.slots.pop(slots.pop(item.key), None)
                    if item.error is not None:
                        status = f"not finished ({type(item.error).__name__}: {item.error})"
                        status = status.splitlines()[0][:200]
                    elif isinstance(item.value, Finished):
                        status = self.land(by_id[item.key], item.value, progress)
                    else:
                        status = str(item.value)
                    with contextlib.suppress(KeyError):
                        claims.pop(item.key).close()
                    statuses[status] += 1
                    if not status.startswith("not started"):
                        why = self.infrastructure.get(item.key)
                        line = f"{item.key}: {status}" + (f": {why}" if why else "")
                        logger.info("%s", line)
                        live.console.print(self.redactor.redact(line))
                        if not status.startswith(("skipped", "not finished")):
                            self.save_status(item.key, status)
                        self._count_failure(item.key, streak)
                live.update(progress.render())
            live.update(progress.render())
        executor.close()
        for held in claims.values():
            held.close()
        if queue:  # stopped, stopped early, or the total cost limit reached
            why = "" if self.stop.is_set() else " (stopped early)" if self.halted else None
            statuses[f"not started{' (total cost limit)' if why is None else why}"] += len(queue)
        return statuses, skipped

    def _failed_on_mistake(self, instance_id: str) -> bool:
        """The ``.traj`` of ``instance_id`` says a mistake in the command ended it."""
        data = _read_traj(output_paths(self.output_dir, instance_id)["traj"])
        if data is None:
            return False
        name = (data.info.error or "").split(":", 1)[0]
        return bool(data.info.mistake) or name in {c.__name__ for c in _classes(MISTAKES)}

    def _claim(self, instance: Instance) -> contextlib.ExitStack | str:
        """Hold ``instance`` in the output folder for its run (:func:`agent.core.locks.claim`);
        the status to report instead when another process runs it now or finished it since
        :meth:`pending` looked."""
        held = contextlib.ExitStack()
        try:
            held.enter_context(claim(self.output_dir, instance.instance_id))
        except Claimed:
            return "skipped: another pgs process is running it into this folder"
        traj = output_paths(self.output_dir, instance.instance_id)["traj"]
        if not self.redo and finished_status(traj):
            held.close()
            return "skipped: another pgs process finished it meanwhile"
        return held

    def _count_failure(self, instance_id: str, streak: list[str]) -> None:
        """Stop the batch (:attr:`halted`) once :attr:`stop_after` instances in a row failed
        for the same infrastructure error: the endpoint or Docker is down, the rest would
        fail the same way."""
        failure = self.infrastructure.get(instance_id)
        if failure is None:
            streak.clear()
            return
        if streak and streak[-1] != failure:
            streak.clear()
        streak.append(failure)
        if self.stop_after and len(streak) >= self.stop_after and not self.halted:
            name = failure.split(":", 1)[0]
            self.halted_by_mistake = any(name == cls.__name__ for cls in _classes(MISTAKES))
            why = "on a mistake in the command" if self.halted_by_mistake else "for infrastructure"
            self.halted = self.redactor.redact(
                f"stopped early: {_instances(len(streak))} in a row failed {why} "
                f"({failure}); fix it and rerun with --output-dir {self.output_dir}: they run "
                "again, and so do the instances not started"
            )

    # -- instances elsewhere (an executor whose workers do not share the output folder) --------

    def _submit_detached(self, executor: Executor, instance: Instance, progress: Progress) -> int:
        """Submit :func:`run_detached` with the budget left; the display slot it shows in."""
        # The driver's base URL travels with the task; the key stays in each node's environment.
        # (litellm's providers have their own URLs: only a base_url given travels.)
        update: dict[str, Any] = {}
        if model_kind(self.config.model) == "openai":
            update["base_url"] = self.config.model.resolved_base_url()
        limit = self.config.model.total_cost_limit
        if limit:
            update["total_cost_limit"] = max(limit - self.stats.total_cost, 1e-12)
        model = self.config.model.model_copy(update=update)
        config = self.config.model_copy(update={"model": model})
        executor.submit(
            instance.instance_id,
            run_detached,
            instance,
            config,
            self.envs,
            self.hints,
            self.attempts,
        )
        with progress.lock:
            slot = next(i for i in range(len(progress.slots) + 1) if i not in progress.slots)
            progress.slots[slot] = (instance.instance_id, "submitted to the cluster")
        return slot

    def land(self, instance: Instance, finished: Finished, progress: Progress) -> str:
        """Write what a detached run returned, as :meth:`run_one` would have written it."""
        if finished.exit_status.startswith("not started"):
            return finished.exit_status
        paths = output_paths(self.output_dir, instance.instance_id)
        folder = paths["traj"].parent
        for path in paths.values():  # an earlier run's file the new run did not write
            if path.name not in finished.files:
                path.unlink(missing_ok=True)
        if any("/" in name for name in finished.files):  # attempt-<k>/: only the new ones
            remove_attempts(self.output_dir, instance.instance_id)
        traj_name = paths["traj"].name
        for name, text in finished.files.items():
            if name != traj_name:
                self.write(folder / name, text)
        if traj_name in finished.files:  # last: it marks the instance finished
            self.write(paths["traj"], finished.files[traj_name])
        if finished.infrastructure is not None:  # no result: as run_one leaves it
            self.infrastructure[instance.instance_id] = finished.infrastructure
            self.save_pred(None, instance.instance_id)
        elif finished.pred is not None:
            self.save_pred(finished.pred)
        self.stats.total_cost += finished.cost
        self.stats.api_calls += finished.api_calls
        with progress.lock:
            progress.done += 1
            progress.failed += not finished.exit_status.startswith("submitted")
            progress.durations.append(finished.seconds)
            progress.statuses[finished.exit_status] += 1
        return finished.exit_status

    def _mark_interrupted(self, instance: Instance) -> None:
        """The ``.traj`` of a run cut by the second interrupt says so: a resume runs it again."""
        path = output_paths(self.output_dir, instance.instance_id)["traj"]
        with contextlib.suppress(OSError, ValueError):
            data = RunRecord.read(path)
            data.info.exit_status = "interrupted"
            self.write(path, data.dumps())

    def _abandon(self, executor: Executor, console: Console) -> None:
        """Second Ctrl-C: remove the containers this process started and leave at once."""
        self.abandoning.set()
        remove_own_containers()
        executor.abandon()
        console.print(f"stopped; finished predictions are in {self.preds_path}")
        os._exit(INTERRUPTED)


class Finished(BaseModel):
    """What :func:`run_detached` returns to the driver (pickled across a Ray cluster)."""

    model_config = ConfigDict(frozen=True)

    instance_id: str
    exit_status: str
    #: The files of ``<id>/`` by name (``.traj``, ``.patch``, ``.pred``, ...).
    files: dict[str, str]
    pred: dict[str, Any] | None
    cost: float
    api_calls: int
    seconds: float
    #: Where it ran: host and worker pid (the owner of its containers).
    worker: str
    #: What failed, when an infrastructure error ended it (:data:`RETRIED`).
    infrastructure: str | None = None


def run_detached(
    instance: Instance,
    config: RunConfig,
    envs: Environments,
    hints: bool = False,
    attempts: AttemptsConfig | None = None,
) -> Finished:
    """Run one instance in a scratch output folder, as :meth:`Batch.run_one` does, and return
    its files: the job of an executor whose workers do not see the driver's output folder.
    All the attempts of one instance run here, one after the other, in one worker: they share
    the Tester's properties and the image, and the choice needs every candidate."""
    import socket

    started = time.monotonic()
    iid = instance.instance_id
    with scratch.temporary_directory("pgs-detached-") as tmp:
        batch = Batch(
            instances=[instance],
            config=config,
            output_dir=Path(tmp),
            envs=envs,
            hints=hints,
            attempts=attempts or AttemptsConfig(),
        )
        exit_status = batch.run_one(instance, 0, Progress(total=1, workers=1, stats=batch.stats))
        folder = Path(tmp) / iid
        files = {  # attempt-<k>/ files by their relative path
            p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*") if folder.is_dir() else [])
            if p.is_file()
        }
    return Finished(
        instance_id=iid,
        exit_status=exit_status,
        files=files,
        pred=batch.preds.get(iid),
        cost=batch.stats.total_cost,
        api_calls=batch.stats.api_calls,
        seconds=time.monotonic() - started,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        infrastructure=batch.infrastructure.get(iid),
    )
