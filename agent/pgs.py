"""PGS at repository level: every submitted patch is challenged by the Tester's properties and
the repository's related tests; the smallest failing case becomes the next round's feedback.

Per submission (:meth:`PGS.review`):

1. back to the original code (the candidate is kept aside);
2. first round: the Tester writes properties; they are validated on the original code
   (unsound ones dropped, with the reason);
3. the related repository tests get a baseline on the original code (cached per test file);
4. the candidate is re-applied and checked: kept properties + related tests, one pytest run;
5. all pass → accepted; else ONE failure is selected (``--feedback`` mode) and rendered,
   until ``rounds`` feedback messages have been sent.

The sandbox is left with the candidate applied, so the Generator goes on from its own state.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.check import (
    Baseline,
    CheckSettings,
    changed_files,
    check_candidate,
    install_plugin,
    related_tests,
    run_pytest,
    validate_properties,
)
from agent.feedback import TokenCounter, render_feedback, select_failure
from agent.models import Model, ModelError
from agent.report import CheckReport
from agent.tester import SubTrajectory, TesterConfig, restore_original, run_tester
from agent.tools import Toolset
from agent.trajectory import Trajectory
from envs.sandbox import Sandbox

logger = logging.getLogger(__name__)

FeedbackMode = Literal["none", "io", "property", "property-min"]
CANDIDATE = "/tmp/pgs-candidate.patch"


class PGSConfig(BaseModel):
    """The Tester and the feedback loop."""

    model_config = ConfigDict(extra="forbid")
    feedback: FeedbackMode = Field(
        default="property-min",
        description="none: the Generator alone; io: raw output of the first failing test "
        "(Self-Edit); property: property feedback, any failing example; property-min: the "
        "failing input with the fewest tokens (full PGS)",
    )
    rounds: int = Field(default=5, ge=0, description="most feedback rounds")
    tester_model: str | None = Field(
        default=None, description="the Tester's model (default: the Generator's)"
    )
    tester_base_url: str | None = Field(
        default=None, description="the Tester model's base URL (default: the Generator's)"
    )
    tokenizer: Literal["auto", "tiktoken", "vllm", "simple"] = Field(
        default="auto", description="how input tokens are counted to pick the smallest failure"
    )
    keep_properties: bool = Field(
        default=False, description="also write the kept properties as <id>.properties.patch"
    )
    test_cmd: str | None = Field(
        default=None, description="the repository's test command (default: related test files)"
    )
    tester: TesterConfig = Field(default_factory=TesterConfig)
    check: CheckSettings = Field(default_factory=CheckSettings)


class PGS:
    """The :class:`~agent.loop.Reviewer` that runs PGS rounds."""

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
    ) -> None:
        self.config = config
        self.sandbox = sandbox
        self.toolset = toolset
        self.tester_model = tester_model
        self.counter = counter
        self.traj = trajectory
        self.problem = problem_statement
        self.function_calling = function_calling
        self.status = status
        self.check_settings = config.check.model_copy(update={"test_cmd": config.test_cmd})
        self.properties: dict[str, str] | None = None
        self.kept: list[str] = []
        self.baselines = Baseline()
        self.feedback_sent = 0
        self.record: dict[str, Any] = {
            "mode": config.feedback,
            "rounds": [],
            "properties": {},
            "validation": None,
            "verdict": "unchecked",
        }
        self.traj.extra["pgs"] = self.record

    # -- the Reviewer protocol ----------------------------------------------------------------

    def review(self, patch: str) -> str | None:
        number = len(self.record["rounds"]) + 1
        round_record: dict[str, Any] = {"round": number, "patch": patch}
        self.record["rounds"].append(round_record)
        self.status(f"checking candidate {number}")
        report = self.check(patch)
        round_record["report"] = report.model_dump()
        failures = report.failures()
        round_record["failures"] = len(failures)
        if not failures:
            self.record["verdict"] = "passed" if report.results else "unchecked"
            self.traj.save()
            return None
        self.record["verdict"] = "failed"
        if self.feedback_sent >= self.config.rounds:
            round_record["note"] = f"no feedback: all {self.config.rounds} rounds used"
            self.traj.save()
            return None
        mode = self.config.feedback
        assert mode != "none"
        selection = select_failure(report, mode, self.counter)
        if selection is None:
            self.traj.save()
            return None
        self.feedback_sent += 1
        message = render_feedback(selection, mode, self.feedback_sent, self.config.rounds)
        round_record["selection"] = selection.model_dump()
        round_record["feedback"] = message
        self.traj.save()
        return message

    # -- the steps ----------------------------------------------------------------------------

    def check(self, patch: str) -> CheckReport:
        box = self.sandbox
        box.write_file(CANDIDATE, patch)
        restore_original(box, keep=self.config.tester.properties_dir)
        install_plugin(box)
        if self.properties is None:
            self.status("the Tester is writing properties")
            self.write_and_validate_properties()
        repo_tests = [] if self.config.test_cmd else related_tests(box, changed_files(patch))
        baseline = self.baseline(repo_tests)
        if patch.strip():
            applied = box.run(f"git apply --whitespace=nowarn {shlex.quote(CANDIDATE)}")
            if not applied.ok:
                raise RuntimeError(f"could not re-apply the candidate patch: {applied.output}")
        return check_candidate(
            box,
            properties=self.kept,
            repo_tests=repo_tests,
            baseline=baseline,
            settings=self.check_settings,
        )

    def write_and_validate_properties(self) -> None:
        sub = SubTrajectory(self.traj, "pgs", "tester")
        tester_cfg = self.config.tester
        try:
            self.properties = run_tester(
                tester_cfg,
                self.tester_model,
                self.sandbox,
                self.toolset,
                sub,
                self.problem,
                function_calling=self.function_calling,
            )
        except ModelError as e:
            logger.warning("the Tester failed (%s); checking with the repository's tests only", e)
            self.record["tester_error"] = str(e)
            self.properties = {}
        self.record["properties"] = self.properties
        if not self.properties:
            self.record["validation"] = {"kept": [], "dropped": [], "note": "no properties"}
            return
        original = run_pytest(
            self.sandbox,
            [tester_cfg.properties_dir],
            settings=self.check_settings,
            timeout=self.check_settings.run_timeout,
        )
        kept, dropped = validate_properties(original, self.problem)
        self.kept = kept
        self.record["validation"] = {
            "kept": kept,
            "dropped": [d.model_dump() for d in dropped],
            "report": original.model_dump(),
        }
        if not kept:
            self.record["validation"]["note"] = (
                "no property survived validation; checking with the repository's tests only"
            )
        self.traj.save()

    def baseline(self, repo_tests: list[str]) -> CheckReport | None:
        """The related tests on the original code; each test file runs once per run."""
        if not repo_tests:
            return None
        return self.baselines.ensure(self.sandbox, "HEAD", repo_tests, settings=self.check_settings)

    def properties_patch(self) -> str:
        """The kept property files as a patch adding them under tests/pgs_properties/."""
        if not self.properties:
            return ""
        kept_files = {nodeid.split("::", 1)[0] for nodeid in self.kept}
        src = self.config.tester.properties_dir
        paths = " ".join(shlex.quote(p) for p in sorted(kept_files))
        if not paths:
            return ""
        result = self.sandbox.run(
            'idx=$(mktemp) && rm -f "$idx" && export GIT_INDEX_FILE="$idx" && '
            f"git read-tree HEAD && git add -f -- {paths} && "
            f'git diff --cached HEAD -- {paths}; rm -f "$idx"'
        )
        return result.output.replace(f"{src}/", "tests/pgs_properties/")
