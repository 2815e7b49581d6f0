"""``pgs eval``: grade predictions the way the SWE-bench harness does, with our own images.

For each prediction (:func:`~agent.swebench.run_instance.evaluate_one`): a fresh container of
the instance image (network off unless ``network``); the model patch, written as the harness
writes it, is applied with the installed swebench's own commands, read at run time
(:mod:`agent.swebench.patching`): ``run_evaluation.GIT_APPLY_CMDS`` (the harness run on Docker:
tried in order in the same tree, the first that exits 0 wins), or with ``commands="cloud"`` the
two commands of its Modal harness (``git apply -v``, then ``patch --batch --fuzz=5 -p1 -i``),
the one sb-cli reports come from. A patch that carries the image's setup changes (made in a
published image that left them in the work tree) goes onto the tree before the setup commit, as
the official evaluation applied such patches; files a patch creates that the install left
untracked in the tree (requests' ``build/lib``) are removed first, as the official evaluation's
tree has none. The instance's evaluation script applies ``test_patch`` and runs the
FAIL_TO_PASS and PASS_TO_PASS tests; swebench's log parser and rules grade the log
(:func:`~agent.swebench.grading.grade_test_output`). Output (:mod:`agent.swebench.reports`), in
the harness's layout under ``--report-dir`` (default ``logs/run_evaluation/<run_id>``, the
harness's): ``<model>/<instance>/{report.json, test_output.txt, run_instance.log, patch.diff,
eval.sh}`` (``run_instance.log``: what was done, :class:`~agent.swebench.reports.InstanceLog`)
and the summary ``<model>.<run_id>.json`` with the keys of the harness's ``make_run_report``
(``total_instances`` counts the dataset given, after ``--instance-ids``).

As the harness does, a prediction graded before in the same report folder (its report.json
there, beside a patch.diff that is the same patch) is not graded again
(:func:`~agent.swebench.reports.earlier_outcome`); ``force`` grades it again, ``rewrite``
(``--rewrite-reports``) grades again the test output there and runs nothing
(:func:`~agent.swebench.run_instance.regrade`). An instance that timed out, or that failed
before it was graded (``error.txt``, no report.json), is graded again.

As in the harness, an empty patch is not run and is listed under ``empty_patch_ids``; pgs still
writes its report.json (``patch_exists: false``, not resolved), so every prediction has one. A
patch that no command applies, a test run that times out or an environment failure is an error
(``error_ids``). pgs adds to report.json, under ``error``, why a patch could not be graded
("malformed patch: ...", "patch does not apply: ..."), and to the summary ``errors`` and
``deviations`` (environment differences from the official images, e.g. a substituted Python).

An instance whose commit is not in the repository copy (or cannot be checked out of it: an
incomplete snapshot, an outdated mirror) is *not checkable here* too, with that reason: a problem
of the data, not of the patch.

An unresolved instance whose test output shows a failed name resolution or a refused connection
is *not checkable here* (:func:`~agent.swebench.grading.network_failure`): its tests needed a
service this run could not reach, so the label says nothing about the patch. It is listed under
``not_checkable_ids`` with the reason in ``not_checkable`` (as the harness lists ``error_ids``),
never under ``unresolved_ids``; its report.json carries the reason under ``not_checkable``.

Ctrl-C, SIGTERM or SIGHUP (:mod:`agent.cli.signals`) stops an evaluation at once, as it stops
``pgs run``: no new instance starts, the containers this process started are removed (so the
running test runs and image build steps end within moments, and their jobs remove their
temporary trees; :data:`STOP_GRACE` bounds the wait), the instances graded so far keep their
reports and are in the summary, which lists the ones stopped under ``interrupted_ids`` (their
``run_instance.log`` says so; no ``error.txt``), and :class:`~agent.errors.Interrupted` says
what was kept (exit code 130). A rerun with the same run id and report folder grades only the
rest.

Where predictions are graded is an :class:`~agent.swebench.executors.Executor`: threads here (the
default), or Ray tasks (``--executor ray``) that grade in a scratch folder on their node
(:func:`evaluate_detached`) and return the files; the driver writes them and the summary.
"""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

from agent.core.trajectory_file import write_atomic
from agent.errors import Interrupted
from agent.swebench import Environments, Instance
from agent.swebench.executors import Done, Executor, LocalExecutor
from agent.swebench.reports import (
    Outcome,
    clear_results,
    earlier_outcome,
    model_folder,
    write_summary,
)
from agent.swebench.run_instance import STOPPED, evaluate_detached, evaluate_one, regrade
from envs.docker_util import remove_own_containers

#: The error of an instance ``--rewrite-reports`` could not grade again.
NO_TEST_OUTPUT = "no test output to grade again (--rewrite-reports runs nothing)"
#: Seconds the jobs running when the evaluation is stopped get to end (their containers are
#: removed first, so they end at once) and clean up their temporary trees.
STOP_GRACE = 10.0


def evaluate(
    predictions: dict[str, dict[str, Any]],
    instances: list[Instance],
    envs: Environments,
    report_dir: Path,
    *,
    workers: int = 1,
    timeout: float = 1800.0,
    run_id: str | None = None,
    on_done: Any = None,
    executor: Executor | None = None,
    network: bool = False,
    commands: str = "harness",
    force: bool = False,
    rewrite: bool = False,
    on_start: Any = None,
    scripts: str = "record",
    keep: frozenset[str] = frozenset(),
) -> tuple[list[Outcome], Path]:
    """Grade every prediction that has an instance in ``instances`` (the dataset); returns the
    outcomes and the summary path. A prediction graded before in ``report_dir``
    (:func:`earlier_outcome`) is not graded again unless ``force``; ``rewrite`` grades again
    the test outputs there and runs nothing (:func:`regrade`). ``on_start(to_grade, earlier)``
    is called with the two lists of outcomes-to-be once they are known. ``keep``: instances
    whose report in ``report_dir`` was written in this run
    (:func:`~agent.swebench.reports.share_graded`), taken as graded even with ``force``."""
    run_id = run_id or envs.run_id or time.strftime("%Y%m%d-%H%M%S")
    wanted = [i for i in instances if i.instance_id in predictions]
    todo: list[Instance] = []
    if rewrite:
        outcomes = _regraded(wanted, predictions, envs, report_dir, network=network)
    else:
        outcomes, todo = _graded_before(wanted, predictions, report_dir, network, force, keep)
    if on_start is not None:
        on_start(todo, outcomes)
    executor = executor or LocalExecutor(max(1, workers))
    stop = threading.Event()
    here = functools.partial(
        evaluate_one,
        timeout=timeout,
        network=network,
        commands=commands,
        scripts=scripts,
        stop=stop,
    )
    detached = (timeout, network, commands, scripts)
    queue = list(reversed(todo))
    try:
        while queue or executor.in_flight():
            while queue and executor.in_flight() < executor.workers:
                instance = queue.pop()
                prediction = predictions[instance.instance_id]
                clear_results(report_dir / model_folder(prediction) / instance.instance_id)
                if executor.shares_files:
                    executor.submit(
                        instance.instance_id, here, instance, prediction, envs, report_dir
                    )
                else:  # a plain function and its arguments: Ray's remote wraps functions only
                    args = (instance, prediction, envs, *detached)
                    executor.submit(instance.instance_id, evaluate_detached, *args)
            _land_all(executor.wait(0.25), report_dir, on_done, outcomes)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (agent.cli.signals): stop now
        stop.set()
        outcomes += _stopped(executor, report_dir, on_done)
        raise _interrupted(outcomes, predictions, instances, wanted, run_id, report_dir) from None
    finally:
        executor.close()
    return outcomes, write_summary(outcomes, predictions, instances, run_id, report_dir)


def _regraded(
    wanted: list[Instance],
    predictions: dict[str, dict[str, Any]],
    envs: Environments,
    report_dir: Path,
    *,
    network: bool,
) -> list[Outcome]:
    """``--rewrite-reports``: every instance graded again from its test output
    (:func:`regrade`); one with none is an error."""
    outcomes = []
    for i in wanted:
        found = regrade(i, predictions[i.instance_id], envs, report_dir, network=network)
        outcomes.append(
            found or Outcome(instance_id=i.instance_id, kind="error", error=NO_TEST_OUTPUT)
        )
    return outcomes


def _graded_before(
    wanted: list[Instance],
    predictions: dict[str, dict[str, Any]],
    report_dir: Path,
    network: bool,
    force: bool,
    keep: frozenset[str],
) -> tuple[list[Outcome], list[Instance]]:
    """The outcomes of the predictions graded before in ``report_dir``
    (:func:`earlier_outcome`; with ``force`` only those in ``keep``), and the instances to
    grade now."""
    outcomes: list[Outcome] = []
    todo: list[Instance] = []
    for i in wanted:
        again = force and i.instance_id not in keep
        found = (
            None
            if again
            else earlier_outcome(i, predictions[i.instance_id], report_dir, network=network)
        )
        if found is None:
            todo.append(i)
        else:
            outcomes.append(found)
    return outcomes, todo


def _land_all(done: list[Done], report_dir: Path, on_done: Any, outcomes: list[Outcome]) -> None:
    """The outcomes of the jobs that finished (:func:`_landed`) added to ``outcomes`` one by
    one (an interrupt meanwhile keeps those before it), each told to ``on_done``."""
    for item in done:
        outcome = _landed(item, report_dir)
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)


def _interrupted(
    outcomes: list[Outcome],
    predictions: dict[str, dict[str, Any]],
    instances: list[Instance],
    wanted: list[Instance],
    run_id: str,
    report_dir: Path,
) -> Interrupted:
    """The summary of a stopped evaluation written (the instances not graded under
    ``interrupted_ids``); the error that says what was kept."""
    graded = {o.instance_id for o in outcomes}
    left = sorted(i.instance_id for i in wanted if i.instance_id not in graded)
    path = write_summary(outcomes, predictions, instances, run_id, report_dir, left)
    return Interrupted(
        f"stopped: {len(outcomes)} graded, their reports kept in {report_dir} (summary "
        f"{path}); {len(left)} not graded: rerun with --run-id {run_id} and --report-dir "
        f"{report_dir} to grade them"
    )


def _landed(done: Done, report_dir: Path) -> Outcome:
    """The outcome of a finished job; a detached job's files written under ``report_dir``."""
    if done.error is not None:  # the executor lost it (e.g. its node died too often)
        return Outcome(
            instance_id=done.key, kind="error", error=f"{type(done.error).__name__}: {done.error}"
        )
    if isinstance(done.value, Outcome):
        return done.value
    outcome, files = done.value
    for name, text in files.items():
        write_atomic(report_dir / name, text)
    assert isinstance(outcome, Outcome)
    return outcome


def _stopped(executor: Executor, report_dir: Path, on_done: Any) -> list[Outcome]:
    """End the jobs of a stopped evaluation at once: their containers are removed (a test run,
    an image build step), so they fail within moments and remove their temporary trees; they
    get :data:`STOP_GRACE` seconds for that, then are left. The outcomes of those that were
    graded meanwhile."""
    remove_own_containers()
    graded: list[Outcome] = []
    deadline = time.monotonic() + STOP_GRACE
    while executor.in_flight() and time.monotonic() < deadline:
        for done in executor.wait(0.25):
            outcome = _landed(done, report_dir)
            if outcome.error != STOPPED and done.error is None:
                graded.append(outcome)
                if on_done is not None:
                    on_done(outcome)
    executor.abandon()
    remove_own_containers()  # one a job started meanwhile
    return graded
