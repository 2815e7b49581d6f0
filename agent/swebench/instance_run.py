"""One instance of ``pgs batch`` run into the batch's output folder
(:meth:`InstanceRuns.run_one`): its working tree and image,
:func:`agent.run.run_attempts.run_attempts`,
its ``.pred``, a crash recorded in its ``.traj``, and ``preds.json`` and the exit statuses
merged under the folder's lock. :class:`~agent.swebench.scheduler.Batch` schedules these runs;
:func:`run_detached` runs one in a scratch folder for an executor whose workers do not share
the output folder, and returns its files (:class:`Finished`)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from agent.core.locks import folder_lock
from agent.core.secrets import Redactor
from agent.core.trajectory_file import write_atomic
from agent.errors import InputError, RunFailed, SetupFailed
from agent.models import GlobalStats
from agent.pgs.compare import prediction_fields
from agent.record.trajectory import RunRecord
from agent.run.config import RunConfig
from agent.run.hooks import Hooks, RunHook
from agent.run.outputs import output_paths
from agent.run.run_attempts import AttemptsConfig, remove_attempts, run_attempts
from agent.run.runlog import RunLog
from agent.run.task import Task
from agent.swebench import TESTBED, Environments, Instance, find_mirror, official, working_tree
from agent.swebench.progress import Progress, SlotHook
from agent.swebench.resume import (
    INFRASTRUCTURE,
    MISTAKE,
    MISTAKES,
    RETRIED,
    infrastructure_failure,
    is_mistake,
    read_traj,
)
from envs import scratch
from envs.errors import EnvError

#: The batch's exit statuses, as SWE-agent writes them: {instances_by_exit_status: {status:
#: [ids]}, total_cost}, rewritten as instances finish.
EXIT_STATUSES = "run_batch_exit_statuses.yaml"


@dataclass
class InstanceRuns:
    """What running one instance of a batch needs and leaves: the batch's settings, the shared
    cost, the stop signals, its predictions and the instances that failed for infrastructure."""

    instances: list[Instance]
    config: RunConfig
    output_dir: Path
    envs: Environments
    hints: bool = False
    redo: bool = False
    stats: GlobalStats = field(default_factory=GlobalStats)
    stop: threading.Event = field(default_factory=threading.Event)
    #: Set by a second interrupt: containers are being removed, the process is leaving.
    abandoning: threading.Event = field(default_factory=threading.Event)
    preds: dict[str, dict[str, Any]] = field(default_factory=dict)
    preds_lock: threading.Lock = field(default_factory=threading.Lock)
    #: Instances of this run that failed for infrastructure: what failed (:data:`RETRIED`).
    infrastructure: dict[str, str] = field(default_factory=dict)
    #: Generator attempts per instance (``--attempts``, :mod:`agent.run.run_attempts`).
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
            log_path = output_paths(self.output_dir, iid).log
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
                exit_status = MISTAKE if is_mistake(e) else INFRASTRUCTURE
                self.infrastructure[iid] = failure
        finally:
            with progress.lock:
                progress.slots.pop(slot, None)
        pred_path = output_paths(self.output_dir, iid).pred
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
        traj_path = output_paths(self.output_dir, instance.instance_id).traj
        data = read_traj(traj_path) or RunRecord()
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
        data = read_traj(paths.traj) or RunRecord()
        info = data.info
        info.exit_status, info.error, info.instance_id = "exit_error", message, instance.instance_id
        if isinstance(error, RETRIED):  # not finished: resume runs it again
            info.infrastructure = True
        if isinstance(error, MISTAKES):  # the same: the command's, not the instance's
            info.mistake = True
        patch = info.submission or ""
        info.submission = patch
        self.write(paths.traj, data.dumps())
        patch = self.redactor.redact(patch)
        self.write(paths.patch, patch)
        return patch  # run_one writes the .pred

    def _mark_interrupted(self, instance: Instance) -> None:
        """The ``.traj`` of a run cut by the second interrupt says so: a resume runs it again."""
        path = output_paths(self.output_dir, instance.instance_id).traj
        with contextlib.suppress(OSError, ValueError):
            data = RunRecord.read(path)
            data.info.exit_status = "interrupted"
            self.write(path, data.dumps())


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
    """Run one instance in a scratch output folder, as :meth:`InstanceRuns.run_one` does, and return
    its files: the job of an executor whose workers do not see the driver's output folder.
    All the attempts of one instance run here, one after the other, in one worker: they share
    the Tester's properties and the image, and the choice needs every candidate."""
    import socket

    started = time.monotonic()
    iid = instance.instance_id
    with scratch.temporary_directory("pgs-detached-") as tmp:
        batch = InstanceRuns(
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
