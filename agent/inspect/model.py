"""What ``pgs inspect`` shows, as plain typed data: no HTML here, so a terminal view can use it.

The inspector holds no model of the run of its own: every trajectory, pgs's or a foreign one,
is read into a :class:`~agent.record.trajectory.RunRecord` (:func:`agent.record.foreign.record_of`)
and the classes here are views computed from it, holding the record's parts (``record``,
``candidate``, ``result``) and only what showing needs beside them: parsed diffs, the step each
round checked, each property's fate, batch rows. :mod:`agent.inspect.load` builds them;
:mod:`agent.inspect.html` renders them. Texts are kept whole (a view decides how much to show).
Whatever a file does not hold is said, never guessed: a view has ``missing``, a list of
sentences ``"missing: <what>"`` that is printed where the part would be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent.record.attempts import Candidate
from agent.record.check import FailingInput, TestResult
from agent.record.pgs import PGSRecord, RoundRecord, SelectionRecord, TesterTurn
from agent.record.selection import InstanceSelection, SelectCandidate
from agent.record.selection import SelectionRecord as SelectRecord
from agent.record.steps import Step
from agent.record.trajectory import RunRecord

DiffLineKind = Literal["context", "added", "removed", "note"]


@dataclass
class DiffLine:
    """A view of one line of a patch in the record, parsed for rendering."""

    kind: DiffLineKind
    text: str
    #: Line numbers in the old and the new file (None where the line is not in that file).
    old: int | None = None
    new: int | None = None


@dataclass
class Hunk:
    """A view of one hunk of a patch in the record, parsed for rendering."""

    header: str
    lines: list[DiffLine] = field(default_factory=list)


@dataclass
class FileDiff:
    """A view of one file's change in a patch in the record, parsed for rendering."""

    path: str
    old_path: str | None = None
    #: modified, added, removed, renamed or binary.
    status: str = "modified"
    added: int = 0
    removed: int = 0
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class Diff:
    """A view of a patch the record holds (a submission, a round's candidate, an attempt's),
    parsed with ``unidiff`` for rendering; ``error`` when it could not be (``text`` stays)."""

    text: str
    files: list[FileDiff] = field(default_factory=list)
    error: str | None = None

    @property
    def empty(self) -> bool:
        return not self.text.strip()

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)


@dataclass
class UsageView:
    """A view of a record's :class:`~agent.record.steps.ModelStats` or a step's
    :class:`~agent.record.steps.Usage`, computed from it (:func:`agent.inspect.lenient.usage_of`):
    None for each number the file does not hold, where the record defaults it to 0."""

    tokens_sent: int | None = None
    tokens_received: int | None = None
    cost: float | None = None
    api_calls: int | None = None


@dataclass
class StepView:
    """A view of one step, computed from the record: a :class:`~agent.record.steps.Step` of its
    ``trajectory``, or for a file without steps (mini-swe-agent, a history only) a reply of its
    ``history`` and what followed; with its place, the round that checked it, an estimate of
    its tokens and what it lacks."""

    index: int  # 1-based
    #: The step as the record holds it (rebuilt from the history for a file without steps).
    step: Step = field(default_factory=Step)
    #: The environment's state after the step (working_dir, open_file, ...), as text.
    state: dict[str, str] = field(default_factory=dict)
    #: This step's model call, when the writer recorded it per step.
    usage: UsageView | None = None
    #: Tokens this step added to the conversation, estimated (about 4 characters a token) from
    #: its reply and its observation: what the chart shows when ``usage`` is None.
    estimated_tokens: int = 0
    #: The PGS round this step's submission started (its candidate was checked there).
    round: int | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def thought(self) -> str:
        return self.step.thought

    @property
    def action(self) -> str:
        return self.step.action

    @property
    def observation(self) -> str:
        return self.step.observation

    @property
    def response(self) -> str:
        return self.step.response

    @property
    def execution_time(self) -> float | None:
        seconds = self.step.execution_time
        return None if seconds is None else float(seconds)

    @property
    def tool(self) -> str | None:
        return self.step.tool or None

    @property
    def exit_code(self) -> int | None:
        return self.step.exit_code


@dataclass
class Failure:
    """A view of one failed test of a check (a property or a repository test), computed from
    the record's :class:`~agent.record.check.TestResult`: every input it failed on, and whether
    it is the failure fed back."""

    result: TestResult
    inputs: list[FailingInput] = field(default_factory=list)
    #: The failure chosen for the feedback message.
    chosen: bool = False


@dataclass
class Round:
    """A view of one checked candidate, computed from the record's
    :class:`~agent.record.pgs.RoundRecord` (``record``): its patch and interdiff parsed, its
    failures, the step that submitted it and what the record lacks."""

    record: RoundRecord
    number: int
    patch: Diff
    #: The step whose submission this candidate is (None: the diff a limit ended the run with).
    step: int | None = None
    #: This candidate against the previous one (None for the first).
    interdiff: Diff | None = None
    failures: list[Failure] = field(default_factory=list)
    #: pytest's own errors (a file that does not import).
    errors: list[str] = field(default_factory=list)
    passed: int = 0
    #: What the check's time budget left out.
    cut: str | None = None
    #: How much of the check ran, in one sentence (None: not recorded).
    coverage: str | None = None
    #: Fresh probes before the candidate was accepted: the new kept properties of each.
    probes: list[list[str]] = field(default_factory=list)
    #: "path (change)" of each property file the Generator changed (the check ran the
    #: Tester's version), and of each test file the patch changes (run as at the base commit).
    tampered: list[str] = field(default_factory=list)
    tests_changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def selection(self) -> SelectionRecord | None:
        """The failure fed back, as the record holds it."""
        return self.record.selection

    @property
    def feedback(self) -> str | None:
        """The feedback message as the Generator got it (None: none was sent)."""
        return self.record.feedback

    @property
    def verdict(self) -> str | None:
        return self.record.verdict

    @property
    def note(self) -> str | None:
        return self.record.note


@dataclass
class Property:
    """A view of one property's fate, computed from the record's ``pgs`` (its Tester turns,
    validation and reports, its markers in the property files): the record holds no such
    object, only the lists it is gathered from."""

    nodeid: str
    kind: str | None = None  # issue or regression
    rule: str | None = None
    #: kept, dropped, or gone (in an earlier Tester turn, not in the final set).
    status: str = "kept"
    #: Why it was dropped, or why it was kept (when the record says).
    reason: str | None = None
    #: The Tester turn that wrote or last validated it (tester, tester_2, ...).
    turn: str | None = None
    #: What it did on the original code: outcome and category, and the failing input.
    on_original: str | None = None
    original_example: str | None = None


@dataclass
class TesterTurnView:
    """A view of one Tester turn, computed from the record: its
    :class:`~agent.record.pgs.TesterTurn` (None: a conversation stored without one) and its
    conversation shown as a trajectory."""

    key: str
    record: TesterTurn | None = None
    trajectory: TrajectoryView | None = None

    @property
    def why(self) -> str | None:
        return (self.record.why if self.record is not None else None) or None

    @property
    def files(self) -> list[str]:
        return list(self.record.properties) if self.record is not None else []

    @property
    def kept(self) -> int:
        return len(self.record.kept) if self.record is not None else 0

    @property
    def dropped(self) -> int:
        return len(self.record.dropped) if self.record is not None else 0


@dataclass
class PGSPanel:
    """A view of the run record's :class:`~agent.record.pgs.PGSRecord` (``record``), computed
    from it: each property's fate, the rounds and Tester turns shown, the Testers' usage
    together and what the record lacks."""

    record: PGSRecord
    #: The feedback mode: the record's, else the run configuration's (None: neither says).
    mode: str | None = None
    #: The record's verdict (None: the record does not hold one).
    verdict: str | None = None
    properties: list[Property] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    tester_turns: list[TesterTurnView] = field(default_factory=list)
    tester_usage: UsageView = field(default_factory=UsageView)
    missing: list[str] = field(default_factory=list)


@dataclass
class AttemptView:
    """A view of one attempt (``--attempts``), computed from the record's
    :class:`~agent.record.attempts.Candidate`: its patch parsed for showing, and the interdiff
    from the chosen patch to it."""

    candidate: Candidate
    chosen: bool
    patch: Diff
    #: From the chosen patch to this one (None: the chosen one; an error: text in ``patch``).
    interdiff: Diff | None = None


@dataclass
class SelectCandidateView:
    """A view of one candidate of ``pgs select`` (``selection.json``), computed from the
    record's :class:`~agent.record.selection.SelectCandidate`: its patch parsed, the interdiff
    from the chosen patch to it, and the evidence's lists spelled out."""

    candidate: SelectCandidate
    chosen: bool
    #: Equal to the chosen one on every key (the first read was chosen).
    tied: bool
    patch: Diff
    #: From the chosen patch to this one (None: the chosen one; an error: see ``patch``).
    interdiff: Diff | None = None
    #: The probes whose output on it differs from the original code's.
    probes_changed: list[str] = field(default_factory=list)
    #: The candidates' fail-to-pass tests (added tests failing on the original code) and how
    #: each ended on it.
    fail_to_pass: dict[str, str] = field(default_factory=dict)


@dataclass
class InstanceSelectionView:
    """A view of one instance of ``selection.json``: its
    :class:`~agent.record.selection.InstanceSelection` (``selection``) and its candidates,
    best rank first."""

    selection: InstanceSelection
    candidates: list[SelectCandidateView] = field(default_factory=list)

    @property
    def instance_id(self) -> str:
        return self.selection.instance_id

    @property
    def chosen(self) -> SelectCandidateView | None:
        return next((c for c in self.candidates if c.chosen), None)


@dataclass
class SelectionView:
    """What ``pgs inspect`` shows of a ``pgs select`` output: a view of its
    :class:`~agent.record.selection.SelectionRecord` (``record``, read from ``path``), the
    instances shown (all, or the one asked for) and what the file lacks."""

    record: SelectRecord
    path: Path
    instances: list[InstanceSelectionView] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass
class TrajectoryView:
    """The page of one run: a view of a :class:`~agent.record.trajectory.RunRecord` (``record``,
    whatever writer's file it was read from), computed from it for showing."""

    record: RunRecord
    path: Path | None
    instance_id: str
    issue: str | None = None
    steps: list[StepView] = field(default_factory=list)
    #: Limits that ended the run, each in words (step limit, cost limit, ...).
    limits_hit: list[str] = field(default_factory=list)
    #: Limits in force ("100 steps", "3600 s", "$3.00"), as far as the file says.
    limits: list[str] = field(default_factory=list)
    submission: Diff | None = None
    usage: UsageView = field(default_factory=UsageView)
    model_name: str | None = None
    pgs: PGSPanel | None = None
    #: Why there is no PGS record when that is by design (``--feedback none``).
    pgs_absent: str | None = None
    missing: list[str] = field(default_factory=list)
    #: ``--attempts``: every attempt side by side (the choice: ``record.attempts``).
    attempts: list[AttemptView] | None = None

    @property
    def exit_status(self) -> str | None:
        return self.record.info.exit_status

    @property
    def error(self) -> str | None:
        """The error that ended the run (None: none recorded)."""
        return self.record.info.error or None

    @property
    def duration(self) -> float | None:
        """Seconds the run took (None: not recorded)."""
        seconds = self.record.info.duration
        return None if seconds is None else float(seconds)

    @property
    def writer(self) -> str:
        """pgs, swe-agent, mini-swe-agent or unknown: which writer's layout the file follows."""
        return self.record.writer

    @property
    def total_cost(self) -> float | None:
        """The Generator's and the Tester's cost together (None: neither is recorded)."""
        costs = [self.usage.cost]
        if self.pgs is not None:
            costs.append(self.pgs.tester_usage.cost)
        known = [c for c in costs if c is not None]
        return sum(known) if known else None


@dataclass
class BatchRow:
    """A view of one run in a batch folder, computed from its record (or its prediction, when
    it has no trajectory) and the eval report: a row of the batch table."""

    instance_id: str
    traj_path: Path | None
    exit_status: str | None = None
    steps: int | None = None
    cost: float | None = None
    duration: float | None = None
    verdict: str | None = None
    mode: str | None = None
    rounds: int | None = None
    #: From the eval report: resolved, unresolved, error, empty patch, not graded; None: no
    #: report.
    resolved: str | None = None
    #: Why it could not be graded (the report's errors), when it says.
    eval_error: str | None = None
    missing: list[str] = field(default_factory=list)


@dataclass
class BatchView:
    """A view of a batch folder: its rows and the eval report beside them."""

    path: Path
    rows: list[BatchRow] = field(default_factory=list)
    eval_report: Path | None = None
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def resolved(self) -> int:
        return sum(r.resolved == "resolved" for r in self.rows)

    @property
    def graded(self) -> int:
        return sum(r.resolved not in (None, "not graded") for r in self.rows)
