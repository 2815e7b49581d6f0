"""The soundness filter at work: the Tester's files run on the ORIGINAL code, in a fresh
sandbox of it, and judged by the rules of :mod:`agent.pgs.validate`.

:class:`Filtering` is the part of :class:`agent.pgs.reviewer.PGS` that knows which files of the
properties folder are whose (the properties, the issue's examples in ``examples/``, the input
generator's ``hard_inputs.py`` and the ``pgs_inputs.py`` pgs puts beside it) and validates
them: the properties (kept, dropped and why; the inputs they failed on, replayed in every later
check), the examples (kept when they fail on the original code), the hard inputs (they must
load), and the oracle run that holds the issue properties to the issue's stated outputs.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from contextlib import AbstractContextManager
from pathlib import Path

from agent.pgs.config import PGSConfig
from agent.pgs.feedback import IO_MODES, TokenCounter
from agent.pgs.guard import PropertyGuard
from agent.pgs.pool import count_pool
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.validate import (
    drop_contradicting_examples,
    drop_contradictions,
    drop_failing_everywhere,
    keep_failing_examples,
    kept_reasons,
    validate_properties,
)
from agent.record.check import CheckReport, TestResult
from agent.record.pgs import DroppedProperty, InputsRecord, PGSRecord, ValidationRecord
from envs.sandbox import Sandbox

#: In the property modes, the issue's examples (the filter's public tests) go into this folder
#: of the properties folder; the input generator writes HARD_INPUTS, and pgs puts the module
#: the properties draw them through beside it.
EXAMPLES_DIR = "examples"
HARD_INPUTS = "hard_inputs.py"
INPUTS_MODULE = Path(__file__).with_name("pgs_inputs.py")
#: The validation's search after a failing explicit example draws this many times the inputs.
SEARCH_FACTOR = 16


class Filtering:
    """Validation of the Tester's files on the original code (a base of
    :class:`~agent.pgs.reviewer.PGS`, which sets these attributes and the methods below)."""

    config: PGSConfig
    record: PGSRecord
    guard: PropertyGuard
    counter: TokenCounter
    problem: str
    check_settings: CheckSettings
    #: The Tester's property files, ``{path: text}`` (None: not written yet).
    properties: dict[str, str] | None
    #: Node ids of the kept properties, and of the kept issue properties that failed on the
    #: original code (all of them, when filtering).
    kept: list[str]
    shows_bug: set[str]

    def _fresh(self) -> AbstractContextManager[Sandbox]:
        raise NotImplementedError

    def _next_settings(self) -> CheckSettings:
        raise NotImplementedError

    def _sync(self) -> None:
        raise NotImplementedError

    # -- the files of each turn's role ---------------------------------------------------------

    def _examples_dir(self) -> str:
        return posixpath.join(self.config.tester.properties_dir, EXAMPLES_DIR)

    def _hard_inputs_files(self) -> tuple[str, str]:
        folder = self.config.tester.properties_dir
        return posixpath.join(folder, HARD_INPUTS), posixpath.join(folder, INPUTS_MODULE.name)

    def _writes(self, why: str, path: str) -> bool:
        """Whether a turn of ``why`` may leave ``path``: the input generator its file, the
        extraction turn of the property modes its folder (in the io modes, the whole folder:
        its examples are the properties there), the properties' turns the rest."""
        if why == "inputs":
            return path == self._hard_inputs_files()[0]
        if why == "examples" and self.config.feedback in IO_MODES:
            return True
        in_examples = path.startswith(self._examples_dir() + "/")
        if why == "examples":
            return in_examples
        return not in_examples and path not in self._hard_inputs_files()

    def _files_of(self, why: str) -> dict[str, str]:
        """``{path: text}`` of the test files (``test_*.py``) the host keeps for a turn's role
        (for ``inputs``: its file)."""
        out = {}
        for path, (data, _) in sorted(self.guard.files.items()):
            name = posixpath.basename(path)
            test = name.startswith("test_") and name.endswith(".py")
            if self._writes(why, path) and (test or why == "inputs"):
                out[path] = data.decode("utf-8", "replace")
        return out

    # -- validation on the original code -------------------------------------------------------

    def validate(self, files: list[str] | None = None) -> None:
        """Run the property files on the original code and keep the sound ones. ``files``
        (a probe's): only those run, and what they keep joins what was kept before (whose
        validation, and the inputs it failed on, stand)."""
        self.record.properties = dict(self.properties or {})
        if files is not None:
            self._validate_added(files)
            return
        if not self.properties:
            self.kept, self.shows_bug = [], set()
            self.record.validation = ValidationRecord(note="no properties")
            self._sync()
            return
        self.record.validation = self._validation(sorted(self.properties))
        self._sync()

    def _validate_added(self, files: list[str]) -> None:
        """A probe's files validated alone, merged into the validation record."""
        before = self.record.validation
        if not files:
            return
        added = self._validation(files)
        if before is None or before.report is None:
            self.record.validation = added
            self._sync()
            return
        report = before.report.model_copy(deep=True)
        known = {r.nodeid for r in report.results}
        report.results += [
            r for r in (added.report or CheckReport()).results if r.nodeid not in known
        ]
        report.errors += (added.report or CheckReport()).errors
        imported = {*(report.imported or ()), *((added.report and added.report.imported) or ())}
        report.imported = sorted(imported) if imported else None
        kept = [*before.kept, *(n for n in added.kept if n not in before.kept)]
        self.kept = kept
        self.shows_bug = self._shows_bug(report, kept)
        oracle = before.oracle
        if added.oracle is not None:
            oracle = (before.oracle or CheckReport()).model_copy(deep=True)
            oracle.results += added.oracle.results
        merged = before.model_copy(
            update={
                "kept": kept,
                "why_kept": {**(added.why_kept or {}), **(before.why_kept or {})},
                "dropped": [*before.dropped, *added.dropped],
                "report": report,
                "oracle": oracle,
            }
        )
        merged.note = None if self.shows_bug else added.note
        self.record.validation = merged
        self._sync()

    @staticmethod
    def _shows_bug(report: CheckReport, kept: list[str]) -> set[str]:
        by_id = report.by_id()
        return {n for n in kept if by_id[n].kind == "issue" and by_id[n].category != "pass"}

    def _validation(self, targets: list[str]) -> ValidationRecord:
        """The properties ``targets`` run on the original code, judged; sets ``kept`` and
        ``shows_bug`` to what they keep."""
        settings = self._next_settings()
        # What the validation finds beyond the explicit examples is replayed in every check.
        if settings.search_examples is None:
            settings.search_examples = SEARCH_FACTOR * settings.max_examples
        oracle = None
        with self._fresh() as box:
            original = run_pytest(box, targets, settings=settings, timeout=settings.run_timeout)
            if self.config.filter and self.config.feedback not in IO_MODES:
                oracle = self._oracle_run(box, original, settings)
        count_pool(original, self.counter)
        if self.config.feedback in IO_MODES:  # the issue's examples: each must fail now
            kept, dropped = validate_properties(original, self.problem)
            kept, passing = keep_failing_examples(kept, original)
            dropped_records = [*dropped, *passing]
            why_kept = kept_reasons(original, kept, self.problem)
        elif self.config.filter:
            kept, dropped = validate_properties(original, self.problem)
            kept, contradicting = drop_contradictions(kept, original, self.properties or {})
            everywhere: list[DroppedProperty] = []
            if self.config.drop_failing_everywhere:
                others = self._kept_issue_results()
                kept, everywhere = drop_failing_everywhere(kept, original, others)
            dropped_records = [*dropped, *contradicting, *everywhere]
            if oracle is not None:
                kept, stated = drop_contradicting_examples(kept, oracle)
                dropped_records += stated
            why_kept = kept_reasons(original, kept, self.problem)
        else:  # the ablation: no filtering of any kind, every property that ran is kept
            kept = [r.nodeid for r in original.results if r.kind != "repo" and "::" in r.nodeid]
            dropped_records = []
            why_kept = dict.fromkeys(kept, "kept unfiltered (--no-pgs.filter)")
        self.kept = kept
        self.shows_bug = self._shows_bug(original, kept)
        validation = ValidationRecord(
            kept=list(kept),
            why_kept={n: why_kept[n] for n in kept if n in why_kept},
            dropped=dropped_records,
            report=original,
            filter=self.config.filter if self.config.feedback not in IO_MODES else None,
            seed=settings.seed,
            oracle=oracle,
        )
        self._inputs_used(original, kept)
        if not self.shows_bug and self.config.feedback in IO_MODES:
            validation.note = (
                "no issue example fails on the original code; io checks with the related "
                "repository tests alone"
            )
        elif not self.shows_bug:
            validation.note = (
                "no issue property survived validation; the verdict can be tests-only at best"
            )
        return validation

    def _oracle_run(
        self, box: Sandbox, original: CheckReport, settings: CheckSettings
    ) -> CheckReport | None:
        """The failing issue properties' explicit examples run again in ``box`` (the original
        code) with the issue's kept examples as the oracle (``pgs.examples_filter``): a
        failure where every call was answered as the issue states contradicts it. None when
        there is nothing to hold them to."""
        examples = self.record.examples
        if examples is None or not examples.kept:
            return None
        example_files = sorted({n.split("::", 1)[0] for n in examples.kept})
        issue_files = sorted(
            {r.nodeid.split("::", 1)[0] for r in original.results if r.kind == "issue" and r.failed}
        )
        if not issue_files:
            return None
        oracle = settings.model_copy(update={"oracle": True, "replay": {}, "search_examples": None})
        return run_pytest(
            box, [*example_files, *issue_files], settings=oracle, timeout=settings.run_timeout
        )

    def _kept_issue_results(self) -> list[TestResult]:
        """The validation results of the issue properties kept before (a probe's files are
        validated alone: these stand beside them)."""
        validation = self.record.validation
        if validation is None or validation.report is None:
            return []
        by_id = validation.report.by_id()
        return [by_id[n] for n in self.kept if n in by_id and by_id[n].kind == "issue"]

    def _inputs_used(self, original: CheckReport, kept: list[str]) -> None:
        """Which kept properties drew the hard inputs in the validation (the record's)."""
        inputs = self.record.inputs
        if inputs is None:
            return
        used = {r.nodeid for r in original.results if r.hard_inputs}
        new = [n for n in kept if n in used and n not in inputs.used_by]
        inputs.used_by = [*inputs.used_by, *new]

    def _validate_inputs(self) -> None:
        """The input generator's file must import on the original code and define
        ``HARD_INPUTS`` as ``{name: [value, ...]}``; then the module that draws them
        (``pgs_inputs.py``) goes beside it. Otherwise both are left out, and the record says
        why."""
        hard, module = self._hard_inputs_files()
        record = InputsRecord()
        self.record.inputs = record
        if hard not in self.guard.files:
            record.note = "the input generator wrote no hard_inputs.py"
            self.guard.files.pop(module, None)
            return
        self.guard.files[module] = (INPUTS_MODULE.read_bytes(), 0o644)
        folder = shlex.quote(self.config.tester.properties_dir)
        probe = (
            "import json, sys; sys.path[:0] = [sys.argv[1], '.']; import hard_inputs as h; "
            "d = h.HARD_INPUTS; assert isinstance(d, dict), 'HARD_INPUTS is not a dict'; "
            "print(json.dumps({str(k): len(list(v)) for k, v in d.items()}))"
        )
        python = shlex.quote(self.check_settings.python)
        with self._fresh() as box:
            done = box.run(f"{python} -B -c {shlex.quote(probe)} {folder}", timeout=120)
        try:
            names = json.loads(done.output.strip().splitlines()[-1]) if done.ok else None
        except (ValueError, IndexError):
            names = None
        if not isinstance(names, dict):
            lines = done.output.strip().splitlines()
            record.note = f"hard_inputs.py does not load: {lines[-1] if lines else 'no output'}"
            self.guard.files.pop(hard, None)
            self.guard.files.pop(module, None)
            return
        record.names = {str(k): int(v) for k, v in names.items() if int(v) > 0}
        if not record.names:
            record.note = "hard_inputs.py defines no hard input"

    def _validate_examples(self) -> ValidationRecord:
        """The property modes' extraction turn: the issue's examples run on the original code,
        each kept only when it fails there (it shows the bug); the filter's public tests."""
        files = sorted(self._files_of("examples"))
        if not files:
            record = ValidationRecord(note="no issue example was written")
        else:
            settings = self._next_settings()
            with self._fresh() as box:
                report = run_pytest(box, files, settings=settings, timeout=settings.run_timeout)
            kept, dropped = validate_properties(report, self.problem)
            kept, passing = keep_failing_examples(kept, report)
            record = ValidationRecord(
                kept=kept,
                why_kept=kept_reasons(report, kept, self.problem),
                dropped=[*dropped, *passing],
                report=report,
                seed=settings.seed,
            )
            if not kept:
                record.note = "no issue example fails on the original code"
        self.record.examples = record
        self._sync()
        return record
