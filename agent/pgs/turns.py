"""The Tester's turns: its conversations (properties, retries, probes, a round's new
properties, the issue's examples, the input generator's hard inputs), what each keeps, and the
notes they are given.

:class:`TesterTurns` is the part of :class:`agent.pgs.reviewer.PGS` that talks to the Tester
(:func:`agent.pgs.tester.run_tester`, always in a fresh sandbox of the original code) and hands
what it wrote to validation (:class:`agent.pgs.filtering.Filtering`).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from typing import Literal

from agent.core.loop_config import AgentConfig
from agent.core.prompts import render_text
from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.errors import ModelError
from agent.models import Model
from agent.pgs.feedback import IO_MODES
from agent.pgs.filtering import Filtering
from agent.pgs.guard import SAFE_GIT
from agent.pgs.shared import SharedProperties
from agent.pgs.tester import SubTrajectory, TesterConfig, run_tester
from agent.record.pgs import (
    GuardedChange,
    ProbeRecord,
    RoundRecord,
    TesterConversation,
    TesterTurn,
    ValidationRecord,
)
from envs.sandbox import Sandbox

logger = logging.getLogger(__name__)


class TesterTurns(Filtering):
    """The Tester's conversations (a base of :class:`~agent.pgs.reviewer.PGS`, which sets these
    attributes and the methods below)."""

    sandbox: Sandbox
    toolset: Toolset
    tester_model: Model
    traj: Trajectory
    function_calling: bool
    generator_config: AgentConfig | None
    base: str
    status: Callable[[str], None]
    shared: SharedProperties | None
    feedback_sent: int
    probes: int

    def _save(self) -> None:
        raise NotImplementedError

    def restore_properties(self, round_record: RoundRecord | None) -> list[GuardedChange]:
        raise NotImplementedError

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
