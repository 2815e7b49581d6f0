"""A run's files: where they go (:func:`output_paths`, a :class:`RunPaths`), the checks that
an output folder can take them (:func:`check_output_dir`, :func:`check_writable`, before any
image work), making the folder (:func:`make_output_dir`: git ignores what pgs makes), writing
the ``.traj``, ``.patch`` and ``.pred`` (:func:`write_results`), and what the run used
(:func:`usage`)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
import uuid
from dataclasses import dataclass, fields
from pathlib import Path

from agent.core.loop import RunResult
from agent.core.trajectory_file import Trajectory, write_atomic
from agent.errors import InputError, OutputNotWritten
from agent.pgs.compare import prediction_fields
from agent.run.config import RunConfig
from agent.run.task import Task
from envs.sandbox import RESULTS_GITIGNORE


def default_output_dir(model: str) -> Path:
    """``trajectories/<time>-<model>-<random>``: two runs started in the same second get two
    folders."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("trajectories") / f"{stamp}-{model.replace('/', '_')}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class RunPaths:
    """Where one run's files go (:func:`output_paths`): what hooks get in
    ``on_done(result, paths)`` and what the batch, ``pgs run`` and the attempts write to."""

    traj: Path
    patch: Path
    pred: Path
    #: The properties PGS kept, as a patch of test files.
    properties: Path
    #: Not results: the run's log and resolved config (agent.run.runlog; --config takes it).
    log: Path
    config: Path

    @property
    def folder(self) -> Path:
        return self.traj.parent

    def results(self) -> tuple[Path, ...]:
        """The files that say a run of the instance was made (its log and config alone do
        not)."""
        return (self.traj, self.patch, self.pred, self.properties)

    def files(self) -> dict[str, Path]:
        """Every file by its field's name, in the order above."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def moved(self, folder: Path) -> RunPaths:
        """The same file names in another folder (an attempt's, :mod:`agent.run.run_attempts`)."""
        return RunPaths(**{name: folder / path.name for name, path in self.files().items()})


def output_paths(output_dir: Path, instance_id: str) -> RunPaths:
    """``<output_dir>/<id>/<id>.traj`` and its siblings."""
    folder = output_dir / instance_id
    return RunPaths(
        traj=folder / f"{instance_id}.traj",
        patch=folder / f"{instance_id}.patch",
        pred=folder / f"{instance_id}.pred",
        properties=folder / f"{instance_id}.properties.patch",
        log=folder / f"{instance_id}.log",
        config=folder / f"{instance_id}.config.yaml",
    )


def first_missing(folder: Path) -> Path | None:
    """The topmost folder on the way to ``folder`` that does not exist yet (None: it exists)."""
    folder = Path(folder).absolute()
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    return missing[-1] if missing else None


def mark_as_results(folder: Path) -> None:
    """Give a folder pgs made for its results a ``.gitignore`` of ``*``
    (:data:`envs.sandbox.RESULTS_GITIGNORE`), as pytest's cache folder has: results written
    inside a repository (``./trajectories`` with ``--repo .``) are never a change git sees, and
    no sandbox copies them in. Only ever a folder pgs made: one that existed is left alone."""
    # "x": a run started beside this one may have written it first.
    with (
        contextlib.suppress(FileExistsError),
        open(Path(folder) / ".gitignore", "x", encoding="utf-8") as f,
    ):
        f.write(RESULTS_GITIGNORE)


def make_output_dir(output_dir: Path) -> None:
    """Make ``output_dir`` with its missing parents; the topmost one made is marked
    (:func:`mark_as_results`)."""
    made = first_missing(output_dir)
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    if made is not None:
        mark_as_results(made)


def check_output_dir(output_dir: Path, instance_id: str, *, overwrite: bool) -> None:
    """Refuse a folder that holds a previous run's results for ``instance_id``; with
    ``overwrite`` remove them, so that the folder never mixes two runs' files."""
    paths = output_paths(output_dir, instance_id)
    found = [path for path in paths.results() if path.exists()]
    if not found:
        return
    if not overwrite:
        names = ", ".join(p.name for p in found)
        raise InputError(
            f"{found[0].parent} already holds a run of {instance_id} ({names}): pass another "
            "--output-dir, or --overwrite to replace it"
        )
    for path in paths.files().values():
        path.unlink(missing_ok=True)


def _write_probe(folder: Path, probe: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.write(fd, b"x" * 4096)  # a folder on a full disk still takes an empty file
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def check_writable(output_dir: Path) -> None:
    """Refuse an output folder pgs cannot create or write in (read-only, a file in the way, no
    permission, full), before any image work: a run that cannot keep its results is not
    started. A probe file is created, written and removed, and so are the folders made for it."""
    folder = Path(output_dir).absolute()
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    probe = folder / f".pgs-write-check-{os.getpid()}"
    try:
        for attempt in range(3):
            try:
                _write_probe(folder, probe)
                break
            except (FileNotFoundError, FileExistsError):
                # Another pgs removed a folder it made for its probe (between our mkdir and
                # its check that the path is a folder, for FileExistsError); a file that is
                # really in the way is refused at once.
                if attempt == 2 or (folder.exists() and not folder.is_dir()):
                    raise
        for path in made:  # deepest first; the run makes them again
            with contextlib.suppress(OSError):  # in use by a run started beside this one
                path.rmdir()
    except OSError as e:
        reason = "a file is in the way" if e.errno in (errno.EEXIST, errno.ENOTDIR) else None
        raise InputError(
            f"cannot write results in {folder} ({reason or e.strerror or e}): pass a writable "
            "--output-dir"
        ) from None


def write_results(
    paths: RunPaths, task: Task, config: RunConfig, traj: Trajectory, submission: str
) -> None:
    """Write the ``.traj``, the ``.patch`` and the ``.pred``, each tried even when one before it
    failed (a full disk may still take a small file); a failure raises
    :class:`OutputNotWritten`, naming the first file not written and what was kept."""
    pred = {
        "instance_id": task.instance_id,
        "model_name_or_path": config.model.name,
        "model_patch": submission,
        **prediction_fields(traj.record, mode=config.pgs.feedback),
    }
    redact = traj.redactor.redact  # no host secret in any file (agent.core.secrets)
    kept: list[str] = []
    writes = [
        (paths.traj, traj.save),
        (paths.patch, lambda: write_atomic(paths.patch, redact(submission))),
        (paths.pred, lambda: write_atomic(paths.pred, redact(json.dumps(pred, indent=1)))),
    ]
    failed: tuple[Path, OSError] | None = None
    for path, write in writes:
        try:
            write()
        except OSError as e:
            failed = failed or (path, e)
            if path == paths.traj and path.exists():
                kept.append(f"{path.name} as of an earlier step")
            continue
        kept.append(path.name)
    if failed is not None:
        raise OutputNotWritten(failed[0], failed[1], kept, submission) from failed[1]


def usage(result: RunResult) -> dict[str, float]:
    """Tokens and cost of the whole run: the Generator's ``model_stats`` plus every Tester
    turn's (``pgs.tester``, ``pgs.tester_2``, ...), from its trajectory
    (:meth:`agent.record.trajectory.RunRecord.usage`)."""
    return result.trajectory.record.usage()
