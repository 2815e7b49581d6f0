"""Evaluation scripts and grading, reusing swebench's own.

The evaluation script is, first to last: the record's ``eval_script`` (current Verified records
carry one, written for the harness's conda images: its ``conda activate`` is a no-op in ours
and the venv is on PATH, so it runs unchanged); the harness's ``make_eval_script_list_py`` for
the instance (swebench 4.x's table: the spec's ``eval_commands`` before the tests, its
``install`` again, ``test_patch``, its ``test_cmd`` on the test files); else, for records of the
extension, a script of the same shape that runs the FAIL_TO_PASS and PASS_TO_PASS tests.

A test run that failed for want of the network (:func:`network_failure`: a name that did not
resolve, a connection refused) is told apart, so that it is reported as not checkable here.

Grading is swebench's ``get_eval_report`` for repositories swebench knows (its log parser for
the repository, its rules), and its parsers by name with ``get_eval_tests_report`` /
``get_resolution_status`` for other repositories. :func:`grade_test_output` adds what
swebench's report cannot say: a patch that is malformed or does not apply, tests that timed out,
an instance not checkable here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.errors import InstanceError
from agent.swebench.records import Instance
from agent.swebench.specs import InstanceSpec, table_specs

TESTBED = "/testbed"
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
HEREDOC = "EOF_114329324912"
#: How a failed name resolution or a refused connection reads in a test log, whatever the
#: library (socket, urllib3, requests, httpx, curl): the error as raised or printed, not a bare
#: name (pytest's own tests print the builtins, ``ConnectionRefusedError`` among them).
NETWORK_SIGNS = re.compile(
    r"\[Errno -?\d+\] (?:Temporary failure in name resolution|Name or service not known"
    r"|No address associated with hostname|nodename nor servname provided)"
    r"|\[Errno (?:111|61|10061)\] Connection refused|ConnectionRefusedError: |NameResolutionError"
    r"|getaddrinfo failed|Failed to establish a new connection|Could not resolve host"
    r"|\[Errno 101\] Network is unreachable"
)


# --------------------------------------------------------------------------------------------
# Evaluation scripts and grading


def test_files(patch: str) -> list[str]:
    """The files a diff touches (its ``+++ b/`` side; deleted files from ``--- a/``)."""
    out: list[str] = []
    for line in patch.splitlines():
        for prefix in ("+++ b/", "--- a/"):
            if line.startswith(prefix):
                path = line[len(prefix) :].split("\t")[0].strip()
                if path not in out:
                    out.append(path)
    return out


def _pytest_ids(ids: Sequence[str]) -> bool:
    """True when every id is a whole pytest node id (``path::name``, brackets balanced)."""
    return bool(ids) and all(
        "::" in i and i.split("::")[0].endswith(".py") and i.count("[") == i.count("]") for i in ids
    )


def eval_script(instance: Instance, spec: InstanceSpec, source: str = "record") -> str:
    """The script that applies ``test_patch`` and runs the instance's tests, in the harness's
    shape (``set -uxo pipefail``, the test output between the start and end markers).
    ``source="harness"``: the one the installed harness writes from its table even where the
    record carries its own (a later fix of the dataset, e.g. astropy-8872's
    ``export SETUPTOOLS_USE_DISTUTILS=stdlib``), as reports graded before that fix were."""
    specs = table_specs(instance) if spec.source != "record" else None
    if spec.eval_script and not (source == "harness" and specs is not None):
        return spec.eval_script
    if specs is not None:
        from swebench.harness.test_spec.python import make_eval_script_list_py

        body = make_eval_script_list_py(
            instance.record, specs, "testbed", TESTBED, instance.base_commit, instance.test_patch
        )
        return "\n".join(["#!/bin/bash", "set -uxo pipefail", *body]) + "\n"
    files = test_files(instance.test_patch)
    tests = [*instance.fail_to_pass, *instance.pass_to_pass]
    if spec.log_parser.endswith("pytest") and _pytest_ids(tests):
        selection = list(dict.fromkeys(tests))
    else:
        selection = [f for f in files if not f.endswith((".json", ".txt", ".md", ".yml"))]
    reset = f"git checkout {instance.base_commit} -- " + " ".join(map(shlex.quote, files))
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {TESTBED}",
        "git status",
        "git -c core.fileMode=false diff",
        *([reset] if files else []),
        f"git apply --verbose --reject - <<'{HEREDOC}'",
        instance.test_patch.rstrip("\n"),
        HEREDOC,
        f"echo {shlex.quote(START_TEST_OUTPUT)}",
        f"{spec.test_cmd} " + " ".join(shlex.quote(s) for s in selection),
        f"echo {shlex.quote(END_TEST_OUTPUT)}",
        *([reset] if files else []),
    ]
    return "\n".join(lines) + "\n"


def _parser(spec: InstanceSpec, repo: str) -> Callable[[str, Any], dict[str, str]]:
    from swebench.harness import log_parsers

    name = spec.log_parser
    if name.startswith("repo:"):
        table = getattr(log_parsers, "MAP_REPO_TO_PARSER", {})
        if repo in table:
            return table[repo]
        name = "parse_log_pytest"
    if not name.startswith("parse_log_"):
        name = f"parse_log_{name}"
    registry = getattr(log_parsers, "PARSER_REGISTRY", None)
    if registry is not None and name in registry:
        return registry[name]
    for module in ("python", "javascript", "java", "go", "rust", "ruby", "php", "c"):
        try:
            mod = __import__(f"swebench.harness.log_parsers.{module}", fromlist=[name])
        except ImportError:
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    raise InstanceError(f"swebench has no log parser {spec.log_parser!r}")


def _test_spec(instance: Instance) -> Any:
    """swebench's TestSpec for grading; no script in it is used (they would need the network)."""
    from swebench.harness.constants import MAP_REPO_TO_EXT
    from swebench.harness.test_spec.test_spec import TestSpec

    return TestSpec(
        instance_id=instance.instance_id,
        repo=instance.repo,
        version=instance.version,
        repo_script_list=[],
        eval_script_list=[],
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=instance.fail_to_pass,
        PASS_TO_PASS=instance.pass_to_pass,
        language=MAP_REPO_TO_EXT.get(instance.repo, "py"),
        docker_specs={},
        namespace=None,
    )


def grade(
    instance: Instance,
    spec: InstanceSpec,
    prediction: Mapping[str, Any],
    log_path: Path,
) -> dict[str, Any]:
    """swebench's per-instance report ``{instance_id: {patch_is_None, patch_exists,
    patch_successfully_applied, resolved, tests_status}}`` for the log at ``log_path``."""
    try:
        from swebench.harness import grading
        from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
    except ImportError:
        raise InstanceError(
            "grading needs the swebench package: pip install 'pgs-agent[swebench]'"
        ) from None
    if instance.repo in MAP_REPO_TO_PARSER and table_specs(instance) is not None:
        report: dict[str, Any] = grading.get_eval_report(
            test_spec=_test_spec(instance),
            prediction=dict(prediction),
            test_log_path=str(log_path),
            include_tests_status=True,
        )
        return report
    return _grade_compat(instance, spec, prediction, log_path)


def _grade_compat(
    instance: Instance, spec: InstanceSpec, prediction: Mapping[str, Any], log_path: Path
) -> dict[str, Any]:
    """swebench 4.x: its parser and rules, for repositories its parser table lacks."""
    from swebench.harness.constants import EvalType, ResolvedStatus
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    iid = instance.instance_id
    out: dict[str, Any] = {
        "patch_is_None": prediction.get("model_patch") is None,
        "patch_exists": prediction.get("model_patch") is not None,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    content = log_path.read_text(errors="replace")
    if out["patch_is_None"] or APPLY_PATCH_FAIL in content or START_TEST_OUTPUT not in content:
        return {iid: out}
    sliced = content.split(START_TEST_OUTPUT, 1)[1].split(END_TEST_OUTPUT, 1)[0]
    status_map = _parser(spec, instance.repo)(sliced, None)
    out["patch_successfully_applied"] = True
    gold = {"FAIL_TO_PASS": instance.fail_to_pass, "PASS_TO_PASS": instance.pass_to_pass}
    report = get_eval_tests_report(status_map, gold, eval_type=EvalType(spec.eval_type))
    out["resolved"] = get_resolution_status(report) == ResolvedStatus.FULL.value
    out["tests_status"] = report
    return {iid: out}


def network_failure(log: str, *, network: bool = False) -> str | None:
    """Why the tests in ``log`` could not be checked here, or None: the first line of the test
    output that shows a name that did not resolve or a refused connection. Called for runs that
    did not resolve, so a passing test that expects a refusal does not count."""
    section = log.split(START_TEST_OUTPUT, 1)[-1].split(END_TEST_OUTPUT, 1)[0]
    for line in section.splitlines():
        found = NETWORK_SIGNS.search(line)
        if found is None:
            continue
        sign = found.group(0).strip(": ")
        where = "with --network" if network else "the network is off here (--network turns it on)"
        return (
            f"tests need a service this run could not reach ({sign}; {where}): "
            f"{' '.join(line.split())[:200]}"
        )
    return None


# --------------------------------------------------------------------------------------------
# pgs's reading of a test output: what swebench's report cannot say


#: How the harness ends the test output of a run that timed out.
TIMEOUT = re.compile(r"\n\nTimeout error: (\d+(?:\.\d+)?) seconds exceeded\.\s*\Z")

#: What ``git apply`` and ``patch`` say of a patch that is not a diff at all.
MALFORMED_SIGNS = (
    "corrupt patch",
    "No valid patches in input",
    "patch fragment without header",
    "unrecognized input",
    "Only garbage was found",
    "malformed patch",
)


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


def grade_test_output(
    instance: Instance,
    spec: Any,
    prediction: dict[str, Any],
    test_output: Path,
    *,
    network: bool,
    deviations: list[str],
    timeout: float | None = None,
) -> tuple[dict[str, Any], str, str, str]:
    """Grade ``test_output`` (what :func:`agent.swebench.run_instance.evaluate_one` wrote) with
    swebench's rules (:func:`grade`) and add pgs's fields: why a patch was not graded
    (``error``: malformed, does not apply, the tests timed out), why an unresolved instance is
    not checkable here (``not_checkable``, :func:`network_failure`), the environment's
    ``deviations``. (report, kind, error, reason); kind is resolved, unresolved, not_checkable
    or error."""
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
