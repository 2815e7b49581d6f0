"""Checking code in the sandbox: run properties and repository tests, validate, compare.

The host side of the PGS feedback loop (DESIGN.md §2). Everything runs through a
:class:`~envs.sandbox.Sandbox` with pytest and the plugin ``agent/pgs/pgs_pytest_plugin.py``, which
writes one JSON :class:`~agent.pgs.report.CheckReport` per run:

- :func:`run_pytest` runs targets (files or node ids) under a time limit for the whole run;
- :func:`validate_properties` is PGS's soundness filter, on a report of the ORIGINAL code;
- :func:`related_tests` finds the repository test files that import what a patch changed,
  most related first;
- :class:`Baseline` caches the repository tests' results on the original code per commit, and
  runs what fits the time budget (``CheckSettings.budget``), remembering what it left out;
- :func:`check_candidate` runs the kept properties, the issue tests and the related tests
  against a candidate, leaves out what the baseline left out (and says so in the report's
  ``cut``), and counts only what the candidate is responsible for.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
import shlex
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent.pgs.report import CheckReport, TestResult
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
    budget: float = Field(
        300.0,
        ge=0,
        description="seconds the related test files may take on the original code; those that "
        "do not fit (the least related) are left out of the check, and its report says which "
        "(0: no budget)",
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
        "PGS_DEADLINE_MS": str(settings.deadline_ms),
        "PGS_TEST_TIMEOUT": f"{settings.test_timeout:g}",
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


def statement_imports(statements: str, path: str) -> set[str]:
    """:func:`imported_modules` of the text :func:`import_statements` gives: one statement
    that does not parse (Python 2, a stray continuation) spoils only itself."""
    try:
        ast.parse(statements)
    except (SyntaxError, ValueError):
        found: set[str] = set()
        for match in re.finditer(IMPORT_STATEMENT, statements, re.MULTILINE):
            found |= imported_modules(match.group(0).strip(), path)
        return found
    return imported_modules(statements, path)


def _imports_by_regex(source: str) -> set[str]:
    found: set[str] = set()
    pattern = r"^\s*from\s+([\w.]+)\s+import\s+\(?([\w, \\\n]+)"
    for match in re.finditer(pattern, source, re.MULTILINE):
        found.add(match[1])
        names = (n.strip(" \\\n") for n in match[2].split(","))
        found.update(f"{match[1]}.{n}" for n in names if n)
    for match in re.finditer(r"^\s*import\s+([\w., ]+)", source, re.MULTILINE):
        found.update(n.split(" as ")[0].strip() for n in match[1].split(",") if n.strip())
    return found


#: Folder names that hold tests rather than code (left out when comparing locations).
TEST_DIRS = {"tests", "test", "testing"}
#: Folder names that hold the packages (left out when comparing locations).
SOURCE_DIRS = {"src", "lib"}
#: pathspecs of test files, for git grep and git ls-files.
TEST_PATHSPECS = (":(glob)**/test_*.py", ":(glob)**/*_test.py")
#: An import statement as written: ``from a.b import (x,\n y)``, ``import a, b``, with ``\``
#: continuations. Only these lines are parsed: parsing whole test files (sympy's are thousands
#: of lines) took 4 s of the 6 s that finding sympy's related tests took.
IMPORT_STATEMENT = (
    r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import[ \t]*(?:\([^)]*\)|(?:[^\\\n]|\\[\s\S])*)"
    r"|import[ \t]+(?:[^\\\n]|\\[\s\S])*)"
)
#: Run in the sandbox on the files named on stdin: {path: [bytes, "import statements"]}.
_IMPORTS_SCRIPT = f"""
import json, re, sys
statement = re.compile({IMPORT_STATEMENT!r}, re.M)
out = {{}}
for path in sys.stdin.read().splitlines():
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        continue
    out[path] = [len(text), "\\n".join(m.group(0).strip() for m in statement.finditer(text))]
print(json.dumps(out))
"""


def import_statements(source: str) -> str:
    """The import statements of ``source``, one after another (what :func:`imported_modules`
    needs, without parsing the rest of a long file)."""
    found = re.finditer(IMPORT_STATEMENT, source, re.MULTILINE)
    return "\n".join(m.group(0).strip() for m in found)


def _folders(path: str, leave_out: set[str]) -> list[str]:
    return [p for p in posixpath.dirname(path).split("/") if p and p not in leave_out]


def _own_test_names(path: str) -> set[str]:
    """``pkg/mod.py`` -> test_mod.py, mod_test.py (a package's ``__init__``: its folder's name)."""
    stem = posixpath.basename(path)[: -len(".py")]
    if stem == "__init__":
        stem = posixpath.basename(posixpath.dirname(path))
    return {f"test_{stem}.py", f"{stem}_test.py"} if stem else set()


def _is_own_test(test: str, module: str) -> bool:
    """``test`` is named after ``module`` and sits where its tests go: under the module's own
    folders, or a tests folder mirroring them (tests/_core/test_scales.py for
    seaborn/_core/scales.py, sympy/core/tests/test_numbers.py for sympy/core/numbers.py)."""
    if posixpath.basename(test) not in _own_test_names(module):
        return False
    return set(_folders(test, TEST_DIRS)) <= set(_folders(module, SOURCE_DIRS))


def _nearness(test: str, modules: Sequence[str]) -> int:
    """How many folder names ``test`` shares with the nearest changed module."""
    where = set(_folders(test, TEST_DIRS))
    return max((len(where & set(_folders(m, SOURCE_DIRS))) for m in modules), default=0)


def _test_imports(sandbox: Sandbox, words: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Test files that mention one of ``words``: their size and their import statements.

    One command in the sandbox (git grep, then a short Python script); where the sandbox has no
    ``python3``, the files are read one by one."""
    specs = " ".join(shlex.quote(s) for s in TEST_PATHSPECS)
    grep = "git grep -l -I -w -F --untracked " + " ".join(f"-e {shlex.quote(w)}" for w in words)
    grep += f" -- {specs}"
    done = sandbox.run(f"{grep} | python3 -c {shlex.quote(_IMPORTS_SCRIPT)}")
    try:
        data = json.loads(done.output.strip().splitlines()[-1]) if done.ok else None
    except (json.JSONDecodeError, IndexError):
        data = None
    if isinstance(data, dict):
        return {str(p): (int(v[0]), str(v[1])) for p, v in data.items()}
    found: dict[str, tuple[int, str]] = {}
    for path in sandbox.run(grep).output.splitlines():
        try:
            source = sandbox.read_file(path).decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        found[path] = (len(source), import_statements(source))
    return found


def related_tests(sandbox: Sandbox, changed_files: list[str]) -> list[str]:
    """Repository test files (``test_*.py``, ``*_test.py``; not the scratch folder) related to
    the changed files, most related first:

    1. test files the patch changes, and the changed modules' own test files (named after the
       module, where its tests go: see :func:`_is_own_test`);
    2. test files that import a changed module (by its dotted name, or ``from pkg import mod``),
       those sharing the most folder names with a changed module first, then the smallest.

    A time budget runs them in this order (:class:`Baseline`), so what it leaves out is the
    least related."""
    modules = [p for p in changed_files if p.endswith(".py") and not is_test_file(p)]
    names: set[str] = set()
    for path in modules:
        names |= module_names(path)
    first = [p for p in changed_files if is_test_file(p)]
    importers: dict[str, int] = {}
    if names:
        words = sorted({m.rsplit(".", 1)[-1] for m in names})
        for path, (size, imports) in _test_imports(sandbox, words).items():
            if is_test_file(path) and statement_imports(imports, path) & names:
                importers[path] = size
    own = set(_own_tests(sandbox, modules))
    first += sorted(own - set(first))
    rest = sorted(
        (p for p in importers if p not in first),
        key=lambda p: (-_nearness(p, modules), importers[p], p),
    )
    return [*first, *rest]


def _own_tests(sandbox: Sandbox, modules: Sequence[str]) -> list[str]:
    wanted = {n for m in modules for n in _own_test_names(m)}
    if not wanted:
        return []
    specs = " ".join(shlex.quote(f":(glob)**/{n}") for n in sorted(wanted))
    listed = sandbox.run(f"git ls-files -co --exclude-standard -- {specs}").output.splitlines()
    return [p for p in listed if is_test_file(p) and any(_is_own_test(p, m) for m in modules)]


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


#: The note of a baseline result standing for a test file a time budget left out.
CUT_NOTE = "left out by the time budget: "


class _Entry(BaseModel):
    results: list[TestResult] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    #: The file's share of its run's wall time on the original code.
    seconds: float = 0.0
    #: Why a time budget left the file out (None: it ran), and that budget.
    cut: str | None = None
    budget: float = 0.0


def _cut_marker(target: str, reason: str) -> TestResult:
    return TestResult(
        nodeid=target, outcome="skipped", category="pass", note=CUT_NOTE + reason, duration=0.0
    )


def cut_targets(baseline: CheckReport | None) -> dict[str, str]:
    """The targets a baseline left out for the time budget, with the reason for each."""
    if baseline is None:
        return {}
    return {
        r.nodeid: r.note[len(CUT_NOTE) :]
        for r in baseline.results
        if r.note and r.note.startswith(CUT_NOTE)
    }


def describe_cut(cut: dict[str, str], total: int, budget: float) -> str | None:
    """One sentence naming every test file left out and why, e.g. ``budget 120 s: 2 of 9
    related test files not run: not started, the budget was used: a.py, b.py``."""
    if not cut:
        return None
    by_reason: dict[str, list[str]] = {}
    for target, reason in cut.items():
        by_reason.setdefault(reason, []).append(target)
    why = "; ".join(f"{reason}: {', '.join(files)}" for reason, files in by_reason.items())
    return f"budget {budget:g} s: {len(cut)} of {total} related test files not run: {why}"


def _file(target: str) -> str:
    return target.split("::", 1)[0]


def _sizes(sandbox: Sandbox, targets: Sequence[str]) -> dict[str, int]:
    """Bytes of each target's file that exists (a folder counts 0); absent files are left out."""
    files = sorted({_file(t) for t in targets})
    script = (
        'for f in "$@"; do [ -e "$f" ] && printf \'%s\\t%s\\n\' '
        '"$(cat -- "$f" 2>/dev/null | wc -c)" "$f"; done; true'
    )
    quoted = " ".join(shlex.quote(f) for f in files)
    done = sandbox.run(f"bash -c {shlex.quote(script)} sizes {quoted}")
    sizes: dict[str, int] = {}
    for line in done.output.splitlines():
        size, _, path = line.partition("\t")
        if path and size.strip().isdigit():
            sizes[path] = int(size.strip())
    return {t: sizes[_file(t)] for t in targets if _file(t) in sizes}


def _whole_run_timed_out(report: CheckReport, targets: Sequence[str]) -> bool:
    return [(r.nodeid, r.outcome) for r in report.results] == [(" ".join(targets), "timeout")]


def _next_batch(
    queue: Sequence[str], sizes: dict[str, int], rate: float | None, left: float, most: int = 0
) -> list[str]:
    """The next files to run on the original code: all without a budget; else the first alone
    (to learn seconds per byte), then as many as should take half the time left, at most
    ``most`` (twice the last batch: one file's rate misjudges sympy's 285 files), at least one
    (so a run that does not finish loses little)."""
    if left == float("inf"):
        return list(queue)
    if rate is None:
        return list(queue[:1])
    batch, estimate = [queue[0]], rate * sizes[queue[0]]
    for target in queue[1:]:
        estimate += rate * sizes[target]
        if estimate > left / 2 or (most and len(batch) >= most):
            break
        batch.append(target)
    return batch


def _shares(
    targets: Sequence[str], report: CheckReport, took: float, sizes: dict[str, int]
) -> dict[str, float]:
    """Each target's share of a run's wall time: its tests' durations, plus the rest of the
    run (start-up, collection) in proportion to its size."""
    own = {t: sum(r.duration for r in report.results if _belongs_to(r.nodeid, t)) for t in targets}
    rest = max(0.0, took - sum(own.values()))
    total = sum(sizes.get(t, 0) for t in targets) or len(targets)
    return {t: own[t] + rest * (sizes.get(t, 0) or (total / len(targets))) / total for t in targets}


class Baseline:
    """Results of repository tests on the original code, per (commit, target), so the original
    runs once per commit and target: in memory, and in ``path`` (JSON) when given.

    With a time budget (``CheckSettings.budget``) the targets run in the order given (most
    related first, see :func:`related_tests`) until the budget is used; each one left out is
    remembered with the reason, and shows in the report as a skipped result whose note starts
    with :data:`CUT_NOTE`. :func:`check_candidate` leaves the same ones out, so a cut never
    makes a test look newly failing. A cut is tried again only under a larger budget (or none).
    """

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

    @staticmethod
    def _usable(entry: _Entry | None, settings: CheckSettings | None) -> bool:
        if entry is None:
            return False
        if entry.cut is None or settings is None:
            return True
        return 0 < settings.budget <= entry.budget  # a larger budget (or none) tries again

    def get(
        self, commit: str, targets: Sequence[str], *, settings: CheckSettings | None = None
    ) -> CheckReport | None:
        """The cached report for ``targets`` at ``commit``, or None if any target is missing
        (or was left out by a smaller budget than ``settings``')."""
        by_target = self._cache.get(commit, {})
        keys = self._targets(targets, settings)
        if not all(self._usable(by_target.get(t), settings) for t in keys):
            return None
        report = CheckReport()
        cut: dict[str, str] = {}
        for target in keys:
            entry = by_target[target]
            if entry.cut is not None:
                report.results.append(_cut_marker(target, entry.cut))
                cut[target] = entry.cut
                continue
            report.results.extend(entry.results)
            report.errors.extend(entry.errors)
            report.duration += entry.seconds
        budget = max((by_target[t].budget for t in cut), default=0.0)
        report.cut = describe_cut(cut, len(keys), budget)
        return report

    def put(
        self,
        commit: str,
        targets: Sequence[str],
        report: CheckReport,
        *,
        seconds: dict[str, float] | None = None,
    ) -> None:
        """Store a run of ``targets``: each result (and error) under the target it belongs to."""
        by_target = self._cache.setdefault(commit, {})
        for target in targets:
            entry = _Entry(
                results=[r for r in report.results if _belongs_to(r.nodeid, target)],
                errors=[e for e in report.errors if _belongs_to(e.split(": ", 1)[0], target)],
            )
            if len(targets) == 1:  # everything belongs to the only target (a timeout, a crash)
                entry = _Entry(results=list(report.results), errors=list(report.errors))
            entry.seconds = (seconds or {}).get(target, 0.0)
            by_target[target] = entry
        self._save()

    def _cut(self, commit: str, targets: Sequence[str], reason: str, budget: float) -> None:
        by_target = self._cache.setdefault(commit, {})
        for target in targets:
            by_target[target] = _Entry(cut=reason, budget=budget)
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
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
        A target whose file the original code does not have (a test file the candidate adds)
        gets an empty entry: the candidate's run of it has nothing to be compared with.
        """
        keys = self._targets(targets, settings)
        by_target = self._cache.setdefault(commit, {})
        missing = [t for t in keys if not self._usable(by_target.get(t), settings)]
        if missing:
            with original_code(sandbox, commit):
                if settings.test_cmd:
                    self.put(commit, missing, run_test_cmd(sandbox, settings=settings))
                else:
                    used = sum(by_target[t].seconds for t in keys if t not in missing)
                    self._run(sandbox, commit, missing, settings, used)
        cached = self.get(commit, keys, settings=settings)
        assert cached is not None
        return cached

    def _run(
        self,
        sandbox: Sandbox,
        commit: str,
        targets: Sequence[str],
        settings: CheckSettings,
        used: float,
    ) -> None:
        """Run ``targets`` on the original code in batches while the budget lasts."""
        budget = settings.budget
        left = budget - used if budget else float("inf")
        sizes = _sizes(sandbox, targets)
        for target in targets:
            if target not in sizes:
                self.put(commit, [target], CheckReport())
        queue = [t for t in targets if t in sizes]
        rate: float | None = None
        ran_bytes, ran_seconds, last = 0, 0.0, 0
        while queue:
            if left <= 0:
                self._cut(commit, queue, "not started, the budget was used", budget)
                return
            batch = _next_batch(queue, sizes, rate, left, most=2 * last)
            last = len(batch)
            queue = queue[len(batch) :]
            timeout = min(settings.run_timeout, left)
            started = time.monotonic()
            report = run_pytest(sandbox, batch, settings=settings, timeout=timeout)
            took = time.monotonic() - started
            left -= took
            if budget and _whole_run_timed_out(report, batch):
                self._cut(commit, batch, f"did not finish within {timeout:.0f} s", budget)
                continue
            self.put(commit, batch, report, seconds=_shares(batch, report, took, sizes))
            ran_bytes += sum(sizes[t] for t in batch)
            ran_seconds += took
            rate = ran_seconds / max(ran_bytes, 1)


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


def _merged(first: CheckReport, second: CheckReport) -> CheckReport:
    return CheckReport(
        results=[*first.results, *second.results],
        errors=[*first.errors, *second.errors],
        exit_code=first.exit_code or second.exit_code,
        duration=first.duration + second.duration,
    )


def _stands_for(nodeid: str, target: str) -> bool:
    """``nodeid`` is ``target`` or one of its tests (a parametrized case included)."""
    return _belongs_to(nodeid, target) or nodeid.startswith(target + "[")


def check_candidate(
    sandbox: Sandbox,
    *,
    properties: list[str],
    repo_tests: list[str],
    baseline: CheckReport | None,
    settings: CheckSettings,
    issue_tests: Sequence[str] = (),
) -> CheckReport:
    """Run the kept properties and the issue tests (one pytest run), then the related
    repository tests (another) against the code in the sandbox; with ``settings.test_cmd``,
    that command instead of the related tests.

    ``issue_tests`` are repository tests that stand for the issue (SWE-bench's FAIL_TO_PASS):
    they count as issue properties do (``kind`` "issue"), failing also when the original code
    failed them. Repository failures the ``baseline`` (the original code's report) shares are
    not counted. The related test files a time budget left out of the baseline are left out
    here too, and the report's ``cut`` names them; properties and issue tests always run. With
    a budget the run is stopped at twice the budget, or a minute past it if that is later.
    """
    left_out = cut_targets(baseline)
    files = [] if settings.test_cmd else [t for t in repo_tests if t not in left_out]
    timeout = settings.run_timeout
    if settings.budget:
        timeout = min(timeout, max(2 * settings.budget, settings.budget + 60))
    # Properties and issue tests first, in a run of their own: what the repository's tests do
    # to shared state before them cannot change their outcome (pytest's own test_unittest.py
    # made its issue test pass on the original code when the whole file ran first).
    first = [*properties, *issue_tests]
    report = run_pytest(sandbox, first, settings=settings, timeout=timeout)
    if files:
        rest = run_pytest(
            sandbox,
            files,
            settings=settings,
            timeout=timeout,
            deselect=[n for n in issue_tests if any(_belongs_to(n, f) for f in files)],
        )
        report = _merged(report, rest)
    for result in report.results:
        if result.kind == "repo" and any(_stands_for(result.nodeid, n) for n in issue_tests):
            result.kind = "issue"
    if settings.test_cmd:
        command = run_test_cmd(sandbox, settings=settings)
        report.results.extend(command.results)
        report.duration += command.duration
        if command.exit_code and not report.exit_code:
            report.exit_code = command.exit_code
    report = against_baseline(report, baseline)
    cut = {t: left_out[t] for t in repo_tests if t in left_out}
    report.cut = describe_cut(cut, len(repo_tests), settings.budget)
    return report
