"""What PGS records in a trajectory, under its ``pgs`` key: one :class:`PGSRecord`.

:class:`agent.pgs.reviewer.PGS` builds the record and writes it with ``model_dump(mode="json")``;
every other module reads it with :meth:`PGSRecord.model_validate` (or
:attr:`agent.record.trajectory.RunRecord.pgs_record`), never by key. The JSON is the one written
before these models existed, key for key:

- ``mode``, ``verdict``, ``verdict_reason``; ``tester_error`` only when the Tester failed;
- ``ablation``: the run's full ablation setting (:class:`Ablation`; left out by runs written
  before it existed, whose setting :func:`agent.pgs.compare.ablation_of` derives);
- ``tokenizer`` (:class:`TokenizerRecord`) and ``seed``, in runs since they were added;
- ``base_commit``: the original code's commit; ``property_sha256``: the hashes of the files the
  Tester left (both only once known);
- ``properties``: ``{path: text}`` of the Tester's last set;
- ``validation``: the last set on the original code (:class:`ValidationRecord`);
- ``tester_turns``: one :class:`TesterTurn` per Tester conversation;
- ``rounds``: one :class:`RoundRecord` per checked candidate;
- ``shared_from_attempt``: with ``--attempts``, the attempt whose properties this run adopted;
- ``tester``, ``tester_2``, ...: each Tester conversation (:class:`TesterConversation`), kept
  as extra keys of the record (:meth:`PGSRecord.conversations`).

Reading is tolerant: unknown keys are kept (and written back), missing ones take defaults, so
a ``.traj`` written by an older pgs loads (``{"mode": "none"}`` is the whole record of a run
without PGS). Keys the old records left out until they had a value are left out the same way
(:attr:`Record.omitted_when_empty`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from agent.record.base import Record, load
from agent.record.check import CheckReport, FailingInput, TestResult
from agent.record.steps import Info, Step

FeedbackMode = Literal["none", "io", "io-min", "property", "property-min"]
#: Best first. ``partial``: ``passed`` on fewer than half of the related test files
#: (:data:`agent.record.check.PARTIAL_BELOW`); ``tests-changed``: the patch changes a test file
#: the check relies on (which ran as at the base commit).
Verdict = Literal["passed", "partial", "tests-only", "tests-changed", "unchecked", "failed"]
#: The keys of the Tester's conversations in a record: ``tester``, ``tester_2``, ...
CONVERSATION_KEY = re.compile(r"tester(_\d+)?")


class DroppedProperty(Record):
    """A property validation dropped, and why."""

    nodeid: str = ""
    reason: str = ""


class ValidationRecord(Record):
    """The Tester's last set of properties run on the original code."""

    omitted_when_empty = ("report", "filter", "note", "why_kept", "seed", "oracle")
    kept: list[str] = Field(default_factory=list, description="node ids of the kept properties")
    why_kept: dict[str, str] | None = Field(
        None,
        description="{node id: why it was kept}, e.g. 'fails by its assertion ...', 'raises "
        "ValueError from repo module x.y (f), named by the issue', 'regression: passes on the "
        "original code' (None: recorded before pgs said why)",
    )
    dropped: list[DroppedProperty] = Field(default_factory=list)
    report: CheckReport | None = Field(None, description="the run on the original code")
    filter: bool | None = Field(None, description="False: the ablation without filtering")
    note: str | None = Field(None, description="e.g. 'no properties', 'io: no Tester'")
    seed: int | None = Field(
        None, description="the Hypothesis seed of that run (None: derandomised)"
    )
    oracle: CheckReport | None = Field(
        None,
        description="the issue properties' explicit examples run with the issue's stated "
        "examples answering the calls they name (pgs.examples_filter): a failure there "
        "contradicts the issue",
    )


class TesterTurn(Record):
    """One Tester conversation: why it ran, the files it left, what validation kept."""

    __test__ = False  # not a pytest test class

    key: str = Field("", description="where its conversation is stored: tester, tester_2, ...")
    why: str = Field(
        "",
        description="first, retry, probe, round (properties_every_round), examples (the io "
        "modes' one turn, or the filter's public tests) or inputs (the input generator)",
    )
    properties: list[str] = Field(default_factory=list, description="the property files")
    kept: list[str] = Field(default_factory=list)
    dropped: list[DroppedProperty] = Field(default_factory=list)


class TesterConversation(Record):
    """A Tester conversation, stored like a trajectory's own steps."""

    __test__ = False  # not a pytest test class

    trajectory: list[Step] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    info: Info = Field(default_factory=Info)


class ProbeRecord(Record):
    """A fresh probe (or, with ``properties_every_round``, the round's new properties): the
    kept properties it added."""

    omitted_when_empty = ("why",)
    new_kept: list[str] = Field(default_factory=list)
    why: Literal["round"] | None = Field(
        None, description="round: the Tester's turn before this round's check (None: a probe)"
    )


class InputsRecord(Record):
    """The input generator's hard inputs (``pgs.input_generator``)."""

    omitted_when_empty = ("note",)
    names: dict[str, int] = Field(
        default_factory=dict, description="{name: how many values}, as hard_inputs.py defines"
    )
    used_by: list[str] = Field(
        default_factory=list,
        description="kept properties that drew them when validated on the original code",
    )
    note: str | None = Field(None, description="why there are none, e.g. the file did not import")


class SelectionRecord(Record):
    """The failure fed back (:class:`agent.pgs.feedback.Selection` as recorded; older records
    may lack fields, e.g. ``chosen``)."""

    result: TestResult | None = None
    chosen: FailingInput | None = None
    category: str | None = None
    mode: str | None = None
    input: str | None = None
    tokens: int | None = None
    counter: str | None = None
    candidates: int | None = None
    why: str = ""
    issue_example: str | None = None

    @property
    def nodeid(self) -> str:
        """The node id of the failure fed back (``?`` when the record does not say)."""
        return self.result.nodeid if self.result is not None else "?"

    @property
    def chosen_example(self) -> str | None:
        """The chosen failing input as Hypothesis reports it."""
        return self.chosen.example if self.chosen is not None else None


class GuardedChange(Record):
    """A file the check relies on that the Generator (or its patch) changed, and what it did:
    a property file (``edited``, ``deleted``, ``added``, ``mode 644 -> 600``, ``replaced by a
    symlink``, ...) or a repository test file, conftest.py or pytest configuration
    (``modified``, ``deleted``, ``added``). The check ran the Tester's or the base commit's
    version instead (:mod:`agent.pgs.guard`)."""

    path: str = ""
    change: str = ""


class RoundRecord(Record):
    """One checked candidate: its patch, the check's report and verdict, the feedback sent."""

    omitted_when_empty = (
        "probes",
        "report",
        "failures",
        "verdict",
        "note",
        "selection",
        "feedback",
        "seed",
        "tampered",
        "tests_changed",
        "sealed",
    )
    round: int = Field(0, description="1 for the first candidate")
    patch: str = ""
    probes: list[ProbeRecord] = Field(default_factory=list)
    report: CheckReport | None = None
    failures: int | None = Field(None, description="failing tests in the report")
    verdict: Verdict | None = None
    sealed: bool | None = Field(
        None,
        description="True: the check ran in a fresh sandbox the Generator never touched; "
        "False: in the Generator's own (--sandbox local); None: not recorded",
    )
    note: str | None = Field(None, description="why no feedback was sent, or the run ended")
    selection: SelectionRecord | None = None
    feedback: str | None = Field(None, description="the message sent to the Generator")
    seed: int | None = Field(
        None, description="the Hypothesis seed of the recorded check (None: derandomised)"
    )
    tampered: list[GuardedChange] = Field(
        default_factory=list,
        description="what the Generator did to the Tester's property files (or the plugin "
        "folder) since the Tester's last turn; the check ran the Tester's version",
    )
    tests_changed: list[GuardedChange] = Field(
        default_factory=list,
        description="repository test files (conftest.py, pytest configuration) the check "
        "relies on that the candidate changes; the check ran them as at the base commit",
    )


class TokenizerRecord(Record):
    """How feedback inputs were counted: the setting, the counter used, why it fell back."""

    omitted_when_empty = ("fallback",)
    setting: str = Field("auto", description="the pgs.tokenizer setting")
    counter: str = Field("simple", description="the counter used, e.g. tiktoken:o200k_base")
    fallback: str | None = Field(
        None, description="why the simple rule counts instead of the model's tokenizer"
    )


class Ablation(Record):
    """A run's ablation setting: the row of the PGS paper's Table 7 it belongs to, what
    ``pgs report`` and ``pgs ladder`` group runs by. A field the mode does not use is None
    (:meth:`of`): ``none`` has no rounds, ``io`` no Tester (no filter, no probes)."""

    mode: FeedbackMode = "none"
    rounds: int | None = Field(None, description="most feedback rounds")
    filter: bool | None = Field(None, description="the soundness filter on the properties")
    fresh_probes: int | None = Field(None, description="fresh probes of the Tester")
    shrink: bool | None = Field(None, description="Hypothesis's shrink phase in the checks")
    shrink_order: Literal["pick-then-shrink"] | None = Field(
        None,
        description="pick-then-shrink: the fewest-token input of the pool was shrunk (None: "
        "shrink-then-pick, the default, or no shrinking; docs/pgs.md, the counterexample pool)",
    )
    inputs: bool | None = Field(
        None, description="True: the input generator's hard inputs (None: off, or not used)"
    )
    examples: bool | None = Field(
        None,
        description="True: the issue's examples were the soundness filter's public tests "
        "(None: off, or not used)",
    )
    every_round: bool | None = Field(
        None, description="True: the Tester added properties every round (None: off)"
    )
    omitted_when_empty = ("shrink_order", "inputs", "examples", "every_round")

    @classmethod
    def of(
        cls,
        mode: FeedbackMode,
        *,
        rounds: int | None,
        filter: bool | None,
        fresh_probes: int | None,
        shrink: bool | None,
        shrink_order: str | None = None,
        inputs: bool = False,
        examples: bool = False,
        every_round: bool = False,
    ) -> Ablation:
        """The setting with the fields ``mode`` does not use set to None, so that two runs of
        one row compare equal whatever their unused options were (the shrink order too,
        without shrinking; the default order is None, as in runs recorded before it; the
        paper's extra Tester turns are None when off, as in runs recorded before them)."""
        if mode == "none":
            return cls(mode=mode)
        tester = mode in ("property", "property-min")
        order = "pick-then-shrink" if shrink and shrink_order == "pick-then-shrink" else None
        return cls(
            mode=mode,
            rounds=rounds,
            filter=filter if tester else None,
            fresh_probes=fresh_probes if tester else None,
            shrink=shrink,
            shrink_order=order,
            inputs=True if tester and inputs else None,
            examples=True if tester and filter and examples else None,
            every_round=True if tester and every_round else None,
        )


class PGSRecord(Record):
    """Everything PGS did in one run (the trajectory's ``pgs`` key)."""

    omitted_when_empty = (
        "tester_error",
        "ablation",
        "tokenizer",
        "seed",
        "base_commit",
        "property_sha256",
        "shared_from_attempt",
        "sealed",
        "examples",
        "inputs",
    )
    mode: FeedbackMode = "none"
    ablation: Ablation | None = Field(None, description="the run's full ablation setting")
    rounds: list[RoundRecord] = Field(default_factory=list)
    properties: dict[str, str] | None = Field(
        None, description="{path: text} of the Tester's last set (None: never recorded)"
    )
    property_sha256: dict[str, str] | None = Field(
        None,
        description="{path: sha256} of every file the Tester left in the properties folder: "
        "what each check restores and runs",
    )
    base_commit: str | None = Field(
        None, description="the sandbox's base commit: the original code of every check"
    )
    validation: ValidationRecord | None = None
    examples: ValidationRecord | None = Field(
        None,
        description="property modes with pgs.examples_filter: the issue's examples as tests, "
        "validated on the original code (kept: those failing there), the soundness filter's "
        "public tests (in the io modes the examples are the validation itself)",
    )
    inputs: InputsRecord | None = Field(
        None, description="the input generator's hard inputs (pgs.input_generator)"
    )
    tester_turns: list[TesterTurn] = Field(default_factory=list)
    verdict: Verdict = "unchecked"
    verdict_reason: str | None = None
    sealed: bool | None = Field(
        None,
        description="True: every check ran in a fresh sandbox the Generator never touched "
        "(envs/seal.py); False: in the Generator's own (--sandbox local), which the verdict's "
        "reason says; None: not recorded (older records)",
    )
    tester_error: str | None = Field(None, description="why the Tester failed, if it did")
    tokenizer: TokenizerRecord | None = Field(None, description="how input tokens were counted")
    seed: int | None = Field(
        None,
        description="the run's seed: each check's Hypothesis seed derives from it (--pgs.seed "
        "replays them); None: derandomised checks",
    )
    shared_from_attempt: int | None = Field(
        None,
        description="with --attempts: the attempt whose Tester wrote the properties this run "
        "adopted (no Tester turn of its own); None: its own Tester's",
    )

    def feedback_rounds(self) -> list[RoundRecord]:
        """The rounds that sent feedback to the Generator."""
        return [r for r in self.rounds if r.feedback]

    def conversations(self) -> dict[str, TesterConversation]:
        """The Tester's conversations by key (``tester``, ``tester_2``, ...)."""
        return {
            key: load(TesterConversation, value)
            for key, value in (self.model_extra or {}).items()
            if CONVERSATION_KEY.fullmatch(key) and isinstance(value, dict)
        }

    def set_conversation(self, key: str, conversation: TesterConversation) -> None:
        if not CONVERSATION_KEY.fullmatch(key):
            raise ValueError(f"not a Tester conversation key: {key!r}")
        setattr(self, key, conversation.model_dump(mode="json"))
