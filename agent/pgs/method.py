"""PGS at repository level: every submitted patch is challenged by the Tester's properties and
the repository's related tests; the smallest failing case becomes the next round's feedback.

Per submission (:meth:`PGS.review`):

1. back to the original code (the candidate is kept aside);
2. first round: the Tester writes properties; they are validated on the original code
   (unsound ones dropped, with the reason). When no issue property survives, the Tester gets
   one more turn with the validation report's lines (``tester_retries``);
3. the related repository tests get a baseline on the original code (cached per test file);
4. the candidate is re-applied and checked: kept properties + related tests, one pytest run;
5. all pass → before accepting, while feedback rounds remain, the Tester looks for new rules
   once more (``fresh_probes``; it never sees the patch) and the candidate meets those too;
6. a failure → ONE failure is selected (``--feedback`` mode) and rendered, until ``rounds``
   feedback messages have been sent.

The verdict (:func:`judge`) is honest: ``passed`` only when a kept issue property that failed
on the original code passes on the patch and nothing newly fails; ``tests-only`` when no issue
property took part but the related tests (or regression properties) ran and pass; ``unchecked``
when nothing ran; ``failed`` otherwise. A diff left when a limit ends the run is checked too
(:meth:`PGS.final_check`), so no patch leaves unchecked.

The sandbox is left with the candidate applied, so the Generator goes on from its own state.
"""

from __future__ import annotations

import ast
import logging
import shlex
from collections.abc import Callable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.core.tools import Toolset
from agent.core.trajectory import Trajectory
from agent.models import Model, ModelError
from agent.pgs.check import (
    Baseline,
    CheckSettings,
    changed_files,
    check_candidate,
    install_plugin,
    related_tests,
    run_pytest,
    validate_properties,
)
from agent.pgs.feedback import (
    IO_TEMPLATE,
    PROPERTY_TEMPLATE,
    TokenCounter,
    render_feedback,
    select_failure,
)
from agent.pgs.report import CheckReport, TestResult
from agent.pgs.tester import SubTrajectory, TesterConfig, restore_original, run_tester
from envs.sandbox import Sandbox

logger = logging.getLogger(__name__)

FeedbackMode = Literal["none", "io", "property", "property-min"]
Verdict = Literal["passed", "tests-only", "unchecked", "failed"]
CANDIDATE = "/tmp/pgs-candidate.patch"


class PGSConfig(BaseModel):
    """The Tester and the feedback loop."""

    model_config = ConfigDict(extra="forbid")
    feedback: FeedbackMode = Field(
        default="property-min",
        description="none: the Generator alone; io: Self-Edit, the raw output of the first "
        "failing repository test, no Tester; property: property feedback, any failing example; "
        "property-min: the failing input with the fewest tokens (full PGS)",
    )
    rounds: int = Field(default=5, ge=0, description="most feedback rounds")
    filter: bool = Field(
        default=True,
        description="validate properties on the original code and drop unsound ones (off: "
        "keep every property that runs, the ablation without filtering)",
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
    round_steps: int = Field(
        default=30, ge=0, description="steps the Generator gets after each feedback message"
    )
    round_time: float = Field(
        default=900.0, ge=0, description="seconds the Generator gets after each feedback message"
    )
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
    property_template: str = Field(
        default=PROPERTY_TEMPLATE, description="the feedback message of the property modes"
    )
    io_template: str = Field(default=IO_TEMPLATE, description="the feedback message of io mode")
    tester: TesterConfig = Field(default_factory=TesterConfig)
    check: CheckSettings = Field(default_factory=CheckSettings)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def judge(report: CheckReport, shows_bug: set[str]) -> tuple[Verdict, str]:
    """The verdict on one check of a candidate, and why, in one sentence.

    ``shows_bug``: node ids of the kept issue properties that failed on the original code.
    """
    failures = report.failures()
    cut = f" ({report.cut})" if report.cut else ""
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
        return "passed", f"{fixed} that failed on the original code pass on the patch; {holds}{cut}"
    if regression or repo:
        return "tests-only", f"no issue property took part; {holds}{cut}"
    return "unchecked", f"nothing ran: no property and no related repository test{cut}"


def property_decorators(files: dict[str, str]) -> Iterator[tuple[str, str, ast.expr]]:
    """``(test function name, decorator name, decorator)`` for every decorator of every
    function of the property files (``@example(...)`` gives ``example``; ``@pytest.mark.
    pgs_issue(...)`` gives ``pgs_issue``). Files that do not parse are skipped."""
    for source in files.values():
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    name = getattr(target, "attr", None) or getattr(target, "id", None)
                    if name:
                        yield node.name, str(name), deco


def explicit_examples(files: dict[str, str]) -> dict[str, set[str]]:
    """``{test function name: {arguments of each @example}}`` of property files (by ``ast``)."""
    found: dict[str, set[str]] = {}
    for function, name, deco in property_decorators(files):
        if name == "example" and isinstance(deco, ast.Call):
            args = [ast.unparse(a) for a in deco.args]
            args += sorted(f"{k.arg}={ast.unparse(k.value)}" for k in deco.keywords)
            found.setdefault(function, set()).add(", ".join(args))
    return found


def _function(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1].split("[", 1)[0]


def drop_contradictions(
    kept: list[str], original: CheckReport, files: dict[str, str]
) -> tuple[list[str], list[dict[str, str]]]:
    """Drop regression properties that assert on an input an issue property states as a case
    of the bug (the same ``@example``): they pin the behaviour the issue asks to change, so
    they would punish the right fix. Returns what stays kept and the dropped, with reasons."""
    examples = explicit_examples(files)
    by_id = original.by_id()
    issue_cases: dict[str, str] = {}
    for nodeid in kept:
        if by_id[nodeid].kind == "issue":
            for case in sorted(examples.get(_function(nodeid), ())):
                issue_cases.setdefault(case, nodeid)
    out: list[str] = []
    dropped: list[dict[str, str]] = []
    for nodeid in kept:
        cases = (
            examples.get(_function(nodeid), set()) if by_id[nodeid].kind == "regression" else set()
        )
        shared = sorted(c for c in cases if c in issue_cases)
        if shared:
            reason = (
                f"contradicts the issue: its example ({shared[0]}) is a case of the bug in "
                f"{issue_cases[shared[0]]}, where it asserts the original behaviour"
            )
            dropped.append({"nodeid": nodeid, "reason": reason})
        else:
            out.append(nodeid)
    return out, dropped


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
        #: Kept issue properties that failed on the original code (all of them, when filtering).
        self.shows_bug: set[str] = set()
        self.baselines = Baseline()
        self.feedback_sent = 0
        self.probes = 0
        self.round_steps = config.round_steps
        self.round_time = config.round_time
        self.record: dict[str, Any] = {
            "mode": config.feedback,
            "rounds": [],
            "properties": {},
            "validation": None,
            "tester_turns": [],
            "verdict": "unchecked",
            "verdict_reason": "no candidate was checked",
        }
        self.traj.extra["pgs"] = self.record

    # -- the Reviewer protocol ----------------------------------------------------------------

    def review(self, patch: str) -> str | None:
        round_record = self._new_round(patch)
        self.status(f"checking candidate {round_record['round']}")
        report = self.check(patch)
        while not report.failures() and not report.errors and self._may_probe():
            self.status("every check passes; the Tester looks for new rules")
            if not self.probe(round_record):
                break
            report = self.check(patch)
        self._record_report(round_record, report)
        if not report.failures() and not report.errors:
            self.traj.save()
            return None
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
        message = render_feedback(
            selection,
            mode,
            self.feedback_sent,
            self.config.rounds,
            template=self.config.io_template if mode == "io" else self.config.property_template,
            rerun=self.rerun_command(selection.result),
        )
        round_record["selection"] = selection.model_dump()
        round_record["feedback"] = message
        self.traj.save()
        return message

    def final_check(self, patch: str, why: str) -> None:
        """Check a diff the run ends with unsubmitted (a limit): record its verdict, no feedback."""
        round_record = self._new_round(patch)
        round_record["note"] = f"the run ended ({why}); its diff is checked, no feedback sent"
        if not patch.strip():
            self._set_verdict(round_record, "unchecked", "the run ended with no change")
            self.traj.save()
            return
        self.status("checking the diff the run ended with")
        try:
            report = self.check(patch)
        except Exception as e:  # the run's result must survive a failed last check
            logger.warning("could not check the final diff: %s", e)
            self._set_verdict(round_record, "unchecked", f"the check could not run: {e}")
            self.traj.save()
            return
        self._record_report(round_record, report)
        self.traj.save()

    # -- rounds and verdicts --------------------------------------------------------------------

    def _new_round(self, patch: str) -> dict[str, Any]:
        number = len(self.record["rounds"]) + 1
        round_record: dict[str, Any] = {"round": number, "patch": patch}
        self.record["rounds"].append(round_record)
        return round_record

    def _record_report(self, round_record: dict[str, Any], report: CheckReport) -> None:
        round_record["report"] = report.model_dump()
        round_record["failures"] = len(report.failures())
        verdict, why = judge(report, self.shows_bug)
        self._set_verdict(round_record, verdict, why)

    def _set_verdict(self, round_record: dict[str, Any], verdict: Verdict, why: str) -> None:
        round_record["verdict"] = verdict
        self.record["verdict"] = verdict
        self.record["verdict_reason"] = why

    def rerun_command(self, result: TestResult) -> str | None:
        """The command that reruns one failing test alone, the way the check ran it."""
        if "::" not in result.nodeid or result.nodeid.startswith("test_cmd:"):
            return None
        folder = install_plugin(self.sandbox)
        return (
            f"PYTHONPATH={shlex.quote(folder)} {shlex.quote(self.check_settings.python)} -m "
            f"pytest -p pgs_pytest_plugin -q -p no:cacheprovider {shlex.quote(result.nodeid)}"
        )

    # -- the steps ----------------------------------------------------------------------------

    def check(self, patch: str) -> CheckReport:
        box = self.sandbox
        box.write_file(CANDIDATE, patch)
        restore_original(box, keep=self.config.tester.properties_dir)
        install_plugin(box)
        if self.properties is None:
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
        """The Tester's first set (none in io mode: Self-Edit has no Tester), validated; while
        no issue property survives, another turn with the validation report's lines."""
        if self.config.feedback == "io":
            self.properties = {}
            self.record["validation"] = {"kept": [], "dropped": [], "note": "io: no Tester"}
            return
        self.status("the Tester is writing properties")
        self.tester_turn("first")
        for _ in range(self.config.tester_retries):
            if self.shows_bug or not self._tester_worked():
                break
            self.status("no issue property survived; the Tester tries again")
            self.tester_turn("retry", note=self._retry_note())

    def probe(self, round_record: dict[str, Any]) -> bool:
        """Fresh probes: the Tester once more, for rules not written yet; True if it added any
        kept property. The candidate is aside (original code) while it works."""
        self.probes += 1
        before = set(self.kept)
        restore_original(self.sandbox, keep=self.config.tester.properties_dir)
        install_plugin(self.sandbox)
        self.tester_turn("probe", note=self._probe_note())
        added = [n for n in self.kept if n not in before]
        round_record.setdefault("probes", []).append({"new_kept": added})
        return bool(added)

    def _may_probe(self) -> bool:
        return (
            self.config.feedback in ("property", "property-min")
            and self.probes < self.config.fresh_probes
            and self.feedback_sent < self.config.rounds
            and self._tester_worked()
        )

    def _tester_worked(self) -> bool:
        return "tester_error" not in self.record

    def tester_turn(self, why: str, note: str = "") -> None:
        """One Tester conversation (its own sub-trajectory), then validation of the folder."""
        turns: list[dict[str, Any]] = self.record["tester_turns"]
        key = "tester" if not turns else f"tester_{len(turns) + 1}"
        sub = SubTrajectory(self.traj, "pgs", key)
        try:
            self.properties = run_tester(
                self.config.tester,
                self.tester_model,
                self.sandbox,
                self.toolset,
                sub,
                self.problem,
                function_calling=self.function_calling,
                note=note,
            )
        except ModelError as e:
            logger.warning("the Tester failed (%s); checking with what there is", e)
            self.record["tester_error"] = str(e)
            self.properties = self.properties or {}
        self.validate()
        validation = self.record["validation"] or {}
        turns.append(
            {
                "key": key,
                "why": why,
                "properties": sorted(self.properties or {}),
                "kept": list(validation.get("kept") or []),
                "dropped": list(validation.get("dropped") or []),
            }
        )
        self.traj.save()

    def validate(self) -> None:
        """Run the property files on the original code and keep the sound ones."""
        self.record["properties"] = self.properties
        if not self.properties:
            self.kept, self.shows_bug = [], set()
            self.record["validation"] = {"kept": [], "dropped": [], "note": "no properties"}
            return
        original = run_pytest(
            self.sandbox,
            [self.config.tester.properties_dir],
            settings=self.check_settings,
            timeout=self.check_settings.run_timeout,
        )
        if self.config.filter:
            kept, dropped = validate_properties(original, self.problem)
            dropped_records = [d.model_dump() for d in dropped]
        else:  # the ablation: every property that ran is kept
            kept = [r.nodeid for r in original.results if r.kind != "repo" and "::" in r.nodeid]
            dropped_records = []
        kept, contradicting = drop_contradictions(kept, original, self.properties or {})
        dropped_records += contradicting
        by_id = original.by_id()
        self.kept = kept
        self.shows_bug = {
            n for n in kept if by_id[n].kind == "issue" and by_id[n].category != "pass"
        }
        validation: dict[str, Any] = {
            "kept": kept,
            "dropped": dropped_records,
            "report": original.model_dump(),
            "filter": self.config.filter,
        }
        if not self.shows_bug:
            validation["note"] = (
                "no issue property survived validation; the verdict can be tests-only at best"
            )
        self.record["validation"] = validation

    def _retry_note(self) -> str:
        validation = self.record["validation"] or {}
        lines = [f"- {d['nodeid']}: {d['reason']}" for d in validation.get("dropped") or []]
        if not lines:
            lines = [f"- {validation.get('note') or 'no property file was written'}"]
        return (
            "Your properties were run on the current (unfixed) code and NO issue property "
            "survived. The validation report:\n"
            + "\n".join(lines)
            + "\nFix or rewrite the files in the properties folder: every issue property must "
            "FAIL on the current code by its assertion (it shows the bug), every regression "
            "property must PASS, each marked with pgs_issue or pgs_regression. Then submit."
        )

    def _probe_note(self) -> str:
        rules = sorted(
            {
                str(r.get("rule"))
                for r in ((self.record["validation"] or {}).get("report") or {}).get("results", [])
                if r.get("nodeid") in self.kept and r.get("rule")
            }
        )
        listed = "\n".join(f"- {rule}" for rule in rules) or "- (none)"
        return (
            "The properties already in the folder state these rules:\n"
            + listed
            + "\nWrite NEW property files (new file names) for other rules the fixed code must "
            "satisfy that these do not cover: other inputs, edge cases, other functions the "
            "issue touches. Do not change the existing files. Then submit."
        )

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
