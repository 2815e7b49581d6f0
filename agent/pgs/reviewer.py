"""PGS at repository level: every submitted patch is challenged by the Tester's properties and
the repository's related tests; the smallest failing case becomes the next round's feedback.

Per submission (:meth:`PGS.review`):

0. the Tester's property files are put back as the host keeps them (:mod:`agent.pgs.guard`):
   whatever the Generator did to them is undone and recorded (the round's ``tampered``);
1. back to the original code, the base commit pinned when the sandbox was ready (the
   candidate is kept aside);
2. first round: the Tester writes properties; they are validated on the original code
   (unsound ones dropped, with the reason). When no issue property survives, the Tester gets
   one more turn with the validation report's lines (``tester_retries``). In the io modes
   (Self-Edit) the Tester's one turn is the extraction turn instead: the issue's examples as
   concrete tests, each kept only when it fails on the original code (``issue_examples``).
   With the paper's other turns on, the input generator's hard inputs and the issue's
   examples (the filter's public tests) come first (``input_generator``, ``examples_filter``);
3. the related repository tests (or ``--test-cmd``) get a baseline on the original code
   (cached per test file, and per command);
4. the candidate is re-applied and checked: kept properties + related tests, with fresh
   inputs (the n-th check or validation of a run draws them with its own Hypothesis seed,
   derived from the run's seed, :meth:`PGS.seed_for`, and recorded), the test files
   (conftest.py, pytest configuration) as they are at the base commit
   (:func:`~agent.pgs.check.original_tests`); what the patch changed among them is recorded
   (the round's ``tests_changed``);
5. all pass → before accepting, while feedback rounds remain, the Tester looks for new rules
   once more (``fresh_probes``; it never sees the patch) and the candidate meets those too;
6. a failure → ONE failure is selected (``--feedback`` mode) and rendered, until ``rounds``
   feedback messages have been sent.

The Tester's turns (step 2, 5, and with ``properties_every_round`` one before each round) are
:class:`agent.pgs.turns.TesterTurns`, their validation on the original code
:class:`agent.pgs.filtering.Filtering`; the configuration is :mod:`agent.pgs.config`.

The verdict (:func:`agent.pgs.verdict.judge`) is honest: ``passed`` only when a kept issue
property that failed on the original code passes on the patch and nothing newly fails;
``partial`` when that holds but fewer than half of the related test files ran (a time budget
cut the rest); ``tests-only`` when no issue property took part but the related tests (or
regression properties) ran and pass; ``unchecked`` when nothing ran; ``failed`` otherwise.
Every reason says how much of the check ran (:class:`~agent.record.check.Coverage`). A patch
that changes a test file the check relies on is ``tests-changed`` where it would have been
``passed``, ``partial`` or ``tests-only`` (:func:`~agent.pgs.verdict.flagged`), and the reason
names the files, as it names the property files the Generator changed. A diff left when a
limit ends the run is checked too (:meth:`PGS.final_check`), so no patch leaves unchecked.

The sandbox is left with the candidate applied, so the Generator goes on from its own state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import secrets
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agent.core.loop_config import AgentConfig
from agent.core.prompts import render_text
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.errors import CheckNotRun
from agent.models import Model
from agent.pgs.baseline import Baseline
from agent.pgs.check import check_candidate, original_tests
from agent.pgs.config import PGSConfig, ablation, shrinks
from agent.pgs.evidence import held_to_evidence, replay_inputs
from agent.pgs.feedback import IO_MODES, TokenCounter, render_feedback, select_failure
from agent.pgs.guard import SAFE_GIT, PropertyGuard, describe
from agent.pgs.pool import count_pool
from agent.pgs.related import changed_files, is_test_file, related_tests
from agent.pgs.runner import CheckSettings, install_plugin, plugin_dir, pytest_command
from agent.pgs.shared import SharedProperties
from agent.pgs.tester import restore_original
from agent.pgs.tokens import ChosenCounter, first_time
from agent.pgs.turns import TesterTurns
from agent.pgs.verdict import flagged, judge
from agent.record.check import CheckReport, TestResult
from agent.record.pgs import (
    GuardedChange,
    PGSRecord,
    RoundRecord,
    SelectionRecord,
    TokenizerRecord,
    Verdict,
)
from envs.sandbox import Sandbox
from envs.seal import UNSEALED_NOTE, Seal, seal_of

logger = logging.getLogger(__name__)


def candidate_path(box: Sandbox) -> str:
    """Where a check writes the candidate patch before applying it: the sandbox's own home.
    Never a fixed path of the machine: local sandboxes share the host's /tmp, and two runs at
    once (a batch's workers, two users) would apply each other's patches."""
    home = getattr(box, "home", None) or "/tmp"
    return posixpath.join(home, ".pgs_candidate.patch")


class PGS(TesterTurns):
    """The :class:`~agent.core.loop.Reviewer` that runs PGS rounds."""

    def __init__(
        self,
        config: PGSConfig,
        *,
        sandbox: Sandbox,
        toolset: Toolset,
        tester_model: Model,
        counter: TokenCounter,
        trajectory: Trajectory,
        problem_statement: str,
        function_calling: bool = True,
        status: Callable[[str], None] = lambda _: None,
        base: str = "HEAD",
        on_round: Callable[[RoundRecord], None] = lambda _: None,
        shared: SharedProperties | None = None,
        generator_config: AgentConfig | None = None,
        seal: Seal | None = None,
    ) -> None:
        self.config = config
        #: The Generator's agent section: the Tester's loop says its texts too (run_tester).
        self.generator_config = generator_config
        #: Another attempt's validated property set, adopted instead of a Tester turn.
        self.shared = shared
        self.sandbox = sandbox
        self.toolset = toolset
        self.tester_model = tester_model
        self.counter = counter
        self.traj = trajectory
        self.problem = problem_statement
        self.function_calling = function_calling
        self.status = status
        #: Told of each checked candidate (its verdict, what was fed back): the run's hooks.
        self.on_round = on_round
        self.check_settings = config.check.model_copy(
            update={
                "test_cmd": config.test_cmd,
                "shrink": shrinks(config),
                "properties_dir": config.tester.properties_dir,
            }
        )
        #: The original code: the sandbox's commit once it was ready (never ``HEAD``, which
        #: the Generator can move).
        self.base = base
        #: Where every check, validation and Tester turn runs: a sandbox the Generator never
        #: touched (:mod:`envs.seal`), taken now, before the Generator's first command.
        self.seal = seal if seal is not None else seal_of(sandbox, base, own=[plugin_dir(sandbox)])
        self.guard = PropertyGuard(config.tester.properties_dir, self.check_settings.python)
        self.properties: dict[str, str] | None = None
        self.kept: list[str] = []
        #: Kept issue properties that failed on the original code (all of them, when filtering).
        self.shows_bug: set[str] = set()
        self.baselines = Baseline()
        self.feedback_sent = 0
        self.probes = 0
        self.round_steps = config.round_steps
        self.round_time = config.round_time
        self.record = PGSRecord(
            mode=config.feedback,
            ablation=ablation(config),
            properties={},
            verdict_reason="no candidate was checked",
            sealed=self.seal.sealed,
        )
        #: Checks and validations run so far: the n-th draws its inputs with seed_for(n).
        self.checks_run = 0
        #: The seed of the last check of a candidate: its round records it, its rerun uses it.
        self.check_seed: int | None = None
        if config.fresh_inputs:
            self.record.seed = config.seed if config.seed is not None else secrets.randbelow(2**31)
        self._record_tokenizer(counter)
        if base != "HEAD":
            self.record.base_commit = base
        self._sync()

    def _record_tokenizer(self, counter: TokenCounter) -> None:
        """The counter in the record; a warning when only the regex rule is left, once per
        process (:func:`agent.pgs.tokens.first_time`: a batch's instances, the attempts and
        the shared Tester of a run all count alike), on the terminal and in the log."""
        if not isinstance(counter, ChosenCounter):
            self.record.tokenizer = TokenizerRecord(setting="given", counter=counter.name)
            return
        self.record.tokenizer = TokenizerRecord(
            setting=counter.setting, counter=counter.name, fallback=counter.fallback
        )
        warning = counter.warning()
        if warning is not None and first_time(warning):
            logger.warning("%s", warning)

    def seed_for(self, n: int) -> int | None:
        """The Hypothesis seed of the run's n-th check (None: derandomised): a function of the
        run's seed and n, so a replayed run draws the same inputs check by check."""
        if self.record.seed is None:
            return None
        digest = hashlib.sha256(f"{self.record.seed}:{n}".encode()).digest()
        return int.from_bytes(digest[:4], "big")

    def _next_settings(self) -> CheckSettings:
        self.checks_run += 1
        seed = self.seed_for(self.checks_run)
        return self.check_settings.model_copy(update={"seed": seed, "replay": self.replay()})

    def replay(self) -> dict[str, list[str]]:
        """The inputs every check replays: those the kept issue properties failed on when
        validated on the original code (:func:`~agent.pgs.evidence.replay_inputs`)."""
        validation = self.record.validation
        if validation is None or validation.report is None:
            return {}
        return replay_inputs(validation.report, self.shows_bug)

    # -- the Reviewer protocol ----------------------------------------------------------------

    def review(self, patch: str) -> str | None:
        round_record = self._new_round(patch)
        try:
            feedback = self._review(round_record, patch)
        finally:
            self._save()
        self.on_round(round_record)
        return feedback

    def _review(self, round_record: RoundRecord, patch: str) -> str | None:
        if self._adds_every_round(round_record):
            self.status("the Tester adds properties for this round")
            self.probe(round_record, why="round")
        self.status(f"checking candidate {round_record.round}")
        report = self.check(patch, round_record)
        while not report.failures() and not report.errors and self._may_probe():
            self.status("every check passes; the Tester looks for new rules")
            if not self.probe(round_record):
                break
            report = self.check(patch, round_record)
        self._record_report(round_record, report)
        if not report.failures() and not report.errors:
            return None
        if self.feedback_sent >= self.config.rounds:
            round_record.note = f"no feedback: all {self.config.rounds} rounds used"
            return None
        mode = self.config.feedback
        assert mode != "none"
        selection = select_failure(report, mode, self.counter)
        if selection is None:
            return None
        self.feedback_sent += 1
        message = render_feedback(
            selection,
            mode,
            self.feedback_sent,
            self.config.rounds,
            template=self.config.io_template if mode in IO_MODES else self.config.property_template,
            rerun=self.rerun_command(selection.result),
        )
        round_record.selection = SelectionRecord.model_validate(selection.model_dump())
        message += self._guard_note(round_record)
        round_record.feedback = message
        return message

    def final_check(self, patch: str, why: str) -> None:
        """Check a diff the run ends with unsubmitted (a limit): record its verdict, no feedback."""
        round_record = self._new_round(patch)
        round_record.note = f"the run ended ({why}); its diff is checked, no feedback sent"
        try:
            if not patch.strip():
                self._set_verdict(round_record, "unchecked", "the run ended with no change")
                return
            self.status("checking the diff the run ended with")
            try:
                report = self.check(patch, round_record)
            except CheckNotRun as e:  # nothing could run: the run says so and exits 3
                self._set_verdict(round_record, "unchecked", str(e))
                raise
            except Exception as e:  # the run's result must survive a failed last check
                logger.warning("could not check the final diff: %s", e)
                self._set_verdict(round_record, "unchecked", f"the check could not run: {e}")
                return
            self._record_report(round_record, report)
        finally:
            self._save()
        self.on_round(round_record)

    # -- the record ------------------------------------------------------------------------------

    def _sync(self) -> None:
        """The record into the trajectory (written by the trajectory's next save)."""
        self.traj.record.pgs = self.record

    def _save(self) -> None:
        self._sync()
        self.traj.save()

    def _new_round(self, patch: str) -> RoundRecord:
        round_record = RoundRecord(round=len(self.record.rounds) + 1, patch=patch)
        self.record.rounds.append(round_record)
        self._sync()
        return round_record

    def _record_report(self, round_record: RoundRecord, report: CheckReport) -> None:
        count_pool(report, self.counter)  # the pool's tokens, for Table 1's strategies offline
        round_record.report = report.model_copy(deep=True)
        round_record.seed = self.check_seed
        round_record.failures = len(report.failures())
        verdict, why = self.verdict_of(report, round_record)
        self._set_verdict(round_record, verdict, why)

    def verdict_of(self, report: CheckReport, round_record: RoundRecord) -> tuple[Verdict, str]:
        """The verdict on one check (:func:`judge`, then :func:`flagged`), with the seal's note
        when the check ran in the Generator's own sandbox."""
        verdict, why = judge(report, self.shows_bug)
        validation = self.record.validation
        verdict, why = held_to_evidence(
            verdict,
            why,
            report,
            replay=self.replay(),
            changed=changed_files(round_record.patch) if round_record.patch.strip() else [],
            imported=validation.report.imported if validation and validation.report else None,
        )
        verdict, why = flagged(
            verdict,
            why,
            tests_changed=round_record.tests_changed,
            tampered=round_record.tampered,
        )
        round_record.sealed = self.seal.sealed
        if not self.seal.sealed:
            why += f"; {UNSEALED_NOTE} ({self.seal.reason})"
        return verdict, why

    def _guard_note(self, round_record: RoundRecord) -> str:
        """What the feedback tells the Generator about the files the check did not take
        from its working tree (``pgs.tampered_note_template``, ``tests_changed_note_template``)."""
        note = ""
        if round_record.tampered:
            files = describe(round_record.tampered)
            note += "\n\n" + render_text(self.config.tampered_note_template, {"files": files})
        if round_record.tests_changed:
            files = describe(round_record.tests_changed)
            template = self.config.tests_changed_note_template
            note += "\n\n" + render_text(template, {"files": files})
        return note

    def restore_properties(self, round_record: RoundRecord | None) -> list[GuardedChange]:
        """The Tester's property files (and the plugin folder) put back as the host keeps
        them; what the Generator had changed goes into ``round_record``."""
        changes = self.guard.restore(self.sandbox)
        if changes:
            logger.warning("the Generator changed the properties: %s", describe(changes))
        if changes and round_record is not None:
            seen = {(c.path, c.change) for c in round_record.tampered}
            round_record.tampered += [c for c in changes if (c.path, c.change) not in seen]
            self._sync()
        return changes

    def _set_verdict(self, round_record: RoundRecord, verdict: Verdict, why: str) -> None:
        round_record.verdict = verdict
        self.record.verdict = verdict
        self.record.verdict_reason = why

    def rerun_command(self, result: TestResult) -> str | None:
        """The command that reruns one failing test alone, the way the check ran it."""
        if "::" not in result.nodeid or result.nodeid.startswith("test_cmd:"):
            return None
        folder = install_plugin(self.sandbox)
        # Without minimisation the rerun must not shrink either (the plugin's default does).
        unshrunk = "PGS_SHRINK=0 " if self.check_settings.shrink is False else ""
        seed = "" if self.check_seed is None else f"PGS_SEED={self.check_seed} "
        # The inputs the check replayed, so that a failure of one of them reruns too.
        replayed = {k: v for k, v in self.replay().items() if k == result.nodeid}
        if replayed:
            # Beside the plugin folder, not in it: what is in it is the guard's to restore.
            path = posixpath.join(self.sandbox.home, ".pgs_rerun_replay.json")
            self.sandbox.write_file(path, json.dumps(replayed).encode("utf-8"))
            seed += f"PGS_REPLAY={shlex.quote(path)} "
        run = pytest_command(folder, [result.nodeid], settings=self.check_settings)
        return f"{seed}{unshrunk}{run}"

    # -- the steps ----------------------------------------------------------------------------

    @contextmanager
    def _fresh(self) -> Iterator[Sandbox]:
        """A sandbox with the original code and the Tester's property files, for one check,
        validation or Tester turn: a fresh one from the seal, closed afterwards; unsealed, the
        Generator's own, put back to the base commit (the property folder kept)."""
        if not self.seal.sealed:
            restore_original(self.sandbox, keep=self.config.tester.properties_dir, base=self.base)
            yield self.sandbox
            return
        box = self.seal.fresh()
        try:
            self.guard.restore(box)
            yield box
        finally:
            box.close()

    def check(
        self,
        patch: str,
        round_record: RoundRecord | None = None,
        *,
        repo_tests: list[str] | None = None,
    ) -> CheckReport:
        """Check ``patch`` (the Tester's properties restored first, the original code's tests);
        the sandbox is left with the candidate applied. What the Generator did to the property
        files and what the patch changed among the test files go into ``round_record``.
        ``repo_tests``: the related test files to run (default: those of ``patch``)."""
        if self.properties is None and self.shared is not None:
            self.adopt(self.shared)  # first: the folder the guard then restores is its
        self.restore_properties(round_record)
        if self.properties is None:
            self.write_and_validate_properties()
        with self._fresh() as box:
            if repo_tests is None:
                repo_tests = (
                    [] if self.config.test_cmd else related_tests(box, changed_files(patch))
                )
            baseline = self.baseline(repo_tests, box)
            if patch.strip():
                path = candidate_path(box)
                box.write_file(path, patch)
                applied = box.run(f"{SAFE_GIT} apply --whitespace=nowarn {shlex.quote(path)}")
                if not applied.ok:
                    raise RuntimeError(f"could not re-apply the candidate patch: {applied.output}")
            settings = self._next_settings()
            self.check_seed = settings.seed
            # With --test-cmd the files it runs are unknown: the test files the patch changes
            # stand in.
            tests = repo_tests or [f for f in changed_files(patch) if is_test_file(f)]
            with original_tests(box, self.base, [*self.kept, *tests], tests=tests) as changed:
                report = check_candidate(
                    box,
                    properties=self.kept,
                    repo_tests=repo_tests,
                    baseline=baseline,
                    settings=settings,
                    base=self.base,
                )
        if round_record is not None and changed:
            seen = {c.path for c in round_record.tests_changed}
            round_record.tests_changed += [c for c in changed if c.path not in seen]
        return report

    # -- the files of each turn's role ---------------------------------------------------------

    def baseline(self, repo_tests: list[str], box: Sandbox | None = None) -> CheckReport | None:
        """The related tests (or the test command) on the original code, in ``box`` (default:
        a fresh one); each test file, and the command, runs once per run."""
        if not repo_tests and not self.check_settings.test_cmd:
            return None
        if box is None:
            with self._fresh() as fresh:
                return self.baseline(repo_tests, fresh)
        return self.baselines.ensure(box, self.base, repo_tests, settings=self.check_settings)
