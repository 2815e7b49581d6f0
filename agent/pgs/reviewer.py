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
   concrete tests, each kept only when it fails on the original code (``issue_examples``);
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

The verdict (:func:`judge`) is honest: ``passed`` only when a kept issue property that failed
on the original code passes on the patch and nothing newly fails; ``partial`` when that holds
but fewer than half of the related test files ran (a time budget cut the rest); ``tests-only``
when no issue property took part but the related tests (or regression properties) ran and
pass; ``unchecked`` when nothing ran; ``failed`` otherwise. Every reason says how much of the
check ran (:class:`~agent.record.check.Coverage`). A patch that changes a test file the check
relies on is ``tests-changed`` where it would have been ``passed``, ``partial`` or
``tests-only`` (:func:`flagged`), and the reason names the files, as it names the property
files the Generator changed. A diff left when a limit ends the run is checked too
(:meth:`PGS.final_check`), so no patch leaves unchecked.

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
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.core.loop import AgentConfig
from agent.core.prompts import CONFIG_ONLY, default_prompt, render_text
from agent.core.tools import Toolset
from agent.core.trajectory import Trajectory
from agent.errors import CheckNotRun, ModelError
from agent.models import Model
from agent.models.base import BaseURL
from agent.pgs.baseline import Baseline
from agent.pgs.check import check_candidate, original_tests
from agent.pgs.coverage import check_not_run
from agent.pgs.evidence import held_to_evidence, replay_inputs
from agent.pgs.feedback import (
    IO_MODES,
    IO_TEMPLATE,
    PROPERTY_TEMPLATE,
    TokenCounter,
    render_feedback,
    select_failure,
)
from agent.pgs.guard import SAFE_GIT, PropertyGuard, describe
from agent.pgs.pool import count_pool
from agent.pgs.related import changed_files, is_test_file, related_tests
from agent.pgs.runner import CheckSettings, install_plugin, pytest_command, run_pytest
from agent.pgs.shared import SharedProperties
from agent.pgs.tester import SubTrajectory, TesterConfig, restore_original, run_tester
from agent.pgs.tokens import TOKENIZER_HELP, ChosenCounter, TokenizerName, first_time
from agent.pgs.validate import (
    drop_contradicting_examples,
    drop_contradictions,
    drop_failing_everywhere,
    keep_failing_examples,
    kept_reasons,
    validate_properties,
)
from agent.record.check import CheckReport, TestResult
from agent.record.pgs import (
    Ablation,
    FeedbackMode,
    GuardedChange,
    InputsRecord,
    PGSRecord,
    ProbeRecord,
    RoundRecord,
    SelectionRecord,
    TesterConversation,
    TesterTurn,
    TokenizerRecord,
    ValidationRecord,
    Verdict,
)
from envs.sandbox import Sandbox
from envs.seal import UNSEALED_NOTE, Seal, seal_of

logger = logging.getLogger(__name__)

CANDIDATE = "/tmp/pgs-candidate.patch"
#: In the property modes, the issue's examples (the filter's public tests) go into this folder
#: of the properties folder; the input generator writes HARD_INPUTS, and pgs puts the module
#: the properties draw them through beside it.
EXAMPLES_DIR = "examples"
HARD_INPUTS = "hard_inputs.py"
INPUTS_MODULE = Path(__file__).with_name("pgs_inputs.py")
#: The validation's search after a failing explicit example draws this many times the inputs.
SEARCH_FACTOR = 16


class PGSConfig(BaseModel):
    """The Tester and the feedback loop."""

    model_config = ConfigDict(extra="forbid")
    feedback: FeedbackMode = Field(
        default="property-min",
        description="none: the Generator alone; io: Self-Edit, the raw output of the first "
        "failing test (the issue's examples as tests, then the related repository tests), no "
        "properties; io-min: io with the failing test of the fewest input tokens; property: "
        "property feedback, any failing example; property-min: the failing input with the "
        "fewest tokens (full PGS)",
    )
    issue_examples: bool = Field(
        default=True,
        description="io modes: an extraction turn writes the examples the issue states as "
        "tests (each kept only when it fails on the original code), io's example tests (off: "
        "the related repository tests alone)",
    )
    rounds: int = Field(default=5, ge=0, description="most feedback rounds")
    filter: bool = Field(
        default=True,
        description="validate properties on the original code and drop unsound ones (off: "
        "the ablation without filtering: every property that runs is kept, none is dropped as "
        "contradicting the issue, and the Tester gets no retry from the validation report)",
    )
    tester_retries: int = Field(
        default=1,
        ge=0,
        description="more Tester turns, with the validation report, when no issue property "
        "survives validation",
    )
    fresh_probes: int = Field(
        default=1,
        ge=0,
        description="when every kept property passes and feedback rounds remain, ask the "
        "Tester this many more times for new rules before accepting",
    )
    input_generator: bool = Field(
        default=False,
        description="property modes: before the properties, a Tester turn of its own (the "
        "issue and the original code only) writes hard inputs for the issue's entry points, "
        "which every property draws beside its own strategies (PGS's test input generator)",
    )
    examples_filter: bool = Field(
        default=False,
        description="property modes with the filter: an extraction turn writes the examples the "
        "issue states as tests (kept when they fail on the original code), the soundness "
        "filter's public tests: an issue property that fails when the code answers as the "
        "issue states is dropped",
    )
    properties_every_round: bool = Field(
        default=False,
        description="property modes: the Tester adds properties before every round's check "
        "after the first, as the paper regenerates them each iteration (none kept before is "
        "dropped)",
    )
    round_steps: int = Field(
        default=30, ge=0, description="steps the Generator gets after each feedback message"
    )
    round_time: float = Field(
        default=900.0, ge=0, description="seconds the Generator gets after each feedback message"
    )
    tester_model: str | None = Field(
        default=None, description="the Tester's model (default: the Generator's)"
    )
    tester_base_url: BaseURL | None = Field(
        default=None, description="the Tester model's base URL (default: the Generator's)"
    )
    tokenizer: TokenizerName = Field(default="auto", description=TOKENIZER_HELP)
    fresh_inputs: bool = Field(
        default=True,
        description="every check draws new inputs: a new Hypothesis seed per check, derived "
        "from --pgs.seed and recorded per round (off: derandomised, the same inputs every check)",
    )
    seed: int | None = Field(
        default=None,
        description="the run's seed, from which every check's Hypothesis seed derives (default: "
        "a random one, recorded in the .traj as pgs.seed; pass it again to replay the inputs)",
    )
    keep_properties: bool = Field(
        default=False, description="also write the kept properties as <id>.properties.patch"
    )
    test_cmd: str | None = Field(
        default=None, description="the repository's test command (default: related test files)"
    )
    property_template: str = Field(
        default=PROPERTY_TEMPLATE, description="the feedback message of the property modes"
    )
    io_template: str = Field(default=IO_TEMPLATE, description="the feedback message of io mode")
    tampered_note_template: str = Field(
        default=default_prompt("pgs", "tampered_note_template"), json_schema_extra=CONFIG_ONLY
    )
    tests_changed_note_template: str = Field(
        default=default_prompt("pgs", "tests_changed_note_template"), json_schema_extra=CONFIG_ONLY
    )
    tester: TesterConfig = Field(default_factory=TesterConfig)
    check: CheckSettings = Field(default_factory=CheckSettings)


def shrinks(config: PGSConfig) -> bool:
    """Whether the checks shrink failing inputs: ``check.shrink`` when set, else only for
    ``property-min`` (no minimisation in the other modes: Table 7's rows before it)."""
    if config.check.shrink is not None:
        return config.check.shrink
    return config.feedback == "property-min"


def ablation(config: PGSConfig) -> Ablation:
    """The run's full ablation setting, as recorded and as ``pgs report`` groups by."""
    return Ablation.of(
        config.feedback,
        rounds=config.rounds,
        filter=config.filter,
        fresh_probes=config.fresh_probes,
        shrink=shrinks(config),
        shrink_order=config.check.shrink_order if config.check.pool else None,
        inputs=config.input_generator,
        examples=config.examples_filter and config.filter,
        every_round=config.properties_every_round,
    )


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def judge(report: CheckReport, shows_bug: set[str]) -> tuple[Verdict, str]:
    """The verdict on one check of a candidate, and why, in one sentence.

    ``shows_bug``: node ids of the kept issue properties that failed on the original code.
    A report of a run that could not check anything (:func:`check_not_run`) is ``unchecked``;
    one whose coverage is partial (:meth:`~agent.record.check.Coverage.partial_reason`) is
    ``partial`` at best.
    """
    failures = report.failures()
    cut = f" ({report.cut})" if report.cut else ""
    if report.coverage is not None:  # how much ran, in every verdict's reason
        cut = f"; {report.coverage.describe()}{cut}"
    missing = check_not_run(report)
    if missing is not None:
        return "unchecked", f"the check could not run: {missing}{cut}"
    if failures or report.errors:
        shown = failures[0].nodeid if failures else report.errors[0].split(": ", 1)[0]
        count = len(failures) or len(report.errors)
        return "failed", f"{_plural(count, 'check')} failing on the patch, first {shown}{cut}"
    ran = [r for r in report.results if r.outcome == "passed"]
    issue = [r for r in ran if r.nodeid in shows_bug]
    regression = [r for r in ran if r.kind == "regression"]
    repo = [r for r in ran if r.kind == "repo"]
    holds = (
        f"{_plural(len(regression), 'regression property', 'regression properties')} and "
        f"{_plural(len(repo), 'related repository test')} pass"
    )
    if issue:
        fixed = _plural(len(issue), "issue property", "issue properties")
        why = f"{fixed} that failed on the original code pass on the patch; {holds}{cut}"
        partial = report.coverage.partial_reason() if report.coverage is not None else None
        if partial is not None:
            return "partial", f"{partial}; {why}"
        return "passed", why
    if regression or repo:
        return "tests-only", f"no issue property took part; {holds}{cut}"
    return "unchecked", f"nothing ran: no property and no related repository test{cut}"


def flagged(
    verdict: Verdict,
    why: str,
    *,
    tests_changed: list[GuardedChange],
    tampered: list[GuardedChange],
) -> tuple[Verdict, str]:
    """:func:`judge`'s verdict with what the check did not take from the working tree:
    ``tests-changed`` instead of ``passed``, ``partial`` or ``tests-only`` when the patch
    changes a test file the check relies on; the reason names those files and the property files the
    Generator changed (the check ran the base commit's and the Tester's versions)."""
    if tests_changed:
        files = describe(tests_changed)
        if verdict in ("passed", "partial", "tests-only"):
            verdict, why = (
                "tests-changed",
                (
                    f"the patch changes test files the check relies on: {files}; the check ran "
                    f"them as at the base commit, where {why}"
                ),
            )
        else:
            why += f"; the patch also changes {files} (the check ran the base commit's version)"
    if tampered:
        why += f"; the Generator changed {describe(tampered)}; the check ran the Tester's version"
    return verdict, why


class PGS:
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
            update={"test_cmd": config.test_cmd, "shrink": shrinks(config)}
        )
        #: The original code: the sandbox's commit once it was ready (never ``HEAD``, which
        #: the Generator can move).
        self.base = base
        #: Where every check, validation and Tester turn runs: a sandbox the Generator never
        #: touched (:mod:`envs.seal`), taken now, before the Generator's first command.
        self.seal = seal if seal is not None else seal_of(sandbox, base)
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
                box.write_file(CANDIDATE, patch)
                applied = box.run(f"{SAFE_GIT} apply --whitespace=nowarn {shlex.quote(CANDIDATE)}")
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

    def write_and_validate_properties(self) -> None:
        """The Tester's first set, validated; while no issue property survives, another turn
        with the validation report's lines (not without the filter: that retry is the filter's
        work too). The io modes (Self-Edit has no properties): the extraction turn alone, the
        issue's examples as tests, or nothing when ``issue_examples`` is off."""
        if self.config.feedback in IO_MODES:
            if not self.config.issue_examples:
                self.properties = {}
                self.record.validation = ValidationRecord(note="io: no Tester")
                self._sync()
                return
            self.status("the Tester writes the issue's examples as tests")
            self.tester_turn("examples")
            return
        if self.config.input_generator:
            self.status("the input generator chooses hard inputs")
            self.tester_turn("inputs")
        if self.config.examples_filter and self.config.filter:
            self.status("the Tester writes the issue's examples as tests (the filter's)")
            self.tester_turn("examples")
        self.status("the Tester is writing properties")
        self.tester_turn("first")
        for _ in range(self.config.tester_retries if self.config.filter else 0):
            if self.shows_bug or not self._tester_worked():
                break
            self.status("no issue property survived; the Tester tries again")
            self.tester_turn("retry", note=self._retry_note())

    def adopt(self, shared: SharedProperties) -> None:
        """Take another attempt's validated property set (``--attempts``): its files in the
        properties folder, its kept properties and validation, no Tester turn."""
        self.status(f"the properties of attempt {shared.attempt}, validated once, are checked")
        self.guard.files = {p: (t.encode("utf-8"), 0o644) for p, t in shared.properties.items()}
        self.guard.restore(self.sandbox)
        self.properties = dict(shared.properties)
        self.kept = list(shared.kept)
        self.shows_bug = set(shared.shows_bug)
        self.record.properties = dict(shared.properties)
        self.record.property_sha256 = self.guard.sha256()
        self.record.validation = shared.validation.model_copy(deep=True)
        self.record.shared_from_attempt = shared.attempt
        self._sync()

    def probe(self, round_record: RoundRecord, why: Literal["probe", "round"] = "probe") -> bool:
        """Fresh probes: the Tester once more, for rules not written yet; True if it added any
        kept property. The candidate is aside (original code) while it works. ``round``: the
        turn before a round's check (``properties_every_round``), not counted as a probe."""
        if why == "probe":
            self.probes += 1
        before = list(self.kept)
        self.restore_properties(round_record)
        self.tester_turn(why, note=self._probe_note())
        self._hold_kept(before)
        added = [n for n in self.kept if n not in before]
        round_record.probes.append(
            ProbeRecord(new_kept=added, why="round" if why == "round" else None)
        )
        self._sync()
        return bool(added)

    def _adds_every_round(self, round_record: RoundRecord) -> bool:
        """Whether the Tester adds properties before this round's check
        (``properties_every_round``: every round after the first, as the paper's)."""
        return (
            self.config.properties_every_round
            and self.config.feedback in ("property", "property-min")
            and round_record.round > 1
            and self.properties is not None
            and self._tester_worked()
            and self.shared is None
        )

    def _hold_kept(self, before: list[str]) -> None:
        """A probe only adds: every property kept before it stays kept (validation of the
        probe's files merges into the record; this holds whatever it says)."""
        lost = [n for n in before if n not in self.kept]
        if lost:
            logger.warning("a probe would have dropped %s; kept", ", ".join(lost))
            self.kept = [*before, *(n for n in self.kept if n not in before)]
            if self.record.validation is not None:
                self.record.validation.kept = list(self.kept)
            self._sync()

    def _may_probe(self) -> bool:
        return (
            self.config.feedback in ("property", "property-min")
            and self.probes < self.config.fresh_probes
            and self.feedback_sent < self.config.rounds
            and self._tester_worked()
            and self.shared is None  # adopted properties: the Tester is paid once
        )

    def _tester_worked(self) -> bool:
        return self.record.tester_error is None

    def tester_turn(self, why: str, note: str = "") -> None:
        """One Tester conversation (its own sub-trajectory), then validation of what it wrote:
        the properties (``first``, ``retry``, ``probe``, ``round``), the issue's examples
        (``examples``) or the hard inputs (``inputs``). A turn keeps only the files of its
        role (:meth:`_writes`); the others' stay as the host kept them."""
        turns = self.record.tester_turns
        key = "tester" if not turns else f"tester_{len(turns) + 1}"

        def store(conversation: TesterConversation) -> None:
            self.record.set_conversation(key, conversation)
            self._save()

        sub = SubTrajectory(self.traj, store)
        adds = why in ("probe", "round")  # the files validated before stay as they were
        held = set(self.properties or {}) if adds else set()
        before = dict(self.guard.files)
        note = "\n\n".join(n for n in (self._inputs_note(why), note) if n)
        with self._fresh() as box:  # the Tester never works where the Generator did
            try:
                run_tester(
                    self._turn_config(why),
                    self.tester_model,
                    box,
                    self.toolset,
                    sub,
                    self.problem,
                    function_calling=self.function_calling,
                    note=note,
                    base=self.base,
                    generator_config=self.generator_config,
                )
                self.guard.take(box)  # from now on, these are the properties
                mine = {p: f for p, f in self.guard.files.items() if self._writes(why, p)}
                others = {p: f for p, f in before.items() if adds or not self._writes(why, p)}
                self.guard.files = {**mine, **others}
            except ModelError as e:
                logger.warning("the Tester failed (%s); checking with what there is", e)
                self.record.tester_error = str(e)
        if why == "inputs":
            self._validate_inputs()
        # Only these (no .pgs/conftest.py, no plugin of its own; after a failed turn the last
        # set the host kept, nothing half-written), in the Generator's sandbox for its reruns.
        self.guard.restore(self.sandbox)
        self.record.property_sha256 = self.guard.sha256()
        if why == "inputs":
            turn = TesterTurn(key=key, why=why, properties=sorted(self._files_of(why)))
        elif why == "examples" and self.config.feedback not in IO_MODES:
            examples = self._validate_examples()
            turn = TesterTurn(
                key=key,
                why=why,
                properties=sorted(self._files_of(why)),
                kept=list(examples.kept),
                dropped=[d.model_copy() for d in examples.dropped],
            )
        else:
            self.properties = self._files_of("first" if why != "examples" else why)
            self.validate(sorted(p for p in self.properties if p not in held) if adds else None)
            validation = self.record.validation or ValidationRecord()
            turn = TesterTurn(
                key=key,
                why=why,
                properties=sorted(self.properties),
                kept=list(validation.kept),
                dropped=[d.model_copy() for d in validation.dropped],
            )
        turns.append(turn)
        self._save()

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

    def _turn_config(self, why: str) -> TesterConfig:
        tester = self.config.tester
        if why == "inputs":
            return tester.for_inputs()
        if why == "examples" and self.config.feedback not in IO_MODES:
            return tester.for_examples(self._examples_dir())
        if why == "examples":
            return tester.for_examples()
        return tester

    def _inputs_note(self, why: str) -> str:
        """The properties' turns are told of the input generator's hard inputs."""
        inputs = self.record.inputs
        if why in ("inputs", "examples") or inputs is None or not inputs.names:
            return ""
        return render_text(
            self.config.tester.inputs_note_template,
            {"names": inputs.names, "properties_dir": self.config.tester.properties_dir},
        )

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
            kept, everywhere = drop_failing_everywhere(kept, original, self._kept_issue_results())
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

    def _retry_note(self) -> str:
        """The Tester's retry turn: the validation report (``pgs.tester.retry_template``)."""
        validation = self.record.validation or ValidationRecord()
        report = [f"{d.nodeid}: {d.reason}" for d in validation.dropped]
        if not report:
            report = [validation.note or "no property file was written"]
        return render_text(self.config.tester.retry_template, {"report": report})

    def _probe_note(self) -> str:
        """A fresh probe: the rules already written (``pgs.tester.probe_template``)."""
        validation = self.record.validation
        results = validation.report.results if validation and validation.report else []
        rules = sorted({r.rule for r in results if r.nodeid in self.kept and r.rule})
        return render_text(self.config.tester.probe_template, {"rules": rules})

    def baseline(self, repo_tests: list[str], box: Sandbox | None = None) -> CheckReport | None:
        """The related tests (or the test command) on the original code, in ``box`` (default:
        a fresh one); each test file, and the command, runs once per run."""
        if not repo_tests and not self.check_settings.test_cmd:
            return None
        if box is None:
            with self._fresh() as fresh:
                return self.baseline(repo_tests, fresh)
        return self.baselines.ensure(box, self.base, repo_tests, settings=self.check_settings)

    def properties_patch(self) -> str:
        """The kept property files, as the Tester wrote them (restored first, whatever the
        Generator did to them), as a patch adding them under tests/pgs_properties/."""
        if not self.properties:
            return ""
        self.restore_properties(self.record.rounds[-1] if self.record.rounds else None)
        self._save()
        kept_files = {nodeid.split("::", 1)[0] for nodeid in self.kept}
        src = self.config.tester.properties_dir
        paths = " ".join(shlex.quote(p) for p in sorted(kept_files))
        base = shlex.quote(self.base)
        if not paths:
            return ""
        with self._fresh() as box:
            result = box.run(
                'idx=$(mktemp) && rm -f "$idx" && export GIT_INDEX_FILE="$idx" && '
                f"{SAFE_GIT} read-tree {base} && {SAFE_GIT} add -f -- {paths} && "
                f'{SAFE_GIT} diff --cached {base} -- {paths}; rm -f "$idx"'
            )
        return result.output.replace(f"{src}/", "tests/pgs_properties/")
