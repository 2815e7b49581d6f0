"""``pgs eval``: grade predictions the way the SWE-bench harness does, with our own images.

For each prediction: a fresh container of the instance image (network off unless ``network``);
the model patch, written as the harness writes it, is applied with the installed swebench's own
commands, read at run time (:func:`apply_commands`): ``run_evaluation.GIT_APPLY_CMDS`` (the
harness run on Docker: tried in order in the same tree, the first that exits 0 wins), or with
``commands="cloud"`` the two commands of its Modal harness (``git apply -v``, then ``patch
--batch --fuzz=5 -p1 -i``), the one sb-cli reports come from. A patch that carries the
image's setup changes (made in a published image that left them in the work tree) goes onto the
tree before the setup commit, as the official evaluation applied such patches
(:func:`_before_setup`); files a patch creates that the install left untracked in the tree
(requests' ``build/lib``) are removed first, as the official evaluation's tree has none
(:func:`_without_leftovers`). The instance's evaluation script
applies ``test_patch`` and runs the FAIL_TO_PASS and PASS_TO_PASS tests; swebench's log parser
and rules grade the log. Output, in the harness's layout under ``--report-dir`` (default
``logs/run_evaluation/<run_id>``, the harness's): ``<model>/<instance>/{report.json,
test_output.txt, run_instance.log, patch.diff, eval.sh}`` (``run_instance.log``: what was done,
:class:`InstanceLog`) and the summary ``<model>.<run_id>.json`` with the keys of the harness's
``make_run_report`` (``total_instances`` counts the dataset given, after ``--instance-ids``).

As the harness does, a prediction graded before in the same report folder (its report.json
there, beside a patch.diff that is the same patch) is not graded again (:func:`earlier_outcome`);
``force`` grades it again, ``rewrite`` (``--rewrite-reports``) grades again the test output
there and runs nothing (:func:`regrade`). An instance that timed out, or that failed before it
was graded (``error.txt``, no report.json), is graded again.

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
import importlib.util
import json
import re
import shlex
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.trajectory_file import write_atomic
from agent.errors import Interrupted, MissingData
from agent.swebench import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    TESTBED,
    Environments,
    Instance,
    InstanceError,
    eval_script,
    grade,
)
from agent.swebench.executors import (
    Done,
    Executor,
    LocalExecutor,
)
from agent.swebench.grading import network_failure
from envs import scratch
from envs.docker_util import remove_own_containers
from envs.errors import EnvError

#: Where the cloud harness (swebench's Modal one, behind sb-cli) runs its patch commands.
CLOUD_COMMAND = re.compile(r"cd /testbed && ((?:git apply|patch) [^\"']*?) /tmp/patch\.diff")
#: Subjects of the commit that holds an image's setup changes: pgs's
#: (:func:`envs.images.build.finish_repo_steps`) and the current harness's.
SETUP_COMMITS = ("pgs: changes made by the environment setup", "SWE-bench")
#: The report of an empty patch: not run (the harness's ``empty_patch_ids``), not resolved.
EMPTY_REPORT: dict[str, Any] = {
    "patch_is_None": False,
    "patch_exists": False,
    "patch_successfully_applied": False,
    "resolved": False,
}
#: The files of one instance's folder, named as swebench names them (``LOG_REPORT``,
#: ``LOG_TEST_OUTPUT``, ``LOG_INSTANCE``), and pgs's note of an instance it could not grade.
REPORT, TEST_OUTPUT, RUN_LOG, ERROR = (
    "report.json",
    "test_output.txt",
    "run_instance.log",
    "error.txt",
)
#: How the harness ends the test output of a run that timed out.
TIMEOUT = re.compile(r"\n\nTimeout error: (\d+(?:\.\d+)?) seconds exceeded\.\s*\Z")
#: The error of an instance ``--rewrite-reports`` could not grade again.
NO_TEST_OUTPUT = "no test output to grade again (--rewrite-reports runs nothing)"
#: What an instance being graded when the evaluation was stopped is: not graded, not an error.
STOPPED = "interrupted: the evaluation was stopped before it was graded"
#: Seconds the jobs running when the evaluation is stopped get to end (their containers are
#: removed first, so they end at once) and clean up their temporary trees.
STOP_GRACE = 10.0
MALFORMED_SIGNS = (
    "corrupt patch",
    "No valid patches in input",
    "patch fragment without header",
    "unrecognized input",
    "Only garbage was found",
    "malformed patch",
)


@dataclass
class Outcome:
    """What happened to one prediction."""

    instance_id: str
    #: resolved | unresolved | not_checkable | empty | error
    kind: str
    report: dict[str, Any] | None = None
    error: str = ""
    seconds: float = 0.0
    deviations: list[str] = field(default_factory=list)
    #: why the tests could not be checked here (kind ``not_checkable``)
    reason: str = ""
    #: graded by an earlier ``pgs eval`` with this run id and report folder, not again now
    earlier: bool = False

    def counts(self, key: str) -> str:
        status = ((self.report or {}).get(self.instance_id) or {}).get("tests_status") or {}
        part = status.get(key) or {}
        ok, bad = len(part.get("success", [])), len(part.get("failure", []))
        return f"{ok}/{ok + bad}" if ok + bad else "-"


def _json_or_jsonl(text: str, path: Path) -> Any:
    """One JSON value, or one per line: JSONL is JSONL whatever the file is called (agents
    write ``preds.json`` files of JSON lines)."""
    if text.lstrip().startswith(("{", "[")) and not str(path).endswith(".jsonl"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":  # not one JSON value followed by more
                raise
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """A preds.json (dict keyed by instance id, or a list) or a JSONL file of predictions."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InstanceError(f"cannot read the predictions {path}: {e.strerror}") from None
    try:
        data = _json_or_jsonl(text, path)
    except json.JSONDecodeError as e:
        raise InstanceError(f"{path} is not JSON or JSONL predictions: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("instance_id"), str):
        data = [data]  # one line of JSONL, whatever the file's name
    items = list(data.values()) if isinstance(data, dict) else data
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or "instance_id" not in item:
            raise InstanceError(f"{path}: every prediction needs an instance_id")
        out[str(item["instance_id"])] = item
    return out


def gold_predictions(instances: list[Instance]) -> dict[str, dict[str, Any]]:
    """The records' own patches as predictions (model ``gold``), as the harness's
    ``--predictions_path gold`` makes them."""
    return {
        i.instance_id: {
            "instance_id": i.instance_id,
            "model_name_or_path": "gold",
            "model_patch": i.patch,
        }
        for i in instances
    }


def model_folder(prediction: dict[str, Any]) -> str:
    """The folder of a prediction's model under the report folder, as the harness names it."""
    return str(prediction.get("model_name_or_path") or "None").replace("/", "__")


def earlier_outcome(
    instance: Instance, prediction: dict[str, Any], report_dir: Path, *, network: bool = False
) -> Outcome | None:
    """The outcome of an earlier grading of this same prediction in ``report_dir`` (its
    report.json, next to a patch.diff that is this prediction's patch), or None: not graded,
    graded with another patch, or it timed out (run again, as the harness runs again an
    instance it wrote no report for), or it was not checkable and ``network`` is now on."""
    iid = instance.instance_id
    log_dir = report_dir / model_folder(prediction) / iid
    try:
        report = json.loads((log_dir / REPORT).read_text(encoding="utf-8"))[iid]
        graded_patch = (log_dir / "patch.diff").read_text(encoding="utf-8")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(report, dict) or graded_patch != (prediction.get("model_patch") or ""):
        return None
    error = str(report.get("error") or "")
    if error.startswith("tests timed out"):
        return None
    reason = str(report.get("not_checkable") or "")
    if reason and network:  # its tests may reach what they need now
        return None
    if not report.get("patch_exists", True) and prediction.get("model_patch") in ("", None):
        kind = "empty"
    elif error:
        kind = "error"
    elif reason:
        kind = "not_checkable"
    else:
        kind = "resolved" if report.get("resolved") else "unresolved"
    deviations = [str(d) for d in report.get("deviations") or []]
    return Outcome(
        instance_id=iid,
        kind=kind,
        report={iid: report},
        error=error,
        seconds=0.0,
        deviations=deviations,
        reason=reason,
        earlier=True,
    )


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
        report, kind, error, reason = _judge(
            instance, spec, prediction, test_output, network=network, deviations=deviations
        )
    except (EnvError, InstanceError) as e:
        return Outcome(instance_id=iid, kind="error", report=None, error=str(e))
    write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
    out = InstanceLog(log_dir / RUN_LOG, fresh=False)
    out.info(
        f"pgs eval --rewrite-reports, run {envs.run_id}: {REPORT} rewritten from {TEST_OUTPUT}"
    )
    out.info(_result_line(iid, kind, report, error, reason))
    return Outcome(
        instance_id=iid,
        kind=kind,
        report=report,
        error=error,
        seconds=0.0,
        deviations=deviations,
        reason=reason,
    )


def apply_commands(chain: str = "harness") -> tuple[str, ...]:
    """The installed swebench's patch commands, each taking the patch file as its last word:
    ``harness`` is ``swebench.harness.run_evaluation.GIT_APPLY_CMDS``; ``cloud`` the commands
    its Modal harness runs (read from that module's source, which imports ``modal``)."""
    try:
        if chain == "harness":
            from swebench.harness.run_evaluation import GIT_APPLY_CMDS

            return tuple(GIT_APPLY_CMDS)
        spec = importlib.util.find_spec("swebench.harness.modal_eval.run_evaluation_modal")
    except ImportError:
        raise InstanceError(
            "grading needs the swebench package: pip install 'pgs-agent[swebench]'"
        ) from None
    if chain != "cloud":
        raise InstanceError(f"unknown patch commands {chain!r}: harness or cloud")
    source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    found = tuple(dict.fromkeys(CLOUD_COMMAND.findall(source)))
    if not found:
        raise InstanceError(
            "the installed swebench has no Modal harness whose patch commands pgs can read; "
            "use the harness's commands (--apply-commands harness)"
        )
    return found


def _malformed(patch: str) -> str | None:
    """Why ``patch`` is not a unified diff at all, or None."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        parsed = PatchSet(patch)
    except UnidiffParseError as e:
        return str(e)
    if not list(parsed):
        return "no file diff found in it"
    return None


class InstanceLog:
    """``run_instance.log`` (swebench's ``LOG_INSTANCE``): what pgs did for one instance, one
    entry per step, in the harness's logger format (``<time> - INFO - <message>``), appended as
    it happens so that a crash leaves what came before."""

    def __init__(self, path: Path, *, fresh: bool = True) -> None:
        self.path = path
        if fresh or not path.is_file():
            path.write_text("", encoding="utf-8")

    def info(self, message: str, level: str = "INFO") -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"{stamp} - {level} - {message.rstrip()}\n")


def _judge(
    instance: Instance,
    spec: Any,
    prediction: dict[str, Any],
    test_output: Path,
    *,
    network: bool,
    deviations: list[str],
    timeout: float | None = None,
) -> tuple[dict[str, Any], str, str, str]:
    """Grade ``test_output`` (what :func:`evaluate_one` wrote) with swebench's rules and add
    pgs's fields: (report, kind, error, reason)."""
    iid = instance.instance_id
    log = test_output.read_text(encoding="utf-8", errors="replace")
    report = grade(instance, spec, {**prediction, "instance_id": iid}, test_output)
    patch = str(prediction.get("model_patch") or "")
    error = ""
    if log.startswith(APPLY_PATCH_FAIL):
        apply_output = log.split("\n", 1)[-1]
        why = _malformed(patch)
        malformed = why or next((s for s in MALFORMED_SIGNS if s in apply_output), None)
        said = [
            line
            for line in apply_output.splitlines()
            if line.strip() and not line.startswith(("$ ", "Failed to apply patch"))
        ]
        first = next((line for line in said if line.startswith("error:")), None)
        last = first or (said[-1] if said else "")
        error = f"malformed patch: {why or last}" if malformed else f"patch does not apply: {last}"
    elif TIMEOUT.search(log):
        seconds = timeout if timeout is not None else float(TIMEOUT.findall(log)[-1])
        error = f"tests timed out after {seconds:.0f} s"
    reason = ""
    if error:
        report[iid]["error"] = error
    elif not report[iid]["resolved"]:
        reason = network_failure(log, network=network) or ""
    if reason:
        report[iid]["not_checkable"] = reason
    if deviations:
        report[iid]["deviations"] = deviations
    kind = "error" if error else ("resolved" if report[iid]["resolved"] else "unresolved")
    return report, "not_checkable" if reason else kind, error, reason


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
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig

    started = time.monotonic()
    iid = instance.instance_id
    model = model_folder(prediction)
    log_dir = report_dir / model / iid
    patch = prediction.get("model_patch")
    log_dir.mkdir(parents=True, exist_ok=True)
    _clear(log_dir)
    out = InstanceLog(log_dir / RUN_LOG)
    out.info(f"pgs eval, run {envs.run_id}: {iid}, model {model}")
    write_atomic(log_dir / "patch.diff", patch or "")
    if patch in ("", None):
        report = {iid: {**EMPTY_REPORT, "patch_is_None": patch is None}}
        write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
        out.info("Empty patch: not run (listed under empty_patch_ids), not resolved")
        return Outcome(
            instance_id=iid, kind="empty", report=report, seconds=time.monotonic() - started
        )
    assert isinstance(patch, str)
    try:
        chain = apply_commands(commands)
        spec = envs.spec(instance)
        image = envs.image(instance)
        how = "pulled" if image.pulled else "cached" if image.cache_hit else "built"
        out.info(f"Image: {image.tag} ({envs.image_source}, {how}, Python {image.python})")
        for deviation in image.deviations:
            out.info(f"Deviation from the official environment: {deviation}")
        script = eval_script(instance, spec, scripts)
        write_atomic(log_dir / "eval.sh", script)
        config = DockerSandboxConfig(
            image=image.tag, repo_path=TESTBED, network=network, timeout=timeout
        )
        with DockerSandbox(config, run_id=envs.run_id) as box:
            name = getattr(box.container, "name", "") or getattr(box.container, "id", "")
            out.info(f"Container for {iid} started: {name} (network {'on' if network else 'off'})")
            box.write_file("/tmp/patch.diff", patch)  # as the harness writes it, byte for byte
            out.info(
                f"Patch written to patch.diff ({len(patch.encode())} bytes) and "
                f"/tmp/patch.diff, now applying with the {commands} commands: " + "; ".join(chain)
            )
            reverted = _without_leftovers(box) + _before_setup(box)
            if reverted:
                out.info(reverted)
            applied, apply_output = apply_patch(box, chain, out)
            apply_output = reverted + apply_output
            timed_out = False
            if applied:
                log = f"{APPLY_PATCH_PASS}:\n{apply_output}\n"
                diff = box.run("git -c core.fileMode=false diff").output.strip()
                out.info(f"Git diff before:\n{diff}")
                box.write_file("/eval.sh", script, mode=0o755)
                out.info(
                    f"Eval script written to eval.sh; running /bin/bash /eval.sh "
                    f"(timeout {timeout:.0f} s)"
                )
                run = box.run("/bin/bash /eval.sh", timeout=timeout, max_output=1 << 26)
                log += run.output
                timed_out = run.timed_out
                out.info(
                    f"Test runtime: {run.duration:_.2f} seconds; exit code {run.exit_code}"
                    + ("; timed out" if timed_out else "")
                )
                if timed_out:
                    log += f"\n\nTimeout error: {timeout:.0f} seconds exceeded."
            else:
                log = f"{APPLY_PATCH_FAIL}:\n{apply_output}\n"
                out.info(f"{APPLY_PATCH_FAIL}: no command applied the patch; tests not run")
        write_atomic(log_dir / TEST_OUTPUT, log)
        out.info(f"Test output for {iid} written to {TEST_OUTPUT}; grading it")
        report, kind, error, reason = _judge(
            instance,
            spec,
            prediction,
            log_dir / TEST_OUTPUT,
            network=network,
            deviations=image.deviations,
            timeout=timeout if timed_out else None,
        )
        write_atomic(log_dir / REPORT, json.dumps(report, indent=4))
        out.info(_result_line(iid, kind, report, error, reason))
        seconds = time.monotonic() - started
        return Outcome(
            instance_id=iid,
            kind=kind,
            report=report,
            error=error,
            seconds=seconds,
            deviations=image.deviations,
            reason=reason,
        )
    except MissingData as e:  # the data here lacks the commit: nothing about the patch
        report = {iid: {**EMPTY_REPORT, "patch_exists": True, "not_checkable": e.reason}}
        write_atomic(log_dir / "report.json", json.dumps(report, indent=4))
        seconds = time.monotonic() - started
        return Outcome(
            instance_id=iid, kind="not_checkable", report=report, seconds=seconds, reason=e.reason
        )
    except Exception as e:  # one broken instance must not end the evaluation
        if stop is not None and stop.is_set():
            out.info(f"{STOPPED} (its container was removed); a rerun grades it")
            seconds = time.monotonic() - started
            return Outcome(instance_id=iid, kind="error", error=STOPPED, seconds=seconds)
        if isinstance(e, (EnvError, InstanceError)):
            error = str(e)
        else:
            error = f"{type(e).__name__}: {e}"
            out.info(traceback.format_exc(), "ERROR")
    write_atomic(log_dir / ERROR, error + "\n")
    out.info(f"Error in evaluating {iid} (no report; a rerun grades it again): {error}", "ERROR")
    return Outcome(
        instance_id=iid, kind="error", report=None, error=error, seconds=time.monotonic() - started
    )


def _clear(log_dir: Path) -> None:
    """Remove an earlier grading's results from ``log_dir``: never read as this one's."""
    for stale in (REPORT, TEST_OUTPUT, ERROR):
        (log_dir / stale).unlink(missing_ok=True)


def _result_line(iid: str, kind: str, report: dict[str, Any], error: str, reason: str) -> str:
    status = report[iid].get("tests_status") or {}
    counts = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        part = status.get(key) or {}
        ok, bad = len(part.get("success", [])), len(part.get("failure", []))
        counts.append(f"{key} {ok}/{ok + bad}")
    why = f" ({error or reason})" if error or reason else ""
    return f"Result for {iid}: resolved: {report[iid]['resolved']}; {kind}{why}; " + ", ".join(
        counts
    )


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


def _without_leftovers(box: Any) -> str:
    """Files the patch creates that the image's install left in the work tree are removed
    first, so the patch creates them as it does on the official evaluation's tree, which has no
    such leftovers: requests' ``pip install .`` leaves ``build/lib`` (a copy of the package,
    CRLF files included), a model's ``git add -A`` took it into its patch, and its CRs were
    lost on the way (mini-swe-agent reads the diff as text), so on a tree with the leftovers no
    harness command applies it, while the official report says it applied (docs/environments.md).
    Leftovers are what :func:`envs.images.build.finish_repo_steps` listed in
    ``.git/info/exclude``: untracked files the setup made, never tracked files. A note for the
    log, or ""."""
    summary = box.run("git apply --summary /tmp/patch.diff")
    created = [
        line.split(maxsplit=3)[3]
        for line in summary.output.splitlines()
        if summary.ok and line.startswith(" create mode ") and len(line.split(maxsplit=3)) == 4
    ]
    if not created:
        return ""
    excluded = box.run("cat .git/info/exclude").output.splitlines()
    left = {line[1:] for line in excluded if line.startswith("/")}
    found = [path for path in created if path in left]
    if not found:
        return ""
    box.run("rm -f -- " + " ".join(shlex.quote(path) for path in found))
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"The patch creates {len(found)} files the install left in the tree ({shown}): "
        "removed first, as on the official evaluation's tree.\n"
    )


def _before_setup(box: Any) -> str:
    """A patch that carries the setup changes (made in a published image that left them in the
    work tree) goes onto the tree before the setup commit, as the official evaluation applied
    such patches (measured: bench/agreement.py, docs/environments.md); the setup commit's files
    are checked out as they were before it. Only when the patch applies there and not on HEAD;
    a note for the log, or ""."""
    head = box.run("git log -1 --format=%s HEAD")
    if not head.ok or head.output.strip() not in SETUP_COMMITS:
        return ""
    if box.run("git apply --check /tmp/patch.diff").ok:
        return ""
    files = box.run("git diff --name-only HEAD~1 HEAD").output.split()
    if not files:
        return ""
    quoted = " ".join(shlex.quote(f) for f in files)
    box.run(f"git checkout HEAD~1 -- {quoted}")
    if box.run("git apply --check /tmp/patch.diff").ok:
        return f"The patch carries the setup changes: {', '.join(files)} as before the setup.\n"
    box.run(f"git checkout HEAD -- {quoted}")
    return ""


def apply_patch(
    box: Any, commands: tuple[str, ...], log: InstanceLog | None = None
) -> tuple[bool, str]:
    """The harness's patch commands in ``/testbed``, as its ``run_instance`` runs them: in
    order, in the same tree (no reset between two: a partial ``--reject`` stays), the first
    that exits 0 applied the patch; (applied, the commands' outputs). Each command, its exit
    code and output go to ``log`` too."""
    output = ""
    for command in commands:
        result = box.run(f"{command} /tmp/patch.diff")
        output += f"$ {command} /tmp/patch.diff\n{result.output}"
        if log is not None:
            log.info(f"$ {command} /tmp/patch.diff (exit code {result.exit_code})\n{result.output}")
        if result.ok:
            if log is not None:
                log.info(f"{APPLY_PATCH_PASS}: by {command}")
            return True, output
        output += f"Failed to apply patch to container: {command}\n"
        if log is not None:
            log.info(f"Failed to apply patch to container: {command}")
    return False, output


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


def summarize(
    outcomes: list[Outcome],
    predictions: dict[str, dict[str, Any]],
    instances: list[Instance],
    run_id: str,
) -> dict[str, Any]:
    """The harness's run report (``make_run_report``'s keys) for the dataset ``instances`` (the
    instances given, after ``--instance-ids``: ``total_instances``), plus pgs's
    not_checkable, errors and deviations."""
    by_kind: dict[str, list[str]] = {
        "resolved": [],
        "unresolved": [],
        "not_checkable": [],
        "empty": [],
        "error": [],
    }
    for o in outcomes:
        by_kind[o.kind].append(o.instance_id)
    completed = sorted(
        o.instance_id
        for o in outcomes
        if o.kind in ("resolved", "unresolved", "not_checkable") or (o.report and o.kind != "empty")
    )
    return {
        "total_instances": len(instances),
        "submitted_instances": len(predictions),
        "completed_instances": len(completed),
        "resolved_instances": len(by_kind["resolved"]),
        "unresolved_instances": len(by_kind["unresolved"]),
        "empty_patch_instances": len(by_kind["empty"]),
        "error_instances": len(by_kind["error"]),
        "not_checkable_instances": len(by_kind["not_checkable"]),
        "completed_ids": completed,
        "incomplete_ids": sorted(
            i.instance_id for i in instances if i.instance_id not in predictions
        ),
        "empty_patch_ids": sorted(by_kind["empty"]),
        "submitted_ids": sorted(predictions),
        "resolved_ids": sorted(by_kind["resolved"]),
        "unresolved_ids": sorted(by_kind["unresolved"]),
        "error_ids": sorted(by_kind["error"]),
        "not_checkable_ids": sorted(by_kind["not_checkable"]),
        "schema_version": 2,
        "run_id": run_id,
        "errors": {o.instance_id: o.error for o in outcomes if o.error},
        "not_checkable": {o.instance_id: o.reason for o in outcomes if o.reason},
        "deviations": {o.instance_id: o.deviations for o in outcomes if o.deviations},
    }


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
    whose report in ``report_dir`` was written in this run (:func:`share_graded`), taken as
    graded even with ``force``."""
    run_id = run_id or envs.run_id or time.strftime("%Y%m%d-%H%M%S")
    wanted = [i for i in instances if i.instance_id in predictions]
    outcomes: list[Outcome] = []
    todo: list[Instance] = []
    for i in wanted:
        if rewrite:
            found = regrade(i, predictions[i.instance_id], envs, report_dir, network=network)
            outcomes.append(
                found or Outcome(instance_id=i.instance_id, kind="error", error=NO_TEST_OUTPUT)
            )
            continue
        prediction = predictions[i.instance_id]
        again = force and i.instance_id not in keep
        found = None if again else earlier_outcome(i, prediction, report_dir, network=network)
        if found is None:
            todo.append(i)
        else:
            outcomes.append(found)
    if on_start is not None:
        on_start(todo, outcomes)
    executor = executor or LocalExecutor(max(1, workers))
    queue = list(reversed(todo))
    stop = threading.Event()
    try:
        while queue or executor.in_flight():
            while queue and executor.in_flight() < executor.workers:
                i = queue.pop()
                prediction = predictions[i.instance_id]
                _clear(report_dir / model_folder(prediction) / i.instance_id)
                if executor.shares_files:
                    here = functools.partial(
                        evaluate_one,
                        timeout=timeout,
                        network=network,
                        commands=commands,
                        scripts=scripts,
                        stop=stop,
                    )
                    executor.submit(i.instance_id, here, i, prediction, envs, report_dir)
                else:
                    # A plain function and its arguments: Ray's remote wraps functions only.
                    executor.submit(
                        i.instance_id,
                        evaluate_detached,
                        *(i, prediction, envs, timeout, network, commands, scripts),
                    )
            for done in executor.wait(0.25):
                outcome = _landed(done, report_dir)
                outcomes.append(outcome)
                if on_done is not None:
                    on_done(outcome)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP (agent.cli.signals): stop now
        stop.set()
        outcomes += _stopped(executor, report_dir, on_done)
        graded = {o.instance_id for o in outcomes}
        left = sorted(i.instance_id for i in wanted if i.instance_id not in graded)
        path = _write_summary(outcomes, predictions, instances, run_id, report_dir, left)
        raise Interrupted(
            f"stopped: {len(outcomes)} graded, their reports kept in {report_dir} (summary "
            f"{path}); {len(left)} not graded: rerun with --run-id {run_id} and --report-dir "
            f"{report_dir} to grade them"
        ) from None
    finally:
        executor.close()
    return outcomes, _write_summary(outcomes, predictions, instances, run_id, report_dir)


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


def _write_summary(
    outcomes: list[Outcome],
    predictions: dict[str, dict[str, Any]],
    instances: list[Instance],
    run_id: str,
    report_dir: Path,
    interrupted: list[str] | None = None,
) -> Path:
    """Write the run report (:func:`summarize`); an evaluation that was stopped lists the
    instances it did not grade under ``interrupted_ids``."""
    outcomes.sort(key=lambda o: o.instance_id)
    summary = summarize(outcomes, predictions, instances, run_id)
    if interrupted is not None:
        summary["interrupted_ids"] = interrupted
    models = {model_folder(p) for p in predictions.values()}
    model = sorted(models)[0] if models else "None"
    path = report_dir / f"{model}.{run_id}.json"
    write_atomic(path, json.dumps(summary, indent=4))
    return path


# -- --attempts: every attempt's patch --------------------------------------------------------

#: How an attempt's model name is spelled: ``<model>@attempt-<k>``; its reports go under that
#: model folder and its summary is ``<model>@attempt-<k>.<run_id>.json``.
ATTEMPT_MODEL = "{model}@attempt-{k}"


def attempt_predictions(
    predictions_path: Path, predictions: dict[str, dict[str, Any]]
) -> dict[int, dict[str, dict[str, Any]]]:
    """``pgs eval --attempts``: the predictions of every attempt of ``pgs run/batch --attempts``,
    by attempt number, read from ``<dir>/<id>/attempt-<k>/<id>.pred`` beside the predictions
    file; each gets the model name :data:`ATTEMPT_MODEL`."""
    by_attempt: dict[int, dict[str, dict[str, Any]]] = {}
    folder = Path(predictions_path).parent
    for iid, main in predictions.items():
        for path in sorted((folder / iid).glob(f"attempt-*/{iid}.pred")):
            k = path.parent.name.removeprefix("attempt-")
            if not k.isdigit():
                continue
            try:
                pred = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise InstanceError(f"cannot read the attempt's prediction {path}: {e}") from None
            if not isinstance(pred, dict):
                raise InstanceError(f"{path} is not a prediction (instance_id, model_patch)")
            model = ATTEMPT_MODEL.format(model=main.get("model_name_or_path") or "None", k=k)
            by_attempt.setdefault(int(k), {})[iid] = {
                **pred,
                "instance_id": iid,
                "model_name_or_path": model,
            }
    return dict(sorted(by_attempt.items()))


def share_graded(main: dict[str, Any], attempt: dict[str, Any], report_dir: Path) -> bool:
    """An attempt whose patch is the main prediction's (the chosen one) takes its grading: the
    main's instance folder is copied to the attempt's model folder, so it is not run twice.
    True when copied."""
    import shutil

    iid = str(main["instance_id"])
    source = report_dir / model_folder(main) / iid
    if (attempt.get("model_patch") or "") != (main.get("model_patch") or ""):
        return False
    try:
        if (source / "patch.diff").read_text(encoding="utf-8") != (main.get("model_patch") or ""):
            return False
    except OSError:
        return False
    if not (source / REPORT).is_file():
        return False
    target = report_dir / model_folder(attempt) / iid
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return True


def apply_prediction(box: Any, patch: str, commands: tuple[str, ...]) -> tuple[bool, str]:
    """Write ``patch`` as the harness writes it and apply it as :func:`evaluate_one` does
    (leftovers removed, setup changes taken into account, the harness's commands in order):
    (applied, what the commands said)."""
    box.write_file("/tmp/patch.diff", patch)
    reverted = _without_leftovers(box) + _before_setup(box)
    applied, output = apply_patch(box, commands)
    return applied, reverted + output
