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
and rules grade the log. Output, in the harness's layout under ``--report-dir``:
``<model>/<instance>/{report.json, test_output.txt, patch.diff, eval.sh}`` and the summary
``<model>.<run_id>.json`` (``resolved_ids``, ``unresolved_ids``, ``error_ids``,
``empty_patch_ids``, counts).

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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.trajectory import write_atomic
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
from agent.swebench.records import MissingData
from envs import scratch
from envs.errors import EnvError

#: Where the cloud harness (swebench's Modal one, behind sb-cli) runs its patch commands.
CLOUD_COMMAND = re.compile(r"cd /testbed && ((?:git apply|patch) [^\"']*?) /tmp/patch\.diff")
#: Subjects of the commit that holds an image's setup changes: pgs's
#: (:func:`envs.images.common.finish_repo_steps`) and the current harness's.
SETUP_COMMITS = ("pgs: changes made by the environment setup", "SWE-bench")
#: The report of an empty patch: not run (the harness's ``empty_patch_ids``), not resolved.
EMPTY_REPORT: dict[str, Any] = {
    "patch_is_None": False,
    "patch_exists": False,
    "patch_successfully_applied": False,
    "resolved": False,
}
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

    def counts(self, key: str) -> str:
        status = ((self.report or {}).get(self.instance_id) or {}).get("tests_status") or {}
        part = status.get(key) or {}
        ok, bad = len(part.get("success", [])), len(part.get("failure", []))
        return f"{ok}/{ok + bad}" if ok + bad else "-"


def load_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """A preds.json (dict keyed by instance id, or a list) or a JSONL file of predictions."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InstanceError(f"cannot read the predictions {path}: {e.strerror}") from None
    try:
        if text.lstrip().startswith(("{", "[")) and not str(path).endswith(".jsonl"):
            data = json.loads(text)
        else:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise InstanceError(f"{path} is not JSON or JSONL predictions: {e}") from None
    items = list(data.values()) if isinstance(data, dict) else data
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or "instance_id" not in item:
            raise InstanceError(f"{path}: every prediction needs an instance_id")
        out[str(item["instance_id"])] = item
    return out


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
) -> Outcome:
    """Grade one prediction; every failure becomes an ``error`` outcome, never an exception."""
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig

    started = time.monotonic()
    iid = instance.instance_id
    model = str(prediction.get("model_name_or_path") or "None").replace("/", "__")
    log_dir = report_dir / model / iid
    patch = prediction.get("model_patch")
    log_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(log_dir / "patch.diff", patch or "")
    if patch in ("", None):
        report = {iid: {**EMPTY_REPORT, "patch_is_None": patch is None}}
        write_atomic(log_dir / "report.json", json.dumps(report, indent=4))
        return Outcome(iid, "empty", report, seconds=time.monotonic() - started)
    assert isinstance(patch, str)
    try:
        chain = apply_commands(commands)
        spec = envs.spec(instance)
        image = envs.image(instance)
        script = eval_script(instance, spec, scripts)
        write_atomic(log_dir / "eval.sh", script)
        config = DockerSandboxConfig(
            image=image.tag, repo_path=TESTBED, network=network, timeout=timeout
        )
        with DockerSandbox(config, run_id=envs.run_id) as box:
            box.write_file("/tmp/patch.diff", patch)  # as the harness writes it, byte for byte
            reverted = _without_leftovers(box) + _before_setup(box)
            applied, apply_output = _apply(box, chain)
            apply_output = reverted + apply_output
            if applied:
                log = f"{APPLY_PATCH_PASS}:\n{apply_output}\n"
                box.write_file("/eval.sh", script, mode=0o755)
                run = box.run("/bin/bash /eval.sh", timeout=timeout, max_output=1 << 26)
                log += run.output
                timed_out = run.timed_out
                if timed_out:
                    log += f"\n\nTimeout error: {timeout:.0f} seconds exceeded."
            else:
                log = f"{APPLY_PATCH_FAIL}:\n{apply_output}\n"
        write_atomic(log_dir / "test_output.txt", log)
        prediction = {**prediction, "instance_id": iid}
        report = grade(instance, spec, prediction, log_dir / "test_output.txt")
        error = ""
        if not applied:
            why = _malformed(patch)
            malformed = why or next((s for s in MALFORMED_SIGNS if s in apply_output), None)
            said = [
                line
                for line in apply_output.splitlines()
                if line.strip() and not line.startswith(("$ ", "Failed to apply patch"))
            ]
            first = next((line for line in said if line.startswith("error:")), None)
            last = first or (said[-1] if said else "")
            error = (
                f"malformed patch: {why or last}" if malformed else f"patch does not apply: {last}"
            )
        elif timed_out:
            error = f"tests timed out after {timeout:.0f} s"
        reason = ""
        if error:
            report[iid]["error"] = error
        elif not report[iid]["resolved"]:
            reason = network_failure(log, network=network) or ""
        if reason:
            report[iid]["not_checkable"] = reason
        if image.deviations:
            report[iid]["deviations"] = image.deviations
        write_atomic(log_dir / "report.json", json.dumps(report, indent=4))
        kind = "error" if error else ("resolved" if report[iid]["resolved"] else "unresolved")
        kind = "not_checkable" if reason else kind
        seconds = time.monotonic() - started
        return Outcome(iid, kind, report, error, seconds, image.deviations, reason)
    except MissingData as e:  # the data here lacks the commit: nothing about the patch
        report = {iid: {**EMPTY_REPORT, "patch_exists": True, "not_checkable": e.reason}}
        write_atomic(log_dir / "report.json", json.dumps(report, indent=4))
        seconds = time.monotonic() - started
        return Outcome(iid, "not_checkable", report, seconds=seconds, reason=e.reason)
    except (EnvError, InstanceError) as e:
        error = str(e)
    except Exception as e:  # one broken instance must not end the evaluation
        error = f"{type(e).__name__}: {e}"
    write_atomic(log_dir / "error.txt", error + "\n")
    return Outcome(iid, "error", None, error, time.monotonic() - started)


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
    Leftovers are what :func:`envs.images.common.finish_repo_steps` listed in
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


def _apply(box: Any, commands: tuple[str, ...]) -> tuple[bool, str]:
    """The harness's patch commands in ``/testbed``, as its ``run_instance`` runs them: in
    order, in the same tree (no reset between two: a partial ``--reject`` stays), the first
    that exits 0 applied the patch; (applied, the commands' outputs)."""
    output = ""
    for command in commands:
        result = box.run(f"{command} /tmp/patch.diff")
        output += f"$ {command} /tmp/patch.diff\n{result.output}"
        if result.ok:
            return True, output
        output += f"Failed to apply patch to container: {command}\n"
    return False, output


def _landed(done: Done, report_dir: Path) -> Outcome:
    """The outcome of a finished job; a detached job's files written under ``report_dir``."""
    if done.error is not None:  # the executor lost it (e.g. its node died too often)
        return Outcome(done.key, "error", error=f"{type(done.error).__name__}: {done.error}")
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
    """The harness's run report (``make_run_report``'s keys), plus pgs's errors/deviations."""
    by_kind: dict[str, list[str]] = {
        "resolved": [],
        "unresolved": [],
        "not_checkable": [],
        "empty": [],
        "error": [],
    }
    for o in outcomes:
        by_kind[o.kind].append(o.instance_id)
    ran = {o.instance_id for o in outcomes}
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
        "incomplete_ids": sorted(i.instance_id for i in instances if i.instance_id not in ran),
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
    scripts: str = "record",
) -> tuple[list[Outcome], Path]:
    """Grade every prediction that has an instance; returns the outcomes and the summary path."""
    run_id = run_id or envs.run_id or time.strftime("%Y%m%d-%H%M%S")
    wanted = [i for i in instances if i.instance_id in predictions]
    executor = executor or LocalExecutor(max(1, workers))
    outcomes: list[Outcome] = []
    queue = list(reversed(wanted))
    try:
        while queue or executor.in_flight():
            while queue and executor.in_flight() < executor.workers:
                i = queue.pop()
                prediction = predictions[i.instance_id]
                if executor.shares_files:
                    here = functools.partial(
                        evaluate_one,
                        timeout=timeout,
                        network=network,
                        commands=commands,
                        scripts=scripts,
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
    finally:
        executor.close()
    outcomes.sort(key=lambda o: o.instance_id)
    summary = summarize(outcomes, predictions, wanted, run_id)
    models = {str(p.get("model_name_or_path") or "None") for p in predictions.values()}
    model = sorted(models)[0].replace("/", "__") if models else "None"
    path = report_dir / f"{model}.{run_id}.json"
    write_atomic(path, json.dumps(summary, indent=4))
    return outcomes, path
