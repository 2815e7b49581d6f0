"""Choosing one patch among other agents' patches for the same instance: ``selection.json``.

Written by ``pgs select`` (:mod:`agent.swebench.selection`): per instance, every distinct
candidate patch (identical ones merged, with all their sources), the evidence a sealed check
found on it, its rank, the chosen one and why, and the ties. The evidence is about the patch
and what it does, never about where it came from: sources are kept to be shown, and only their
number (how many times the same patch was submitted) is a key of the order. With ``--model``
the instance also holds the Tester's properties (:class:`SelectProperties`) and each
candidate's evidence what they found on it.
"""

from __future__ import annotations

from pydantic import Field

from agent.record.base import Record
from agent.record.pgs import TesterTurn, ValidationRecord

#: The keys of the order, best first, as recorded and as the reason names them
#: (:data:`agent.swebench.selection.rank.KEYS` holds how each is computed).
SELECT_ORDER = (
    "applies",
    "repository tests broken",
    "issue properties passed",
    "candidates' fail-to-pass tests passed",
    "changes the issue's behaviour",
    "behaviour cluster",
    "own tests pass",
    "changes no test files",
    "agreement with the other patches",
    "identical submissions",
    "touches the files the issue names",
    "patch size",
)


class Source(Record):
    """One submission of a patch: the predictions file and the ``model_name_or_path`` in it."""

    file: str = Field(description="the predictions file (or pgs run) it came from")
    model: str = Field("", description="its model_name_or_path")


class Probe(Record):
    """A piece of the issue's own code (a fenced block or a ``>>>`` session), run against the
    original code and every candidate, statement by statement, as a console would."""

    name: str = Field(description="probe-1, probe-2, ... in the order of the issue")
    code: str
    original: str = Field("", description="what it printed on the original code, normalised")


class AddedTest(Record):
    """A test a candidate's patch adds or changes (its node id, after its patch), and how it
    ends on the original code."""

    nodeid: str
    by: list[int] = Field(default_factory=list, description="the candidates whose patch has it")
    original: str = Field("", description="passed, failed, error, ... on the original code")


class Evidence(Record):
    """What the sealed check of one candidate found."""

    applies: bool = True
    apply_error: str | None = None
    broken: list[str] = Field(
        default_factory=list,
        description="related repository tests that pass on the original code and fail here",
    )
    related_run: int = Field(0, description="related repository tests that ran")
    probes: dict[str, str] = Field(
        default_factory=dict, description="{probe name: what it printed, normalised}"
    )
    probes_changed: int = Field(0, description="probes whose output differs from the original's")
    cross: dict[str, str] = Field(
        default_factory=dict, description="{added test node id: how it ended on this candidate}"
    )
    fail_to_pass_total: int = Field(
        0, description="added tests (of any candidate) that fail on the original code"
    )
    fail_to_pass_passed: int = Field(0, description="of those, the ones passing here")
    own_tests: int = Field(0, description="tests this candidate's patch adds or changes")
    own_tests_failing: int = Field(0, description="of those, the ones failing on this patch")
    cluster: int = Field(0, description="the behaviour cluster (0: the largest)")
    cluster_sources: int = Field(
        0, description="submissions of the candidates behaving exactly as this one"
    )
    issue_files: int = Field(0, description="changed code files the issue names")
    code_files: int = Field(0, description="changed code files (.py, not tests)")
    text_agreement: float = Field(
        0.0, description="summed shares of changed lines in common with each other candidate"
    )
    tests_changed: list[str] = Field(default_factory=list, description="test files it changes")
    issue_properties_total: int = Field(
        0, description="the Tester's kept issue properties that fail on the original code"
    )
    issue_properties_passed: int = Field(0, description="of those, the ones passing here")
    properties_broken: list[str] = Field(
        default_factory=list,
        description="the Tester's regression properties (and property errors) failing here",
    )
    property_results: dict[str, str] = Field(
        default_factory=dict,
        description="{property node id: passed, or how it failed and on which input}",
    )
    property_verdict: str | None = Field(
        None, description="the PGS verdict of the property check (with --model)"
    )
    property_reason: str | None = None
    property_error: str | None = Field(None, description="why the property check could not run")
    patch_lines: int = Field(0, description="lines added and removed")
    seconds: float = Field(0.0, description="what its check took")
    error: str | None = Field(None, description="why its check could not run")


class SelectProperties(Record):
    """The Tester's issue properties of one instance (``pgs select --model``): written once on
    the original code, validated there as pgs validates them, then run against every
    candidate with the same Hypothesis seed and the same replayed failing inputs."""

    model: str = Field(description="the Tester's model")
    files: dict[str, str] = Field(default_factory=dict, description="{path: text} it wrote")
    kept: list[str] = Field(default_factory=list, description="node ids kept by validation")
    shows_bug: list[str] = Field(
        default_factory=list, description="kept issue properties failing on the original code"
    )
    validation: ValidationRecord | None = Field(None, description="the run on the original code")
    tester_turns: list[TesterTurn] = Field(default_factory=list)
    seed: int | None = Field(None, description="the run's seed (--pgs.seed replays it)")
    check_seed: int | None = Field(None, description="the Hypothesis seed of every candidate")
    cost: float = Field(0.0, description="what the Tester cost, USD")
    tester_error: str | None = Field(None, description="why the Tester failed, if it did")
    error: str | None = Field(None, description="why the properties could not be written")


class SelectCandidate(Record):
    """One distinct patch, its sources, its evidence and its rank."""

    index: int = Field(description="1, 2, ... in the order the patches were first read")
    patch: str
    sources: list[Source] = Field(default_factory=list)
    evidence: Evidence = Field(default_factory=Evidence)
    rank: int = Field(0, description="1: the chosen one")
    key: list[float] = Field(default_factory=list, description="the sort key (smaller is better)")


class InstanceSelection(Record):
    """The choice for one instance."""

    instance_id: str
    candidates: list[SelectCandidate] = Field(default_factory=list)
    probes: list[Probe] = Field(default_factory=list)
    added_tests: list[AddedTest] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list, description="the related test files")
    order: list[str] = Field(default_factory=lambda: list(SELECT_ORDER))
    chosen: int | None = Field(None, description="the chosen candidate's index")
    reason: str = ""
    ties: list[int] = Field(
        default_factory=list, description="candidates equal to the chosen one on every key"
    )
    #: What identifies the input of this selection: a rerun with other candidates redoes it.
    candidates_hash: str = ""
    properties: SelectProperties | None = Field(
        None, description="the Tester's properties (only with --model)"
    )
    seconds: dict[str, float] = Field(
        default_factory=dict,
        description="time spent: image, base, properties, candidates, in seconds",
    )
    error: str | None = Field(None, description="why no candidate could be checked")


class SelectionRecord(Record):
    """``selection.json``: every instance's choice."""

    model_name_or_path: str = "pgs-select"
    order: list[str] = Field(default_factory=lambda: list(SELECT_ORDER))
    predictions: list[str] = Field(default_factory=list, description="the files read")
    instances: dict[str, InstanceSelection] = Field(default_factory=dict)
