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
with another model or ablation setting (:func:`~agent.swebench.resume.result_setting`) is
refused: skipping it would mix two settings in one folder. A crash in one instance is recorded
as ``exit_error`` with its message in the ``.traj`` and the batch goes on. A crash of the
infrastructure (:data:`~agent.swebench.resume.RETRIED`: the model endpoint after its retries,
Docker, an image build, the disk, a repository that could not be found, cloned or checked out at
its base commit: :class:`~agent.errors.SetupFailed`) is not the instance's result: no
prediction, and a resume runs it again; what failed is on its line on the terminal and in
``batch.log``; ``stop_after`` of them in a row with the same error stop the batch
(:attr:`Batch.halted`), leaving the rest untouched. So is a mistake in the command that shows
only once an instance runs (:data:`~agent.swebench.resume.MISTAKES`: a tool bundle whose
install.sh fails, a config error): every instance would fail the same way.

Ctrl-C (or SIGTERM, or SIGHUP: :mod:`agent.cli.signals`) once: no new instance starts, the
running ones finish, exit code 130; twice: stop now (containers of running instances are
removed; a repeated SIGHUP is ignored). The loop takes each signal between two of its steps
(:func:`_interrupts_taken`), never in the middle of landing an instance. Each instance's
progress row is a run hook (:class:`agent.swebench.progress.SlotHook`); the command itself is
:mod:`agent.cli.batch`. One instance's run is :mod:`agent.swebench.instance_run`.

Where instances run is an :class:`~agent.swebench.executors.Executor`: threads here (the
default), or Ray tasks on a cluster (``--executor ray``), which run
:func:`~agent.swebench.instance_run.run_detached` in a scratch folder on their node and return
its files; the driver writes them (:meth:`Batch.land`, the ``.traj`` last, since it marks the
instance finished) and ``preds.json``, and stops submitting once the total cost reaches
``--model.total-cost-limit`` (each task carries the budget left). Only the driver
writes into the output folder, and holds the claims."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from agent.core.locks import claim
from agent.errors import INTERRUPTED, STOP_SIGNALS, Claimed, InputError
from agent.models import model_kind
from agent.record.trajectory import RunRecord
from agent.run.outputs import make_output_dir, output_paths
from agent.run.run_attempts import remove_attempts
from agent.run.runlog import BatchLog
from agent.swebench import Instance
from agent.swebench.executors import Done, Executor, LocalExecutor
from agent.swebench.instance_run import Finished, InstanceRuns, run_detached
from agent.swebench.progress import Progress
from agent.swebench.resume import (
    MISTAKES,
    failed_for_infrastructure,
    finished_status,
    read_traj,
    recorded_setting,
    result_setting,
    status_of,
    with_subclasses,
)
from envs.docker_util import remove_own_containers

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
logger = logging.getLogger(__name__)


@contextmanager
def _interrupts_taken() -> Iterator[list[int]]:
    """Within the block, a stop signal that would raise KeyboardInterrupt (Ctrl-C; SIGTERM and
    SIGHUP under :func:`agent.cli.signals.stop_signals`) raises nothing: it is appended to the
    list the block gets, which the batch's loop reads between its steps. Raised wherever the
    main thread was, it could cut the loop's own bookkeeping in half: a job taken from the
    executor and never landed, an instance whose status is not saved or whose claim is held,
    or the batch ended outright when it should let the running instances finish. The handler
    it wraps still runs (the CLI's records which signal came); one that raises nothing (a
    repeated SIGHUP) is not counted; outside the main thread nothing changes."""
    taken: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield taken
        return

    def taking(previous: Callable[[int, Any], Any]) -> Callable[[int, Any], None]:
        def handler(signum: int, frame: Any) -> None:
            try:
                previous(signum, frame)
            except KeyboardInterrupt:
                taken.append(signum)

        return handler

    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for sig, old in previous.items():
        if callable(old):
            signal.signal(sig, taking(old))
    try:
        yield taken
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _instances(n: int) -> str:
    return f"{n} instance{'' if n == 1 else 's'}"


@dataclass
class _Running:
    """The state of one :meth:`Batch.run`'s scheduling loop."""

    queue: deque[Instance]
    progress: Progress
    #: The display slots free for the next instance run here.
    free: list[int]
    by_id: dict[str, Instance]
    free_lock: threading.Lock = field(default_factory=threading.Lock)
    #: The display slot of each instance run elsewhere (a detached job).
    slots: dict[str, int] = field(default_factory=dict)
    #: The instances this process holds (agent.core.locks.claim), released as they land.
    claims: dict[str, contextlib.ExitStack] = field(default_factory=dict)
    #: What failed, for the instances that ended last in a row for infrastructure.
    streak: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    interrupts: int = 0


@dataclass
class Batch(InstanceRuns):
    """Every instance of ``instances`` run, ``workers`` at a time, resumably (the module's
    docstring); one instance's run is :class:`~agent.swebench.instance_run.InstanceRuns`'."""

    workers: int = 1
    #: Stop once this many instances in a row failed for the same infrastructure error (0:
    #: never).
    stop_after: int = 3
    #: Why the batch stopped early (several instances in a row failed the same way), or None.
    halted: str | None = None
    #: The batch stopped early on a mistake in the command (:data:`MISTAKES`), not the machine.
    halted_by_mistake: bool = False

    # -- resume ----------------------------------------------------------------------------------

    def pending(self) -> tuple[list[Instance], list[str], list[str]]:
        """Instances to run, those skipped because they finished before (resume), and those
        run again because they failed for infrastructure before (:data:`RETRIED`).

        A finished run made with another model or ablation setting (:func:`result_setting`)
        is refused (:class:`InputError`): skipping it would mix two settings in one folder."""
        todo, skipped, retried = [], [], []
        wanted = result_setting(self.config)
        for instance in self.instances:
            paths = output_paths(self.output_dir, instance.instance_id)
            data = None if self.redo else read_traj(paths.traj)
            if data is not None and failed_for_infrastructure(data.info):
                retried.append(instance.instance_id)
            if data is not None and status_of(data.info):
                self._check_setting(paths.traj, data, wanted)
                skipped.append(instance.instance_id)
                pred = self.preds.get(instance.instance_id)
                if pred is None and paths.pred.exists():
                    with contextlib.suppress(OSError, json.JSONDecodeError):
                        pred = json.loads(paths.pred.read_text(encoding="utf-8"))
                if isinstance(pred, dict) and "pgs_mode" not in pred:  # from before the fields
                    pred = self.prediction(instance, str(pred.get("model_patch") or ""))
                    self.write(paths.pred, json.dumps(pred, indent=1))
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

    def _failed_on_mistake(self, instance_id: str) -> bool:
        """The ``.traj`` of ``instance_id`` says a mistake in the command ended it."""
        data = read_traj(output_paths(self.output_dir, instance_id).traj)
        if data is None:
            return False
        name = (data.info.error or "").split(":", 1)[0]
        return bool(data.info.mistake) or name in {c.__name__ for c in with_subclasses(MISTAKES)}

    # -- the batch -----------------------------------------------------------------------------

    def run(
        self, console: Console = err, executor: Executor | None = None
    ) -> tuple[Counter[str], list[str]]:
        """Run every pending instance; (exit statuses of this run, ids skipped by resume).
        What the batch logs goes to ``batch.log`` (each instance's own lines to its
        ``<id>.log``), its exit statuses to :data:`~agent.swebench.instance_run.EXIT_STATUSES`."""
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
        self._tell_resumed(console, skipped, retried)
        executor = executor or LocalExecutor(self.workers)
        progress = Progress(total=len(todo), workers=self.workers, stats=self.stats)
        run = _Running(
            queue=deque(todo),
            progress=progress,
            free=list(range(self.workers)),
            by_id={i.instance_id: i for i in todo},
        )
        live = Live(progress.render(), console=console, refresh_per_second=4)
        with _interrupts_taken() as interrupts, live:
            while run.queue or executor.in_flight():
                while interrupts:  # between two steps: never half an instance landed
                    interrupts.pop(0)
                    self._interrupted(executor, run, console)
                self._submit_next(executor, run, live.console)
                if not executor.in_flight():
                    break
                for item in executor.wait(0.25):
                    self._landed(item, run, live.console)
                live.update(progress.render())
            live.update(progress.render())
        if interrupts:  # one came as the last instance ended: the batch was stopped all the same
            self.stop.set()
        executor.close()
        for held in run.claims.values():
            held.close()
        if run.queue:  # stopped, stopped early, or the total cost limit reached
            why = "" if self.stop.is_set() else " (stopped early)" if self.halted else None
            reason = " (total cost limit)" if why is None else why
            run.statuses[f"not started{reason}"] += len(run.queue)
        return run.statuses, skipped

    def _tell_resumed(self, console: Console, skipped: list[str], retried: list[str]) -> None:
        """What resuming the folder skips, and what it runs again and why."""
        if skipped:
            console.print(f"resume: {len(skipped)} finished instances skipped (--redo reruns)")
        if not retried:
            return
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

    def _submit_next(self, executor: Executor, run: _Running, console: Console) -> None:
        """Claim and submit instances while a worker is free, unless the batch is stopped,
        stopped early or out of budget; one that another process runs or finished is
        reported and left."""
        limit = self.config.model.total_cost_limit
        while run.queue and executor.in_flight() < self.workers:
            if self.stop.is_set() or self.halted:
                break
            if limit and self.stats.total_cost >= limit:
                break
            instance = run.queue.popleft()
            held = self._claim(instance)
            if isinstance(held, str):
                run.statuses[held] += 1
                with run.progress.lock:
                    run.progress.total -= 1
                console.print(f"{instance.instance_id}: {held}")
                continue
            run.claims[instance.instance_id] = held
            if executor.shares_files:
                executor.submit(instance.instance_id, functools.partial(self._job, run), instance)
            else:
                slot = self._submit_detached(executor, instance, run.progress)
                run.slots[instance.instance_id] = slot

    def _job(self, run: _Running, instance: Instance) -> str:
        """:meth:`run_one` in a free display slot (an executor that shares the folder)."""
        with run.free_lock:
            slot = run.free.pop(0)
        try:
            return self.run_one(instance, slot, run.progress)
        finally:
            with run.free_lock:
                run.free.append(slot)

    def _interrupted(self, executor: Executor, run: _Running, console: Console) -> None:
        """Ctrl-C (SIGTERM, SIGHUP) once: no new instance starts; twice: stop now."""
        run.interrupts += 1
        self.stop.set()
        if run.interrupts >= 2:
            self._abandon(executor, console)
        console.print(
            "interrupted: no new instance starts; the running ones finish "
            "(Ctrl-C or SIGTERM again to stop now)"
        )

    def _landed(self, item: Done, run: _Running, console: Console) -> None:
        """A job that ended: its files written if it ran elsewhere, its claim released, its
        status counted, shown, logged and recorded, the failures in a row counted."""
        if item.key in run.slots:
            with run.progress.lock:
                run.progress.slots.pop(run.slots.pop(item.key), None)
        if item.error is not None:
            status = f"not finished ({type(item.error).__name__}: {item.error})"
            status = status.splitlines()[0][:200]
        elif isinstance(item.value, Finished):
            status = self.land(run.by_id[item.key], item.value, run.progress)
        else:
            status = str(item.value)
        with contextlib.suppress(KeyError):
            run.claims.pop(item.key).close()
        run.statuses[status] += 1
        if status.startswith("not started"):
            return
        why = self.infrastructure.get(item.key)
        line = f"{item.key}: {status}" + (f": {why}" if why else "")
        logger.info("%s", line)
        console.print(self.redactor.redact(line))
        if not status.startswith(("skipped", "not finished")):
            self.save_status(item.key, status)
        self._count_failure(item.key, run.streak)

    def _claim(self, instance: Instance) -> contextlib.ExitStack | str:
        """Hold ``instance`` in the output folder for its run (:func:`agent.core.locks.claim`);
        the status to report instead when another process runs it now or finished it since
        :meth:`pending` looked."""
        held = contextlib.ExitStack()
        try:
            held.enter_context(claim(self.output_dir, instance.instance_id))
        except Claimed:
            return "skipped: another pgs process is running it into this folder"
        traj = output_paths(self.output_dir, instance.instance_id).traj
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
            self.halted_by_mistake = any(name == cls.__name__ for cls in with_subclasses(MISTAKES))
            why = "on a mistake in the command" if self.halted_by_mistake else "for infrastructure"
            self.halted = self.redactor.redact(
                f"stopped early: {_instances(len(streak))} in a row failed {why} "
                f"({failure}); fix it and rerun with --output-dir {self.output_dir}: they run "
                "again, and so do the instances not started"
            )

    def _abandon(self, executor: Executor, console: Console) -> None:
        """Second Ctrl-C: remove the containers this process started and leave at once."""
        self.abandoning.set()
        remove_own_containers()
        executor.abandon()
        console.print(f"stopped; finished predictions are in {self.preds_path}")
        os._exit(INTERRUPTED)

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
        folder = paths.folder
        for path in paths.files().values():  # an earlier run's file the new run did not write
            if path.name not in finished.files:
                path.unlink(missing_ok=True)
        if any("/" in name for name in finished.files):  # attempt-<k>/: only the new ones
            remove_attempts(self.output_dir, instance.instance_id)
        traj_name = paths.traj.name
        for name, text in finished.files.items():
            if name != traj_name:
                self.write(folder / name, text)
        if traj_name in finished.files:  # last: it marks the instance finished
            self.write(paths.traj, finished.files[traj_name])
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
