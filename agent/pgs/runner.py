"""Running tests in the sandbox: pytest with the plugin, or the user's test command.

Everything runs through a :class:`~envs.sandbox.Sandbox` with pytest and the plugin
``agent/pgs/pgs_pytest_plugin.py`` (copied into the sandbox with its companion module
``pgs_pytest_plugin_results.py`` by :func:`install_plugin`), which
writes one JSON :class:`~agent.pgs.report.CheckReport` per run:

- :func:`run_pytest` runs targets (files or node ids) under a time limit for the whole run,
  with ``settings.seed`` as the Hypothesis seed (``PGS_SEED``; None: derandomised) and
  ``settings.max_examples`` inputs per property;
- :func:`run_test_cmd` runs ``--test-cmd`` as one result;
- :func:`run_repo_tests` is the one or the other, as the settings say.
"""

from __future__ import annotations

import posixpath
import shlex
import uuid
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent.pgs.report import TEST_CMD_PREFIX, CheckReport, TestResult
from envs.sandbox import Sandbox

PLUGIN_FILE = Path(__file__).with_name("pgs_pytest_plugin.py")
#: Every file of the plugin: it imports the second as a top-level module beside it.
PLUGIN_FILES = (PLUGIN_FILE, PLUGIN_FILE.with_name("pgs_pytest_plugin_results.py"))
#: Folder under the sandbox's home that holds the plugin, reports and Hypothesis's storage.
PLUGIN_DIR = ".pgs_plugin"
#: Characters of pytest's own output kept when something goes wrong with the run itself.
OUTPUT_TAIL = 4000


class CheckSettings(BaseModel):
    """How properties and tests are run in the sandbox."""

    model_config = ConfigDict(extra="forbid")
    max_examples: int = Field(
        64,
        gt=0,
        description="inputs Hypothesis generates per property in each check (the PGS paper "
        "draws 64 per property per round)",
    )
    keep_inputs: int = Field(
        16,
        ge=0,
        description="distinct failing inputs kept per property beyond the one Hypothesis "
        "shrinks to (the shortest; the feedback picks among all of them)",
    )
    seed: int | None = Field(
        None,
        description="the Hypothesis seed of a check: None runs derandomised (the same inputs "
        "every time); PGS gives every check its own (--pgs.seed)",
    )
    deadline_ms: int = Field(
        1000, ge=0, description="Hypothesis deadline per example, in ms (0: none)"
    )
    test_timeout: float = Field(20.0, gt=0, description="time limit per test, in seconds")
    run_timeout: float = Field(600.0, gt=0, description="time limit per pytest run, in seconds")
    python: str = Field("python3", description="the repository's Python in the sandbox")
    test_cmd: str | None = Field(
        None,
        description="a shell command that runs the repository's tests instead of the test "
        "files that import the changed modules (non-zero exit: failure)",
    )
    budget: float = Field(
        300.0,
        ge=0,
        description="seconds the related test files may take on the original code; those that "
        "do not fit (the least related) are left out of the check, and its report says which "
        "(0: no budget)",
    )
    shrink: bool | None = Field(
        None,
        description="Hypothesis's shrink phase: on, off, or unset: from the feedback mode (on "
        "for property-min; off for property and io, whose feedback is the first failing input "
        "found, unshrunk: the ablation without minimisation)",
    )


# -- running pytest ------------------------------------------------------------------------------


def plugin_dir(sandbox: Sandbox) -> str:
    home = getattr(sandbox, "home", None) or "/tmp"
    return posixpath.join(home, PLUGIN_DIR)


def install_plugin(sandbox: Sandbox) -> str:
    """Copy the plugin into the sandbox; return the folder to put on ``PYTHONPATH``."""
    folder = plugin_dir(sandbox)
    for file in PLUGIN_FILES:
        sandbox.write_file(posixpath.join(folder, file.name), file.read_bytes())
    return folder


def tail(text: str, limit: int = OUTPUT_TAIL) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def run_pytest(
    sandbox: Sandbox,
    targets: list[str],
    *,
    settings: CheckSettings,
    timeout: float,
    deselect: Sequence[str] = (),
) -> CheckReport:
    """Run pytest on ``targets`` in the repository and return the plugin's report.

    ``deselect``: node ids (or prefixes) of tests in the targets not to run.

    No targets: an empty report (never the whole suite by accident). A run longer than
    ``timeout`` is one ``timeout`` result; a run that writes no report (pytest itself crashed)
    is a report whose ``errors`` hold the end of pytest's output.
    """
    if not targets:
        return CheckReport()
    folder = install_plugin(sandbox)
    report_path = posixpath.join(folder, f"report-{uuid.uuid4().hex[:12]}.json")
    env = {
        "PGS_REPORT": report_path,
        "PGS_MAX_EXAMPLES": str(settings.max_examples),
        "PGS_KEEP_INPUTS": str(settings.keep_inputs),
        "PGS_DEADLINE_MS": str(settings.deadline_ms),
        "PGS_TEST_TIMEOUT": f"{settings.test_timeout:g}",
        "PGS_SHRINK": "0" if settings.shrink is False else "1",
        # Hypothesis would otherwise write .hypothesis/ into the repository.
        "HYPOTHESIS_STORAGE_DIRECTORY": posixpath.join(folder, "hypothesis"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = (
        f'PYTHONPATH={shlex.quote(folder)}"${{PYTHONPATH:+:$PYTHONPATH}}" '
        f"{shlex.quote(settings.python)} -m pytest -p pgs_pytest_plugin -q -p no:cacheprovider "
        "--continue-on-collection-errors "
        + "".join(f"--deselect {shlex.quote(d)} " for d in deselect)
        + "-- "
        + " ".join(shlex.quote(t) for t in targets)
    )
    if settings.seed is not None:
        env["PGS_SEED"] = str(settings.seed)
    done = sandbox.run(command, timeout=timeout, env=env)
    try:
        if done.timed_out:
            return _run_timed_out(targets, timeout, done.output, done.duration)
        try:
            raw = sandbox.read_file(report_path)
        except FileNotFoundError:
            return CheckReport(
                errors=[
                    f"pytest wrote no report (exit code {done.exit_code}); its output ends:\n"
                    + tail(done.output)
                ],
                exit_code=done.exit_code,
                duration=done.duration,
            )
        return CheckReport.model_validate_json(raw)
    finally:
        sandbox.run(f"rm -f {shlex.quote(report_path)} {shlex.quote(report_path + '.tmp')}")


def _run_timed_out(targets: list[str], timeout: float, output: str, took: float) -> CheckReport:
    result = TestResult(
        nodeid=" ".join(targets),
        outcome="timeout",
        category="timeout",
        exception=f"the test run took longer than its time limit of {timeout:g} s",
        output=tail(output),
        duration=took,
    )
    return CheckReport(results=[result], exit_code=-1, duration=took)


def run_test_cmd(sandbox: Sandbox, *, settings: CheckSettings) -> CheckReport:
    """The user's test command as one result: ``wrong_answer`` on a non-zero exit."""
    command = settings.test_cmd
    if not command:
        return CheckReport()
    done = sandbox.run(command, timeout=settings.run_timeout)
    result = TestResult(nodeid=TEST_CMD_PREFIX + command, outcome="passed", category="pass")
    if done.timed_out:
        result.outcome, result.category = "timeout", "timeout"
        result.exception = f"the command took longer than {settings.run_timeout:g} s"
    elif done.exit_code != 0:
        result.outcome, result.category = "failed", "wrong_answer"
        result.returned = f"the command exited with code {done.exit_code}"
    if result.failed:
        result.output = tail(done.output)
    result.duration = done.duration
    return CheckReport(results=[result], exit_code=done.exit_code, duration=done.duration)


def run_repo_tests(sandbox: Sandbox, targets: list[str], *, settings: CheckSettings) -> CheckReport:
    """The repository's tests: ``settings.test_cmd`` when given, else pytest on ``targets``."""
    if settings.test_cmd:
        return run_test_cmd(sandbox, settings=settings)
    return run_pytest(sandbox, targets, settings=settings, timeout=settings.run_timeout)
