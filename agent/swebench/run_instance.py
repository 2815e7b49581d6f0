"""One prediction graded, as the harness's ``run_instance`` grades it (:func:`evaluate_one`):
its folder begun, the instance image, a fresh container, the patch applied
(:mod:`agent.swebench.patching`), the evaluation script run, the test output graded
(:func:`~agent.swebench.grading.grade_test_output`) and the report written
(:mod:`agent.swebench.reports`). Every failure is an ``error`` outcome, never an exception.

Also: the same in a scratch folder, for an executor that does not share files
(:func:`evaluate_detached`), and an earlier test output graded again without running anything
(:func:`regrade`, ``--rewrite-reports``)."""

from __future__ import annotations

import json
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.core.trajectory_file import write_atomic
from agent.errors import MissingData
from agent.swebench import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    TESTBED,
    Environments,
    Instance,
    InstanceError,
    InstanceImage,
    InstanceSpec,
    eval_script,
)
from agent.swebench.grading import grade_test_output
from agent.swebench.patching import apply_commands, apply_patch, prepare_tree
from agent.swebench.reports import (
    EMPTY_REPORT,
    ERROR,
    PATCH,
    REPORT,
    RUN_LOG,
    TEST_OUTPUT,
    InstanceLog,
    Outcome,
    clear_results,
    earlier_outcome,
    model_folder,
    result_line,
)
from envs import scratch
from envs.errors import EnvError

#: What an instance being graded when the evaluation was stopped is: not graded, not an error.
STOPPED = "interrupted: the evaluation was stopped before it was graded"


def evaluate_one(
    instance: Instance,
    prediction: dict[str, Any],
    envs: Environments,
    report_dir: Path,
    *,
    timeout: float = 1800.0,
    network: bool = False,
    commands: str = "harness",
    scripts: str = "record",
    stop: threading.Event | None = None,
) -> Outcome:
    """Grade one prediction; every failure becomes an ``error`` outcome, never an exception.
    What it did goes to ``run_instance.log`` beside the report (:class:`InstanceLog`). A
    failure once ``stop`` is set is the stop's (its container was removed): the outcome's error
    is :data:`STOPPED`, and no ``error.txt`` is written (a rerun grades it either way)."""
    started = time.monotonic()
    iid = instance.instance_id
    log_dir = report_dir / model_folder(prediction) / iid
    patch = prediction.get("model_patch")
    out = _start(log_dir, prediction, envs.run_id, iid)
    if patch in ("", None):
        outcome = _empty(iid, patch, log_dir, out)
    else:
        assert isinstance(patch, str)
        try:
            chain = apply_commands(commands)
            spec = envs.spec(instance)
            image = _image(envs, instance, out)
            script = eval_script(instance, spec, scripts)
            write_atomic(log_dir / "eval.sh", script)
            test_output, timed_out = _test_output(
                image.tag,
                envs.run_id,
                iid,
                patch,
                chain,
                commands,
                script,
                out,
                timeout=timeout,
                network=network,
            )
            write_atomic(log_dir / TEST_OUTPUT, test_output)
            out.info(f"Test output for {iid} written to {TEST_OUTPUT}; grading it")
            outcome = _graded(
                instance,
                spec,
                prediction,
                log_dir,
                out,
                image.deviations,
                network=network,
                timeout=timeout if timed_out else None,
            )
        except MissingData as e:  # the data here lacks the commit: nothing about the patch
            outcome = _missing_data(iid, e, log_dir)
        except Exception as e:  # one broken instance must not end the evaluation
            outcome = _failed(iid, e, log_dir, out, stopped=stop is not None and stop.is_set())
    return replace(outcome, seconds=time.monotonic() - started)


def _start(log_dir: Path, prediction: dict[str, Any], run_id: str | None, iid: str) -> InstanceLog:
    """The instance's folder, cleared of an earlier grading's results, its ``patch.diff``
    written; its ``run_instance.log`` begun."""
    log_dir.mkdir(parents=True, exist_ok=True)
    clear_results(log_dir)
    out = InstanceLog(log_dir / RUN_LOG)
    out.info(f"pgs eval, run {run_id}: {iid}, model {model_folder(prediction)}")
    write_atomic(log_dir / PATCH, prediction.get("model_patch") or "")
    return out


def _empty(iid: str, patch: str | None, log_dir: Path, out: InstanceLog) -> Outcome:
    """An empty patch is not run, as the harness does not run it (``empty_patch_ids``)."""
    report = {iid: {**EMPTY_REPORT, "patch_is_None": patch is None}}
    write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
    out.info("Empty patch: not run (listed under empty_patch_ids), not resolved")
    return Outcome(instance_id=iid, kind="empty", report=report)


def _image(envs: Environments, instance: Instance, out: InstanceLog) -> InstanceImage:
    """The instance image, pulled, cached or built; how, and its deviations, logged."""
    image = envs.image(instance)
    how = "pulled" if image.pulled else "cached" if image.cache_hit else "built"
    out.info(f"Image: {image.tag} ({envs.image_source}, {how}, Python {image.python})")
    for deviation in image.deviations:
        out.info(f"Deviation from the official environment: {deviation}")
    return image


def _test_output(
    image: str,
    run_id: str | None,
    iid: str,
    patch: str,
    chain: tuple[str, ...],
    commands: str,
    script: str,
    out: InstanceLog,
    *,
    timeout: float,
    network: bool,
) -> tuple[str, bool]:
    """In a fresh container of the image: the patch applied, then the evaluation script run
    if it applied. The test output as the harness writes it, and whether the tests timed out."""
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig

    config = DockerSandboxConfig(image=image, repo_path=TESTBED, network=network, timeout=timeout)
    with DockerSandbox(config, run_id=run_id) as box:
        name = getattr(box.container, "name", "") or getattr(box.container, "id", "")
        out.info(f"Container for {iid} started: {name} (network {'on' if network else 'off'})")
        box.write_file("/tmp/patch.diff", patch)  # as the harness writes it, byte for byte
        out.info(
            f"Patch written to patch.diff ({len(patch.encode())} bytes) and "
            f"/tmp/patch.diff, now applying with the {commands} commands: " + "; ".join(chain)
        )
        reverted = prepare_tree(box)
        if reverted:
            out.info(reverted)
        applied, apply_output = apply_patch(box, chain, out)
        apply_output = reverted + apply_output
        if not applied:
            out.info(f"{APPLY_PATCH_FAIL}: no command applied the patch; tests not run")
            return f"{APPLY_PATCH_FAIL}:\n{apply_output}\n", False
        return _run_tests(box, script, f"{APPLY_PATCH_PASS}:\n{apply_output}\n", out, timeout)


def _run_tests(
    box: Any, script: str, test_output: str, out: InstanceLog, timeout: float
) -> tuple[str, bool]:
    """The evaluation script run in ``box`` (the patch applied); ``test_output`` with what it
    printed, and whether it timed out (said at the end, as the harness says it)."""
    diff = box.run("git -c core.fileMode=false diff").output.strip()
    out.info(f"Git diff before:\n{diff}")
    box.write_file("/eval.sh", script, mode=0o755)
    out.info(
        f"Eval script written to eval.sh; running /bin/bash /eval.sh (timeout {timeout:.0f} s)"
    )
    run = box.run("/bin/bash /eval.sh", timeout=timeout, max_output=1 << 26)
    test_output += run.output
    out.info(
        f"Test runtime: {run.duration:_.2f} seconds; exit code {run.exit_code}"
        + ("; timed out" if run.timed_out else "")
    )
    if run.timed_out:
        test_output += f"\n\nTimeout error: {timeout:.0f} seconds exceeded."
    return test_output, run.timed_out


def _graded(
    instance: Instance,
    spec: InstanceSpec,
    prediction: dict[str, Any],
    log_dir: Path,
    out: InstanceLog,
    deviations: list[str],
    *,
    network: bool,
    timeout: float | None,
) -> Outcome:
    """The test output in ``log_dir`` graded (:func:`grade_test_output`); ``report.json``
    written and the result logged."""
    iid = instance.instance_id
    report, kind, error, reason = grade_test_output(
        instance,
        spec,
        prediction,
        log_dir / TEST_OUTPUT,
        network=network,
        deviations=deviations,
        timeout=timeout,
    )
    write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
    out.info(result_line(iid, kind, report, error, reason))
    return Outcome(
        instance_id=iid,
        kind=kind,
        report=report,
        error=error,
        deviations=deviations,
        reason=reason,
    )


def _missing_data(iid: str, e: MissingData, log_dir: Path) -> Outcome:
    """The data here lacks the instance's commit: not checkable, nothing about the patch."""
    report = {iid: {**EMPTY_REPORT, "patch_exists": True, "not_checkable": e.reason}}
    write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
    return Outcome(instance_id=iid, kind="not_checkable", report=report, reason=e.reason)


def _failed(iid: str, e: Exception, log_dir: Path, out: InstanceLog, *, stopped: bool) -> Outcome:
    """An instance that could not be graded: an ``error`` outcome and ``error.txt`` (a rerun
    grades it again); a failure of a stopped evaluation is the stop's, :data:`STOPPED`."""
    if stopped:
        out.info(f"{STOPPED} (its container was removed); a rerun grades it")
        return Outcome(instance_id=iid, kind="error", error=STOPPED)
    if isinstance(e, (EnvError, InstanceError)):
        error = str(e)
    else:
        error = f"{type(e).__name__}: {e}"
        out.info(traceback.format_exc(), "ERROR")
    write_atomic(log_dir / ERROR, error + "\n")
    out.info(f"Error in evaluating {iid} (no report; a rerun grades it again): {error}", "ERROR")
    return Outcome(instance_id=iid, kind="error", report=None, error=error)


def evaluate_detached(
    instance: Instance,
    prediction: dict[str, Any],
    envs: Environments,
    timeout: float = 1800.0,
    network: bool = False,
    commands: str = "harness",
    scripts: str = "record",
) -> tuple[Outcome, dict[str, str]]:
    """:func:`evaluate_one` in a scratch report folder; the outcome and the files it wrote (by
    path under the report folder): the job of an executor that does not share files."""
    with scratch.temporary_directory("pgs-eval-") as tmp:
        outcome = evaluate_one(
            instance,
            prediction,
            envs,
            Path(tmp),
            timeout=timeout,
            network=network,
            commands=commands,
            scripts=scripts,
        )
        files = {
            str(p.relative_to(tmp)): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(Path(tmp).rglob("*"))
            if p.is_file()
        }
    return outcome, files


def regrade(
    instance: Instance,
    prediction: dict[str, Any],
    envs: Environments,
    report_dir: Path,
    *,
    network: bool = False,
) -> Outcome | None:
    """``--rewrite-reports``: grade again the test_output.txt an earlier grading left, run
    nothing; None when there is none (the harness's ``rewrite_reports`` skips such instances)."""
    iid = instance.instance_id
    log_dir = report_dir / model_folder(prediction) / iid
    test_output = log_dir / TEST_OUTPUT
    if prediction.get("model_patch") in ("", None):
        return earlier_outcome(instance, prediction, report_dir)
    if not test_output.is_file():
        return None
    try:
        old = json.loads((log_dir / REPORT).read_text(encoding="utf-8"))[iid]
        deviations = [str(d) for d in old.get("deviations") or []]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        deviations = []
    try:
        spec = envs.spec(instance)
        report, kind, error, reason = grade_test_output(
            instance, spec, prediction, test_output, network=network, deviations=deviations
        )
    except (EnvError, InstanceError) as e:
        return Outcome(instance_id=iid, kind="error", report=None, error=str(e))
    write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
    out = InstanceLog(log_dir / RUN_LOG, fresh=False)
    out.info(
        f"pgs eval --rewrite-reports, run {envs.run_id}: {REPORT} rewritten from {TEST_OUTPUT}"
    )
    out.info(result_line(iid, kind, report, error, reason))
    return Outcome(
        instance_id=iid,
        kind=kind,
        report=report,
        error=error,
        seconds=0.0,
        deviations=deviations,
        reason=reason,
    )
