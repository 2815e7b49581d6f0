"""The evidence on every candidate of one instance, from sealed checks in its image.

One container of the instance image holds the original code: there the issue's probes
(:mod:`agent.swebench.selection.probes`) run twice, the related repository tests of every file a
candidate changes are run once (the baseline: :class:`~agent.pgs.baseline.Baseline`, within
the time budget), and the tests the candidates add run on the original code (which of them
show the bug). A seal of it is taken first (:mod:`envs.seal`); each candidate then gets its
own fresh container of that seal, with only its patch applied as the harness applies it, and
there:

- the related tests run against it (:func:`~agent.pgs.check.check_candidate`, the base
  commit's test files put back, only what the patch breaks counted);
- the probes run, and what they print is compared with the original's;
- every candidate's added tests run against its code (the cross-execution matrix): its own
  test changes are taken back out, each other candidate's test part is applied in turn, and
  the tests it adds run (a node id two candidates add runs in the version read first, its own
  version on a candidate that adds it);
- with ``--model``, the Tester's properties, written and validated once on the original code,
  run against the patch as the harness applied it, in one more fresh container of the seal
  (:mod:`agent.swebench.selection.properties`).

Nothing here reads the hidden tests (``test_patch``, FAIL_TO_PASS, PASS_TO_PASS) or where a
candidate came from.
"""

from __future__ import annotations

import ast
import posixpath
import shlex
import threading
import time
from collections.abc import Callable

from agent.pgs.baseline import Baseline
from agent.pgs.check import check_candidate, original_tests
from agent.pgs.related import related_tests
from agent.pgs.runner import CheckSettings, run_pytest
from agent.record.selection import AddedTest, Evidence, Probe
from agent.swebench.patching import apply_commands, apply_prediction
from agent.swebench.selection.candidates import (
    Candidate,
    changed_paths,
    only_files,
    split_patch,
)
from agent.swebench.selection.probes import probes_of, run_probes
from agent.swebench.selection.properties import IssueProperties
from envs.sandbox import Sandbox
from envs.seal import Seal

#: What a test that never reported ended as (its file did not collect).
NOT_RUN = "error"


def added_test_ids(sandbox: Sandbox, test_part: str) -> list[str]:
    """Node ids of the tests a patch's test part adds or changes, read from the files as the
    sandbox holds them now (the test part applied): every ``test*`` function or method of a
    ``Test*`` class whose lines the patch adds to."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        files = PatchSet(test_part)
    except UnidiffParseError:
        return []
    out: list[str] = []
    for patched in files:
        if patched.is_removed_file or not patched.path.endswith(".py"):
            continue
        added = {line.target_line_no for hunk in patched for line in hunk if line.is_added}
        try:
            source = sandbox.read_file(posixpath.join(sandbox.repo_path, patched.path))
            tree = ast.parse(source)
        except (OSError, SyntaxError, ValueError, Exception):  # unreadable: no tests from it
            continue
        for node, prefix in _tests_in(tree):
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if added & set(range(first, end + 1)):
                out.append(f"{patched.path}::{prefix}{node.name}")
    return out


def _tests_in(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    found: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            found.append((node, ""))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    item.name.startswith("test")
                ):
                    found.append((item, f"{node.name}::"))
    return found


def reset_paths(sandbox: Sandbox, base: str, paths: list[str]) -> None:
    """Put ``paths`` back as they are at ``base`` (removed when ``base`` has none)."""
    for path in paths:
        quoted = shlex.quote(path)
        sandbox.run(
            f"git cat-file -e {base}:{quoted} 2>/dev/null && git checkout -q {base} -- {quoted}"
            f" || rm -f -- {quoted}"
        )


def outcomes(sandbox: Sandbox, nodeids: list[str], settings: CheckSettings) -> dict[str, str]:
    """How each test ended: ``passed``, ``failed``, ``error``, ``skipped``, ``timeout``;
    a test that did not report (its file failed to collect) is :data:`NOT_RUN`."""
    if not nodeids:
        return {}
    report = run_pytest(sandbox, nodeids, settings=settings, timeout=settings.run_timeout)
    found: dict[str, list[str]] = {}
    for r in report.results:
        for n in nodeids:
            if r.nodeid == n or r.nodeid.startswith(n + "["):
                found.setdefault(n, []).append(r.outcome)
    out = {}
    for n in nodeids:
        ends = found.get(n)
        out[n] = NOT_RUN if not ends else next((e for e in ends if e != "passed"), "passed")
    return out


class InstanceCheck:
    """The evidence of one instance's candidates: the original code's results, computed once
    in ``original`` (a container of the instance image at ``base``), then one fresh container
    of ``seal`` per candidate."""

    def __init__(
        self,
        original: Sandbox,
        seal: Seal,
        base: str,
        problem_statement: str,
        candidates: list[Candidate],
        settings: CheckSettings,
        *,
        commands: str = "harness",
    ) -> None:
        self.original, self.seal, self.base = original, seal, base
        self.problem_statement = problem_statement
        self.candidates = candidates
        self.settings = settings
        self.chain = apply_commands(commands)
        self.baselines = Baseline()
        self.probes: list[Probe] = []
        self.related: list[str] = []
        self.added: list[AddedTest] = []
        #: {candidate index: its added node ids}
        self.own: dict[int, list[str]] = {}
        #: The Tester's properties (``--model``), set once written.
        self.properties: IssueProperties | None = None

    def prepare(self) -> None:
        """The original code's side: probes, related tests' baseline, added tests."""
        box = self.original
        self.probes = probes_of(box, self.problem_statement, self.settings.python)
        code_files = sorted(
            {p for c in self.candidates for p in changed_paths(c.code_part) if p.endswith(".py")}
        )
        self.related = related_tests(box, code_files) if code_files else []
        if self.related:
            self.baselines.ensure(box, self.base, self.related, settings=self.settings)
        by_id: dict[str, AddedTest] = {}
        for c in self.candidates:
            tests = c.test_part
            if not tests.strip():
                continue
            applied, _ = apply_prediction(box, tests, self.chain)
            if applied:
                ids = added_test_ids(box, tests)
                self.own[c.index] = ids
                for nodeid in ids:
                    by_id.setdefault(nodeid, AddedTest(nodeid=nodeid)).by.append(c.index)
                ended = outcomes(box, [n for n in ids if not by_id[n].original], self.settings)
                for nodeid, how in ended.items():
                    by_id[nodeid].original = how
            reset_paths(box, self.base, changed_paths(tests))
        self.added = list(by_id.values())

    def _groups(self) -> list[tuple[Candidate, list[str]]]:
        """The candidates whose test part adds tests, each with those tests."""
        return [(c, self.own[c.index]) for c in self.candidates if self.own.get(c.index)]

    def check(self, candidate: Candidate) -> Evidence:
        """The sealed check of one candidate."""
        started = time.monotonic()
        code, tests = split_patch(candidate.patch)
        evidence = Evidence(
            patch_lines=sum(
                1
                for line in candidate.patch.splitlines()
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ),
            tests_changed=changed_paths(tests),
            own_tests=len(self.own.get(candidate.index, [])),
        )
        evidence.issue_files, evidence.code_files = named_files(
            changed_paths(code), self.problem_statement
        )
        with self.seal.fresh() as box:
            applied, said = apply_prediction(box, candidate.patch, self.chain)
            if not applied:
                evidence.applies = False
                evidence.apply_error = _last_error(said)
                evidence.seconds = time.monotonic() - started
                return evidence
            # The code as the harness applied it, before any test run leaves a file behind.
            as_applied = "" if self.properties is None else _as_applied(box, self.base, candidate)
            if self.related:
                baseline = self.baselines.ensure(
                    box, self.base, self.related, settings=self.settings
                )
                with original_tests(box, self.base, self.related, tests=self.related):
                    report = check_candidate(
                        box,
                        properties=[],
                        repo_tests=self.related,
                        baseline=baseline,
                        settings=self.settings,
                        base=self.base,
                    )
                evidence.broken = [
                    r.nodeid for r in report.failures() if r.kind in ("regression", "repo")
                ] + [e.split(": ", 1)[0] for e in report.errors]
                evidence.related_run = len(report.results)
            if self.probes:
                printed = run_probes(box, [p.code for p in self.probes], self.settings.python)
                evidence.probes = {p.name: out for p, out in zip(self.probes, printed, strict=True)}
                evidence.probes_changed = sum(
                    1 for p, out in zip(self.probes, printed, strict=True) if out != p.original
                )
            own_ids = set(self.own.get(candidate.index, []))
            # its own tests as its patch has them
            own = outcomes(box, sorted(own_ids), self.settings)
            evidence.own_tests_failing = sum(1 for how in own.values() if how != "passed")
            reset_paths(box, self.base, changed_paths(tests))
            for other, ids in self._groups():
                if other.index == candidate.index:
                    evidence.cross.update(own)
                    continue
                # A test another candidate also adds (the same node id) runs in the version
                # read first: the one whose outcome on the original code is recorded.
                ids = [n for n in ids if n not in own_ids and n not in evidence.cross]
                if not ids:
                    continue
                done, _ = apply_prediction(box, other.test_part, self.chain)
                ended = outcomes(box, ids, self.settings) if done else dict.fromkeys(ids, NOT_RUN)
                evidence.cross.update(ended)
                reset_paths(box, self.base, changed_paths(other.test_part))
        if self.properties is not None:
            self.properties.check(candidate.index, as_applied, evidence)
        shows_bug = {t.nodeid for t in self.added if t.original != "passed"}
        evidence.fail_to_pass_total = len(shows_bug)
        evidence.fail_to_pass_passed = sum(
            1 for n in shows_bug if evidence.cross.get(n) == "passed"
        )
        evidence.seconds = time.monotonic() - started
        return evidence

    def check_all(
        self,
        progress: Callable[[Candidate, Evidence], None] | None = None,
        stop: threading.Event | None = None,
    ) -> dict[int, Evidence]:
        """Every candidate's evidence; ``stop`` set (Ctrl-C, SIGTERM in the main thread)
        ends it before the next candidate with :class:`KeyboardInterrupt`."""
        out = {}
        for candidate in self.candidates:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            try:
                out[candidate.index] = self.check(candidate)
            except Exception as e:  # one candidate's failure is its evidence, not the run's end
                out[candidate.index] = Evidence(error=f"{type(e).__name__}: {str(e)[:300]}")
            if progress is not None:
                progress(candidate, out[candidate.index])
        return out


def named_files(paths: list[str], problem_statement: str) -> tuple[int, int]:
    """(code files the issue names, code files changed): a file is named when the issue
    mentions its file name or its dotted module (``pkg.mod`` for ``pkg/mod.py``)."""
    text = problem_statement.lower()
    code = [p for p in paths if p.endswith(".py")]
    named = 0
    for path in code:
        module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".").lower()
        name = posixpath.basename(path).lower()
        if (name != "__init__.py" and name in text) or (module.count(".") and module in text):
            named += 1
    return named, len(code)


def _as_applied(box: Sandbox, base: str, candidate: Candidate) -> str:
    """The candidate's files as the harness's commands left them, as one git patch that
    ``git apply`` takes (the submitted patch when that diff cannot be taken). Only the files
    the patch names: what the image's install left untracked is no part of it."""
    try:
        diff = only_files(box.diff(base=base), set(changed_paths(candidate.patch)))
    except Exception:  # the submitted patch is the next best thing to check
        return candidate.patch
    return diff if diff.strip() else candidate.patch


def _last_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error:", "patch:"))]
    return (errors or lines or ["no command applied the patch"])[-1][:300]
