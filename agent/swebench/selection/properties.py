"""The Tester's issue properties as evidence of ``pgs select --model``.

Per instance, once, on the original code: the Tester (:func:`agent.pgs.tester.run_tester`,
through :class:`~agent.pgs.reviewer.PGS`) writes its properties in a fresh container of the
instance's seal and they are validated there as every pgs run validates them (unsound ones
dropped; the kept issue properties that fail on the original code *show the bug*, and the
inputs they failed on are replayed in every later check). Then every candidate that applies is
checked by them as ``--attempts`` checks pgs's own attempts (:func:`agent.run.run_attempts.select`):
the same :class:`PGS` object, a fresh container of the seal per candidate, the same Hypothesis
seed (its check counter reset) and the same replayed inputs. The patch checked is the one the
harness's commands applied (:meth:`~envs.sandbox.Sandbox.diff` of the candidate's container),
so a patch only ``patch --fuzz`` takes is checked too.

What comes out: the instance's :class:`~agent.record.selection.SelectProperties` (the files,
the kept node ids, the validation, the Tester's turns and cost) and, per candidate, the
``issue_properties_*`` and ``properties_broken`` fields of its
:class:`~agent.record.selection.Evidence`. The Tester's whole conversation goes to its own
file (``instances/<id>.tester.json``, a run record).
"""

from __future__ import annotations

from pathlib import Path

from agent.core.secrets import Redactor
from agent.core.trajectory_file import Trajectory
from agent.errors import InputError
from agent.models import get_model
from agent.pgs.feedback import get_counter
from agent.pgs.reviewer import PGS
from agent.pgs.selection import evidence
from agent.record.pgs import RoundRecord
from agent.record.selection import Evidence, SelectProperties
from agent.run.config import RunConfig
from agent.run.reviewer import tester_model_config, with_pinned_plugins
from envs.sandbox import Sandbox
from envs.seal import Seal


def check_tester_config(config: RunConfig) -> None:
    """A configuration ``pgs select`` can write properties with: a mode that has a Tester."""
    if config.pgs.feedback in ("none", "io", "io-min"):
        raise InputError(
            f"pgs select --model writes the Tester's properties: --feedback "
            f"{config.pgs.feedback} has no Tester (leave it out, or give property or "
            "property-min)"
        )


class IssueProperties:
    """The Tester's properties of one instance: :meth:`write` once, :meth:`check` per
    candidate."""

    def __init__(
        self,
        config: RunConfig,
        original: Sandbox,
        seal: Seal,
        base: str,
        problem_statement: str,
        *,
        tester_record: Path,
    ) -> None:
        self.config = config
        # The related tests are InstanceCheck's: the properties run alone here.
        pgs = config.pgs.model_copy(update={"test_cmd": None})
        self.model_name = tester_model_config(config).name
        self.checker = PGS(
            with_pinned_plugins(pgs, original),
            sandbox=original,
            toolset=config.tools.toolset(),
            tester_model=get_model(tester_model_config(config)),
            counter=get_counter(config.model, pgs.tokenizer),
            trajectory=Trajectory(
                tester_record,
                replay_config={},
                redactor=Redactor.for_config(config),
            ),
            problem_statement=problem_statement,
            function_calling=config.model.function_calling,
            base=base,
            generator_config=config.agent,
            seal=seal,
        )
        self.record = SelectProperties(model=self.model_name)

    @property
    def kept(self) -> list[str]:
        return self.checker.kept

    def write(self) -> SelectProperties:
        """The Tester's turn(s) and the validation on the original code; a failure is the
        record's ``error`` (the selection goes on without properties), never an exception."""
        checker = self.checker
        try:
            checker.write_and_validate_properties()
        except Exception as e:  # the instance is still selected, on the other evidence
            checker.kept, checker.shows_bug = [], set()
            self.record.error = f"{type(e).__name__}: {str(e)[:500]}"
        pgs = checker.record
        self.record = self.record.model_copy(
            update={
                "files": dict(checker.properties or {}),
                "kept": list(checker.kept),
                "shows_bug": sorted(checker.shows_bug),
                "validation": pgs.validation,
                "tester_turns": list(pgs.tester_turns),
                "seed": pgs.seed,
                "check_seed": checker.seed_for(1),
                "cost": checker.traj.record.usage()["tester_cost"],
                "tester_error": pgs.tester_error,
            }
        )
        return self.record

    def check(self, index: int, patch: str, found: Evidence) -> None:
        """Check one candidate's ``patch`` (as applied) by the kept properties, as
        ``--attempts`` does (:func:`agent.run.run_attempts._candidate`); the result into
        ``found``."""
        checker = self.checker
        if not checker.kept:
            return
        checker.checks_run = 0  # every candidate meets the inputs of the same seed
        round_record = RoundRecord(round=index, patch=patch)
        try:
            report = checker.check(patch, round_record, repo_tests=[])
        except Exception as e:  # its property check is missing, nothing more
            found.issue_properties_total = len(checker.shows_bug)
            found.property_error = f"{type(e).__name__}: {str(e)[:300]}"
            return
        verdict, why = checker.verdict_of(report, round_record)
        seen = evidence(index, patch, report, checker.shows_bug, verdict, why)
        found.issue_properties_total = seen.issue_total
        found.issue_properties_passed = seen.issue_passed
        found.properties_broken = list(seen.broken)
        found.property_results = dict(seen.signature)
        found.property_verdict, found.property_reason = verdict, why
