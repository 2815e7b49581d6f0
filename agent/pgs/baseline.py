"""The repository tests' results on the original code, run once per commit and test file.

:class:`Baseline` caches them (in memory, and in a JSON file when given) and runs what fits
the time budget (``CheckSettings.budget``), remembering what it left out (:data:`CUT_NOTE`,
:func:`cut_targets`, :func:`describe_cut`); :func:`original_code` takes a candidate's changes
out of the sandbox for the duration.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field

from agent.errors import CheckError
from agent.pgs.report import TEST_CMD_PREFIX, CheckReport, TestResult
from agent.pgs.runner import CheckSettings, plugin_dir, run_pytest, run_test_cmd, tail
from envs.sandbox import Sandbox


def belongs_to(nodeid: str, target: str) -> bool:
    return nodeid == target or nodeid.startswith((target + "::", target.rstrip("/") + "/"))


@contextmanager
def original_code(sandbox: Sandbox, commit: str) -> Iterator[None]:
    """The repository as it was at ``commit`` for the duration, the candidate's changes put
    back afterwards (the scratch folder is never touched)."""
    patch = sandbox.diff(base=commit)
    if not patch.strip():
        yield
        return
    saved = posixpath.join(plugin_dir(sandbox), f"candidate-{uuid.uuid4().hex[:8]}.patch")
    sandbox.write_file(saved, patch)
    undone = sandbox.run(f"git apply -R --binary {shlex.quote(saved)}")
    if not undone.ok:
        raise CheckError(f"cannot take the candidate's changes out:\n{tail(undone.output)}")
    try:
        yield
    finally:
        redone = sandbox.run(f"git apply --binary {shlex.quote(saved)}")
        if not redone.ok:
            raise CheckError(
                f"cannot put the candidate's changes back (saved in {saved}):\n"
                + tail(redone.output)
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


def next_batch(
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
    own = {t: sum(r.duration for r in report.results if belongs_to(r.nodeid, t)) for t in targets}
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
            return [TEST_CMD_PREFIX + settings.test_cmd]
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
                results=[r for r in report.results if belongs_to(r.nodeid, target)],
                errors=[e for e in report.errors if belongs_to(e.split(": ", 1)[0], target)],
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
            batch = next_batch(queue, sizes, rate, left, most=2 * last)
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
