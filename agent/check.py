"""Checking code in the sandbox: run properties and repository tests, validate, compare.

The host side of the PGS feedback loop (DESIGN.md §2). Everything runs through a
:class:`~envs.sandbox.Sandbox` with pytest and the plugin ``agent/pgs_pytest_plugin.py``, which
writes one JSON :class:`~agent.report.CheckReport` per run:

- :func:`run_pytest` runs targets (files or node ids) under a time limit for the whole run;
- :func:`validate_properties` is PGS's soundness filter, on a report of the ORIGINAL code;
- :func:`related_tests` finds the repository test files that import what a patch changed;
- :class:`Baseline` caches the repository tests' results on the original code per commit;
- :func:`check_candidate` runs the kept properties and the related tests against a candidate
  and counts only what the candidate is responsible for.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
import shlex
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent.report import CheckReport, TestResult
from envs.sandbox import SCRATCH_DIRS, Sandbox

PLUGIN_FILE = Path(__file__).with_name("pgs_pytest_plugin.py")
#: Folder under the sandbox's home that holds the plugin, reports and Hypothesis's storage.
PLUGIN_DIR = ".pgs_plugin"
#: Characters of pytest's own output kept when something goes wrong with the run itself.
OUTPUT_TAIL = 4000
#: Exceptions by which Hypothesis says the property, not the code, is at fault.
BAD_STRATEGY = {"InvalidArgument", "InvalidDefinition", "ResolutionFailed"}
NO_INPUTS = {"Unsatisfiable", "FailedHealthCheck"}
#: Words by which an issue says it is about speed or a hang (then a timeout shows the bug).
SLOW_WORDS = re.compile(
    r"\b(hangs?|hanging|hung|infinite|forever|freezes?|slow|timeout|times? out|never returns?)\b",
    re.IGNORECASE,
)


class CheckError(RuntimeError):
    """Checking could not be done (a patch that does not parse or apply back)."""


class CheckSettings(BaseModel):
    """How properties and tests are run in the sandbox."""

    model_config = ConfigDict(extra="forbid")
    max_examples: int = Field(100, gt=0, description="Hypothesis examples per property")
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


class Dropped(BaseModel):
    """A property the soundness filter removed, and why."""

    model_config = ConfigDict(extra="forbid")
    nodeid: str
    reason: str


# -- running pytest ------------------------------------------------------------------------------


def _plugin_dir(sandbox: Sandbox) -> str:
    home = getattr(sandbox, "home", None) or "/tmp"
    return posixpath.join(home, PLUGIN_DIR)


def install_plugin(sandbox: Sandbox) -> str:
    """Copy the plugin into the sandbox; return the folder to put on ``PYTHONPATH``."""
    folder = _plugin_dir(sandbox)
    sandbox.write_file(posixpath.join(folder, PLUGIN_FILE.name), PLUGIN_FILE.read_bytes())
    return folder


def _tail(text: str, limit: int = OUTPUT_TAIL) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def run_pytest(
    sandbox: Sandbox, targets: list[str], *, settings: CheckSettings, timeout: float
) -> CheckReport:
    """Run pytest on ``targets`` in the repository and return the plugin's report.

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
        "PGS_DEADLINE_MS": str(settings.deadline_ms),
        "PGS_TEST_TIMEOUT": f"{settings.test_timeout:g}",
        # Hypothesis would otherwise write .hypothesis/ into the repository.
        "HYPOTHESIS_STORAGE_DIRECTORY": posixpath.join(folder, "hypothesis"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = (
        f'PYTHONPATH={shlex.quote(folder)}"${{PYTHONPATH:+:$PYTHONPATH}}" '
        f"{shlex.quote(settings.python)} -m pytest -p pgs_pytest_plugin -q -p no:cacheprovider "
        "--continue-on-collection-errors -- " + " ".join(shlex.quote(t) for t in targets)
    )
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
                    + _tail(done.output)
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
        output=_tail(output),
        duration=took,
    )
    return CheckReport(results=[result], exit_code=-1, duration=took)


def run_test_cmd(sandbox: Sandbox, *, settings: CheckSettings) -> CheckReport:
    """The user's test command as one result: ``wrong_answer`` on a non-zero exit."""
    command = settings.test_cmd
    if not command:
        return CheckReport()
    done = sandbox.run(command, timeout=settings.run_timeout)
    result = TestResult(nodeid=f"test_cmd: {command}", outcome="passed", category="pass")
    if done.timed_out:
        result.outcome, result.category = "timeout", "timeout"
        result.exception = f"the command took longer than {settings.run_timeout:g} s"
    elif done.exit_code != 0:
        result.outcome, result.category = "failed", "wrong_answer"
        result.returned = f"the command exited with code {done.exit_code}"
    if result.failed:
        result.output = _tail(done.output)
    result.duration = done.duration
    return CheckReport(results=[result], exit_code=done.exit_code, duration=done.duration)


def run_repo_tests(sandbox: Sandbox, targets: list[str], *, settings: CheckSettings) -> CheckReport:
    """The repository's tests: ``settings.test_cmd`` when given, else pytest on ``targets``."""
    if settings.test_cmd:
        return run_test_cmd(sandbox, settings=settings)
    return run_pytest(sandbox, targets, settings=settings, timeout=settings.run_timeout)


# -- the soundness filter ----------------------------------------------------------------------


def _exception_type(result: TestResult) -> str:
    return (result.exception or "").split(":", 1)[0].strip()


def _raised_in_test(result: TestResult) -> bool:
    """True when the innermost frame of the trace is in the property's own file."""
    frames = [line for line in (result.trace or "").splitlines() if not line.startswith(" ")]
    if not frames:
        return False
    return frames[-1].split(":", 1)[0] == result.nodeid.split("::", 1)[0]


def _mentions(text: str, word: str) -> bool:
    return bool(word) and re.search(rf"\b{re.escape(word)}\b", text) is not None


def _shown(result: TestResult) -> str:
    shown = result.example or result.returned or result.exception or result.category
    return shown.splitlines()[0] if shown else result.category


def _unusable(result: TestResult) -> str | None:
    """Why a property cannot be used whatever its kind, or None."""
    error = _exception_type(result)
    if result.outcome == "error":
        if "::" not in result.nodeid:
            return f"the file does not import: {result.exception}"
        return f"it errors before it runs: {result.exception}"
    if error in BAD_STRATEGY:
        return f"bad strategy ({error}): {result.exception}"
    if error in NO_INPUTS:
        return f"its strategy cannot produce enough valid inputs ({error}): {result.exception}"
    if error in ("Flaky", "FlakyFailure") and result.category != "timeout":
        return f"flaky on the original code: {result.exception}"
    if result.category == "runtime_error" and _raised_in_test(result):
        return f"the property itself raised {result.exception}"
    if result.kind == "repo":
        return "it has neither a pgs_issue nor a pgs_regression marker"
    if result.outcome == "skipped":
        return "skipped on the original code"
    return None


def _issue_verdict(result: TestResult, issue_text: str) -> str | None:
    """None to keep an issue property (it shows the bug on the original), else the reason."""
    if result.category in ("property_violation", "wrong_answer"):
        return None
    if result.category == "pass":
        return "passes on the original code: does not capture the bug"
    if result.category == "timeout":
        if SLOW_WORDS.search(issue_text):
            return None
        return "times out on the original code, and the issue is not about speed or a hang"
    error = _exception_type(result)
    if _mentions(issue_text, error):
        return None
    return f"fails on the original code by {error or 'an error'}, which the issue does not mention"


def validate_properties(report: CheckReport, issue_text: str) -> tuple[list[str], list[Dropped]]:
    """PGS's soundness filter, on a run of the properties alone against the ORIGINAL code.

    Keeps an issue property that fails by its assertion, by an exception the issue names, or
    (when the issue is about a hang or slowness) by the time limit; keeps a regression property
    that passes. Drops the rest with a reason; a file that does not import is dropped as a whole
    (its node id is the file). Returns the kept node ids, in report order, and the dropped.
    """
    kept: list[str] = []
    dropped: list[Dropped] = []
    for result in report.results:
        reason = _unusable(result)
        if reason is None and result.kind == "issue":
            reason = _issue_verdict(result, issue_text)
        elif reason is None and result.failed:  # a regression property must hold on the original
            reason = f"unsound: fails on the original code ({result.category}: {_shown(result)})"
        if reason is None:
            kept.append(result.nodeid)
        else:
            dropped.append(Dropped(nodeid=result.nodeid, reason=reason))
    known = {r.nodeid for r in report.results}
    for error in report.errors:  # collection errors not already a result (older reports)
        nodeid = error.split(": ", 1)[0]
        if nodeid not in known:
            dropped.append(Dropped(nodeid=nodeid, reason=f"the file does not import: {error}"))
    return kept, dropped


# -- which repository tests are relevant --------------------------------------------------------


def changed_files(patch: str) -> list[str]:
    """Paths a patch touches (added, modified, removed; renames by their new path), in order."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        patched = PatchSet(patch)
    except UnidiffParseError as e:
        raise CheckError(f"the patch cannot be parsed: {e}") from e
    paths: list[str] = []
    for changed in patched:
        path = changed.path
        if path not in paths:
            paths.append(path)
    return paths


def is_test_file(path: str) -> bool:
    name = posixpath.basename(path)
    in_scratch = any(path == d or path.startswith(d + "/") for d in SCRATCH_DIRS)
    test_name = name.startswith("test_") or name.endswith("_test.py")
    return name.endswith(".py") and test_name and not in_scratch


def module_names(path: str) -> set[str]:
    """The names a Python file can be imported by: ``src/pkg/mod.py`` -> pkg.mod, src.pkg.mod.

    A single name (``mod``) only when the module is top-level (at the root, or under ``src/``
    or ``lib/``): a bare ``import utils`` elsewhere is too often another module.
    """
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return set()
    names = {".".join(parts[i:]) for i in range(len(parts)) if len(parts) - i >= 2}
    if len(parts) == 1 or (len(parts) == 2 and parts[0] in ("src", "lib")):
        names.add(parts[-1])
    return names


def imported_modules(source: str, path: str) -> set[str]:
    """Every module ``source`` may import: ``import a.b``, ``from a import b`` (a, a.b), and
    relative imports resolved against ``path``'s folder."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _imports_by_regex(source)
    package = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*up, *([base] if base else [])])
            if base:
                found.add(base)
            found.update(f"{base}.{a.name}" if base else a.name for a in node.names)
    return found


def _imports_by_regex(source: str) -> set[str]:
    found: set[str] = set()
    for match in re.finditer(r"^\s*from\s+([\w.]+)\s+import\s+([\w, ]+)", source, re.MULTILINE):
        found.add(match[1])
        found.update(f"{match[1]}.{n.strip()}" for n in match[2].split(",") if n.strip())
    for match in re.finditer(r"^\s*import\s+([\w., ]+)", source, re.MULTILINE):
        found.update(n.split(" as ")[0].strip() for n in match[1].split(",") if n.strip())
    return found


def related_tests(sandbox: Sandbox, changed_files: list[str]) -> list[str]:
    """Repository test files (``test_*.py``, ``*_test.py``; not the scratch folder) that import
    a module the patch changed, plus changed test files themselves; sorted."""
    modules: set[str] = set()
    for path in changed_files:
        if path.endswith(".py"):
            modules |= module_names(path)
    related = {p for p in changed_files if is_test_file(p)}
    if modules:
        words = sorted({m.rsplit(".", 1)[-1] for m in modules})
        grep = "git grep -l -I -w -F --untracked " + " ".join(f"-e {shlex.quote(w)}" for w in words)
        done = sandbox.run(f"{grep} -- '*.py'")
        for path in done.output.splitlines():
            if not is_test_file(path):
                continue
            try:
                source = sandbox.read_file(path).decode("utf-8", "replace")
            except FileNotFoundError:
                continue
            if imported_modules(source, path) & modules:
                related.add(path)
    return sorted(related)


# -- the original code's results, and what a candidate broke ----------------------------------


def _belongs_to(nodeid: str, target: str) -> bool:
    return nodeid == target or nodeid.startswith((target + "::", target.rstrip("/") + "/"))


@contextmanager
def original_code(sandbox: Sandbox, commit: str) -> Iterator[None]:
    """The repository as it was at ``commit`` for the duration, the candidate's changes put
    back afterwards (the scratch folder is never touched)."""
    patch = sandbox.diff(base=commit)
    if not patch.strip():
        yield
        return
    saved = posixpath.join(_plugin_dir(sandbox), f"candidate-{uuid.uuid4().hex[:8]}.patch")
    sandbox.write_file(saved, patch)
    undone = sandbox.run(f"git apply -R --binary {shlex.quote(saved)}")
    if not undone.ok:
        raise CheckError(f"cannot take the candidate's changes out:\n{_tail(undone.output)}")
    try:
        yield
    finally:
        redone = sandbox.run(f"git apply --binary {shlex.quote(saved)}")
        if not redone.ok:
            raise CheckError(
                f"cannot put the candidate's changes back (saved in {saved}):\n"
                + _tail(redone.output)
            )
        sandbox.run(f"rm -f {shlex.quote(saved)}")


class _Entry(BaseModel):
    results: list[TestResult] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class Baseline:
    """Results of repository tests on the original code, per (commit, target), so the original
    runs once per commit and target: in memory, and in ``path`` (JSON) when given."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._cache: dict[str, dict[str, _Entry]] = {}
        if path is not None and path.is_file():
            data = json.loads(path.read_text())
            self._cache = {
                commit: {t: _Entry.model_validate(e) for t, e in by_target.items()}
                for commit, by_target in data.items()
            }

    @staticmethod
    def _targets(targets: Sequence[str], settings: CheckSettings | None) -> list[str]:
        if settings is not None and settings.test_cmd:
            return [f"test_cmd: {settings.test_cmd}"]
        return list(targets)

    def get(
        self, commit: str, targets: Sequence[str], *, settings: CheckSettings | None = None
    ) -> CheckReport | None:
        """The cached report for ``targets`` at ``commit``, or None if any target is missing."""
        by_target = self._cache.get(commit, {})
        keys = self._targets(targets, settings)
        if any(t not in by_target for t in keys):
            return None
        report = CheckReport()
        for target in keys:
            report.results.extend(by_target[target].results)
            report.errors.extend(by_target[target].errors)
        return report

    def put(self, commit: str, targets: Sequence[str], report: CheckReport) -> None:
        """Store a run of ``targets``: each result (and error) under the target it belongs to."""
        by_target = self._cache.setdefault(commit, {})
        for target in targets:
            entry = _Entry(
                results=[r for r in report.results if _belongs_to(r.nodeid, target)],
                errors=[e for e in report.errors if _belongs_to(e.split(": ", 1)[0], target)],
            )
            if len(targets) == 1:  # everything belongs to the only target (a timeout, a crash)
                entry = _Entry(results=list(report.results), errors=list(report.errors))
            by_target[target] = entry
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data = {
                c: {t: e.model_dump(mode="json") for t, e in by_t.items()}
                for c, by_t in self._cache.items()
            }
            self.path.write_text(json.dumps(data, indent=1))

    def ensure(
        self, sandbox: Sandbox, commit: str, targets: Sequence[str], *, settings: CheckSettings
    ) -> CheckReport:
        """The original code's report for ``targets``, running only the targets not cached.

        The sandbox may hold a candidate: its changes are taken out for the run and put back.
        """
        keys = self._targets(targets, settings)
        missing = [t for t in keys if t not in self._cache.get(commit, {})]
        if missing:
            with original_code(sandbox, commit):
                report = run_repo_tests(sandbox, missing, settings=settings)
            self.put(commit, missing, report)
        cached = self.get(commit, keys)
        assert cached is not None
        return cached


def regressions(baseline: CheckReport, now: CheckReport) -> list[TestResult]:
    """Tests that passed on the original code and fail now, as ``wrong_answer``."""
    before = baseline.by_id()
    found = []
    for result in now.results:
        old = before.get(result.nodeid)
        if result.failed and old is not None and not old.failed:
            found.append(
                result.model_copy(
                    update={"category": "wrong_answer", "note": "passed before the patch"}
                )
            )
    return found


def against_baseline(now: CheckReport, baseline: CheckReport | None) -> CheckReport:
    """``now`` without the repository failures the original code had too; a test that passed
    before and fails now is marked a regression (see :func:`regressions`)."""
    if baseline is None:
        return now
    before = baseline.by_id()
    regressed = {r.nodeid: r for r in regressions(baseline, now)}
    old_errors = {e.split(": ", 1)[0] for e in baseline.errors}
    results = []
    for result in now.results:
        old = before.get(result.nodeid)
        if result.kind == "repo" and result.failed and old is not None and old.failed:
            continue  # failed on the original code as well: not the candidate's doing
        results.append(regressed.get(result.nodeid, result))
    errors = [e for e in now.errors if e.split(": ", 1)[0] not in old_errors]
    return now.model_copy(update={"results": results, "errors": errors})


def check_candidate(
    sandbox: Sandbox,
    *,
    properties: list[str],
    repo_tests: list[str],
    baseline: CheckReport | None,
    settings: CheckSettings,
) -> CheckReport:
    """Run the kept properties and the related repository tests (one pytest run) against the
    code in the sandbox; with ``settings.test_cmd``, that command instead of the tests.

    Repository failures the ``baseline`` (the original code's report) shares are not counted.
    """
    targets = [*properties, *([] if settings.test_cmd else repo_tests)]
    report = run_pytest(sandbox, targets, settings=settings, timeout=settings.run_timeout)
    if settings.test_cmd:
        command = run_test_cmd(sandbox, settings=settings)
        report.results.extend(command.results)
        report.duration += command.duration
        if command.exit_code and not report.exit_code:
            report.exit_code = command.exit_code
    return against_baseline(report, baseline)
