"""Running tests in the sandbox: pytest with the plugin, or the user's test command.

Everything runs through a :class:`~envs.sandbox.Sandbox` with pytest and the plugin
``agent/pgs/pgs_pytest_plugin.py`` (copied into the sandbox with its companion module
``pgs_pytest_plugin_results.py`` and the launcher ``pgs_pytest_plugin_start.py`` by
:func:`install_plugin`), which writes one JSON :class:`~agent.record.check.CheckReport` per
run. pytest is started by the launcher so that only pgs decides what loads (docs/checking.md,
"How pytest is started"):

- :func:`pin_entry_points` records the ``pytest11`` entry points of the original environment
  (:func:`pinned` puts them in the settings), before the Generator has run anything;
- :func:`pytest_command` is the one command line of every pytest run of a check, and of the
  rerun the feedback tells the Generator;
- :func:`run_pytest` runs targets (files or node ids) under a time limit for the whole run,
  with ``settings.seed`` as the Hypothesis seed (``PGS_SEED``; None: derandomised) and
  ``settings.max_examples`` inputs per property;
- :func:`run_test_cmd` runs ``--test-cmd`` as one result;
- :func:`run_repo_tests` is the one or the other, as the settings say.
"""

from __future__ import annotations

import json
import logging
import posixpath
import shlex
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.core.prompts import CONFIG_ONLY
from agent.record.check import TEST_CMD_PREFIX, CheckReport, TestResult
from envs.sandbox import Sandbox

logger = logging.getLogger(__name__)

PLUGIN_FILE = Path(__file__).with_name("pgs_pytest_plugin.py")
#: The launcher every pytest run starts with (:func:`pytest_command`).
LAUNCHER = PLUGIN_FILE.with_name("pgs_pytest_plugin_start.py")
#: Every file of the plugin: it imports its companions as top-level modules beside it; the
#: launcher loads them from its own folder.
PLUGIN_FILES = (
    PLUGIN_FILE,
    *(
        PLUGIN_FILE.with_name(f"pgs_pytest_plugin_{part}.py")
        for part in ("hard", "results", "oracle", "inputs", "passes")
    ),
    LAUNCHER,
)
#: Folder under the sandbox's home that holds the plugin, reports and Hypothesis's storage.
PLUGIN_DIR = ".pgs_plugin"
#: Characters of pytest's own output kept when something goes wrong with the run itself.
OUTPUT_TAIL = 4000


#: The two orders of shrinking and picking (``PGS_SHRINK_ORDER``).
ShrinkOrder = Literal["shrink-then-pick", "pick-then-shrink"]


class EntryPoint(BaseModel):
    """A ``pytest11`` entry point: what pytest would load, and from which distribution."""

    model_config = ConfigDict(extra="forbid")
    name: str
    value: str = Field(description="module[:attribute], as entry_points.txt says")
    dist: str = Field(description="the distribution's name")


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
        0,
        ge=0,
        description="Hypothesis deadline per example, in ms (0, the default: none; a deadline "
        "makes the feedback depend on the machine's load, test_timeout stops a hanging test)",
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
    pool: bool = Field(
        True,
        description="the pool pass: a property that fails runs every input again to the end "
        "(its explicit, replayed and generated ones), recording each distinct failing input "
        "with its runtime and line coverage; the feedback picks the fewest-token one of the "
        "pool (off: only the inputs of Hypothesis's own run and shrink)",
    )
    shrink_order: ShrinkOrder = Field(
        "shrink-then-pick",
        description="with shrinking on: shrink-then-pick (Hypothesis shrinks its first failing "
        "input, then the fewest-token input of the pool, shrunk ones too, is fed back) or "
        "pick-then-shrink (the fewest-token generated input of the pool, by the simple rule, "
        "is shrunk, then the fewest-token input is fed back)",
    )
    pool_size: int = Field(
        256, gt=0, description="most distinct failing inputs pooled per property per check"
    )
    pool_tests: bool = Field(
        False,
        description="a failing plain (non-Hypothesis) test pools one input too, itself, with "
        "its runtime and line coverage (for measuring Table 1 of the PGS paper with repository "
        "tests standing in for properties; bench/strategies.py --verified)",
    )
    entry_points: list[EntryPoint] | None = Field(
        None,
        description="the pytest11 entry points pytest may load, pinned on the original "
        "environment before the Generator ran (None: not pinned, every one loads)",
        json_schema_extra=CONFIG_ONLY,
    )
    search_examples: int | None = Field(
        None,
        gt=0,
        json_schema_extra=CONFIG_ONLY,
        description="inputs of the search after a failing explicit example (PGS_SEARCH_EXAMPLES; "
        "None: max_examples); the validation sets it higher, its finds are replayed",
    )
    properties_dir: str | None = Field(
        None,
        exclude=True,
        json_schema_extra=CONFIG_ONLY,
        description="the Tester's folder (PGS_PROPERTIES_DIR): the shared hard inputs must be "
        "drawn from there, and the plugin says so when a run's were not",
    )
    oracle: bool = Field(
        False,
        exclude=True,
        json_schema_extra=CONFIG_ONLY,
        description="the run answers the calls the issue's examples state with the stated "
        "results and runs only explicit examples (PGS_ORACLE; the soundness filter's check "
        "of issue properties against the issue's examples, agent.pgs.validate)",
    )
    replay: dict[str, list[str]] = Field(
        default_factory=dict,
        exclude=True,
        json_schema_extra=CONFIG_ONLY,
        description="{node id: [replay form, ...]}: inputs fed to those properties beside the "
        "fresh ones (PGS_REPLAY; the host sets it from the validation, agent.pgs.evidence)",
    )


# -- running pytest ------------------------------------------------------------------------------


def plugin_dir(sandbox: Sandbox) -> str:
    home = getattr(sandbox, "home", None) or "/tmp"
    return posixpath.join(home, PLUGIN_DIR)


def install_plugin(sandbox: Sandbox) -> str:
    """Copy the plugin and its launcher into the sandbox; return their folder."""
    folder = plugin_dir(sandbox)
    for file in PLUGIN_FILES:
        sandbox.write_file(posixpath.join(folder, file.name), file.read_bytes())
    return folder


def pytest_command(
    folder: str,
    targets: Sequence[str],
    *,
    settings: CheckSettings,
    deselect: Sequence[str] = (),
) -> str:
    """The shell command that runs pytest on ``targets`` from the repository's root, the
    plugin in ``folder`` (:func:`install_plugin`): an isolated interpreter (``-I``: no
    ``PYTHON*`` variable, no user site-packages, not the working folder), no bytecode (``-B``),
    pgs's launcher, and the settings' entry-point pin (``PGS_ENTRY_POINTS``; ``-I`` leaves
    the ``PGS_*`` variables alone). The plugin's other variables are the caller's."""
    pin = ""
    if settings.entry_points is not None:
        entries = [[e.name, e.value, e.dist] for e in settings.entry_points]
        pin = f"PGS_ENTRY_POINTS={shlex.quote(json.dumps(entries, separators=(',', ':')))} "
    launcher = shlex.quote(posixpath.join(folder, LAUNCHER.name))
    return (
        f"{pin}{shlex.quote(settings.python)} -I -B {launcher} -q -p no:cacheprovider "
        "--continue-on-collection-errors "
        + "".join(f"--deselect {shlex.quote(d)} " for d in deselect)
        + "-- "
        + " ".join(shlex.quote(t) for t in targets)
    )


def pin_entry_points(sandbox: Sandbox, *, python: str = "python3") -> list[EntryPoint]:
    """The ``pytest11`` entry points the launcher sees in ``sandbox``, from the repository's
    root, as every check's pytest would load them: run on the original environment, before
    the Generator can add one (a fake plugin in site-packages), they are the only ones the
    checks load. Raises ``RuntimeError`` when they cannot be read (pytest is missing)."""
    folder = install_plugin(sandbox)
    launcher = shlex.quote(posixpath.join(folder, LAUNCHER.name))
    done = sandbox.run(f"{shlex.quote(python)} -I -B {launcher} --pgs-list-entry-points")
    lines = done.output.strip().splitlines()
    try:
        entries = json.loads(lines[-1]) if done.ok and lines else None
    except ValueError:
        entries = None
    if not isinstance(entries, list):
        raise RuntimeError(f"cannot list pytest's entry points:\n{tail(done.output, 500)}")
    return [EntryPoint(name=n, value=v, dist=d) for n, v, d in entries]


def pinned(sandbox: Sandbox, settings: CheckSettings) -> CheckSettings:
    """``settings`` with the entry points pinned (:func:`pin_entry_points`), unless they are;
    when they cannot be read, unpinned, with a warning (the checks then say what is wrong)."""
    if settings.entry_points is not None:
        return settings
    try:
        entries = pin_entry_points(sandbox, python=settings.python)
    except RuntimeError as e:
        logger.warning("pytest's plugins are not pinned: %s", e)
        return settings
    return settings.model_copy(update={"entry_points": entries})


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
        "PGS_POOL": "1" if settings.pool and not settings.oracle else "0",
        "PGS_POOL_SIZE": str(settings.pool_size),
        "PGS_POOL_TESTS": "1" if settings.pool_tests else "0",
        "PGS_SHRINK_ORDER": settings.shrink_order,
        # Hypothesis would otherwise write .hypothesis/ into the repository.
        "HYPOTHESIS_STORAGE_DIRECTORY": posixpath.join(folder, "hypothesis"),
        # For the interpreters the tests start (-B is the launcher's own).
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = pytest_command(folder, targets, settings=settings, deselect=deselect)
    if settings.seed is not None:
        env["PGS_SEED"] = str(settings.seed)
    if settings.oracle:
        env["PGS_ORACLE"] = "1"
    if settings.properties_dir:
        env["PGS_PROPERTIES_DIR"] = settings.properties_dir
    if settings.search_examples:
        env["PGS_SEARCH_EXAMPLES"] = str(settings.search_examples)
    if settings.replay:
        env["PGS_REPLAY"] = report_path.replace("report-", "replay-")
        sandbox.write_file(env["PGS_REPLAY"], json.dumps(settings.replay).encode("utf-8"))
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
        replay = shlex.quote(env.get("PGS_REPLAY", report_path))
        sandbox.run(
            f"rm -f {shlex.quote(report_path)} {shlex.quote(report_path + '.tmp')} {replay}"
        )


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
