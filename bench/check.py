"""PGS's check of a candidate on real SWE-bench Verified records: the gold patch, with the
record's FAIL_TO_PASS tests standing in for the issue properties, plus the related tests.

    .venv/bin/python bench/check.py --repos-dir DIR [--instances FILE] [--budget S]
                                    [--filter REGEX] [--python-map A=B]

DIR holds the repositories as ``OWNER__NAME`` clones (see ``bench/eval.py``); FILE defaults to
the eight records of ``tests/data/verified-dev.jsonl``. Per record, in a container of its
instance image (built, or reused by tag) with the network off: the record's ``test_patch`` is
committed (so the FAIL_TO_PASS tests exist on the "original" code), the gold patch applied, and
the check run twice: *cold* (related tests found, their baseline on the original code run, the
candidate checked) and *warm* (the baseline cached: what every later candidate costs), both in
the container itself, as pgs checked before issue 30; then *sealed*: warm, but as pgs checks
now (``envs/seal.py``), in a fresh container of a snapshot taken before the gold patch was
applied, the patch applied there, the container closed after. Then the empty patch (the original
code) is checked, where FAIL_TO_PASS must fail. Every check runs the
test files as they are at that commit (:func:`agent.pgs.check.original_tests`, as pgs does).
One line per record: related test files, tests run, the cut (if the budget left files out),
cold and warm seconds, whether every FAIL_TO_PASS test ran and passed, what newly failed, the
test files the gold patch changes (none expected). Last line:
``sealed_over_unsealed_warm_p50=<median sealed / median warm>``, then the last line
``check_warm_p50_s=<median sealed seconds>`` (what a warm check costs pgs now).
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.pgs.baseline import Baseline
from agent.pgs.check import check_candidate, original_tests
from agent.pgs.related import changed_files, related_tests
from agent.pgs.runner import CheckSettings
from agent.record.check import CheckReport
from agent.swebench import TESTBED, Environments, Instance, load_instances, parse_python_map
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.sandbox import Sandbox

RECORDS = Path(__file__).resolve().parents[1] / "tests" / "data" / "verified-dev.jsonl"
PATCH = "/tmp/pgs-bench-check.patch"


@dataclass
class Row:
    """What the checks of one record found."""

    instance_id: str
    related: list[str] = field(default_factory=list)
    issue_tests: list[str] = field(default_factory=list)
    cold: float = 0.0
    warm: float = 0.0
    sealed: float = 0.0
    gold: CheckReport = field(default_factory=CheckReport)
    #: The sealed check's report of the gold patch: the same results as ``gold``'s expected.
    sealed_gold: CheckReport = field(default_factory=CheckReport)
    original: CheckReport | None = None
    tests_changed: list[str] = field(default_factory=list)

    def _issue_results(self, report: CheckReport) -> dict[str, list[str]]:
        """Each FAIL_TO_PASS id's outcomes (a parametrized id may stand for several)."""
        return {
            i: [
                r.category
                for r in report.results
                if r.nodeid == i or r.nodeid.startswith((i + "[", i + "::"))
            ]
            for i in self.issue_tests
        }

    @property
    def issue_pass(self) -> bool:
        """Every FAIL_TO_PASS test ran on the gold patch and passed."""
        found = self._issue_results(self.gold)
        return all(found[i] and all(c == "pass" for c in found[i]) for i in self.issue_tests)

    @property
    def issue_fail_on_original(self) -> bool:
        """Every FAIL_TO_PASS test ran on the original code and failed."""
        if self.original is None:
            return False
        found = self._issue_results(self.original)
        return all(found[i] and any(c != "pass" for c in found[i]) for i in self.issue_tests)

    @property
    def sealed_same(self) -> bool:
        """The sealed check saw what the check in the container saw, test for test."""
        return {r.nodeid: r.category for r in self.gold.results} == {
            r.nodeid: r.category for r in self.sealed_gold.results
        }

    @property
    def newly_failing(self) -> list[str]:
        return [r.nodeid for r in self.gold.failures()]

    def line(self) -> str:
        run = len(self.gold.results)
        files = len(self.related)
        cut = self.gold.cut or "none"
        return (
            f"{self.instance_id}: related {files} files, {run} tests run, cold "
            f"{self.cold:.1f}s, warm {self.warm:.1f}s, sealed {self.sealed:.1f}s (same "
            f"outcomes: {'yes' if self.sealed_same else 'NO'}), FAIL_TO_PASS pass "
            f"{'yes' if self.issue_pass else 'NO'}, fail on original "
            f"{'yes' if self.issue_fail_on_original else 'NO'}, newly failing "
            f"{len(self.newly_failing)} {self.newly_failing[:3]}, tests changed: "
            f"{self.tests_changed or 'none'}, cut: {cut[:300]}"
        )


def issue_node_ids(instance: Instance, sandbox: Sandbox) -> list[str]:
    """FAIL_TO_PASS as pytest node ids: sympy's records name bare functions (``test_x``),
    found here in the test files the record's ``test_patch`` touches."""
    files = [p for p in changed_files(instance.test_patch) if p.endswith(".py")]
    out = []
    for test in instance.fail_to_pass:
        if "::" in test:
            out.append(test)
            continue
        pattern = shlex.quote(rf"^\s*def {re.escape(test.split('[', 1)[0])}\b")
        where = [f for f in files if sandbox.run(f"grep -qE {pattern} {shlex.quote(f)}").ok]
        out.append(f"{where[0]}::{test}" if where else test)
    return out


def _apply(sandbox: Sandbox, patch: str) -> None:
    sandbox.write_file(PATCH, patch)
    done = sandbox.run(f"git apply --whitespace=nowarn {PATCH}")
    if not done.ok:
        raise RuntimeError(f"the patch does not apply: {done.output[-500:]}")


def check_record(
    instance: Instance, envs: Environments, settings: CheckSettings, *, original: bool = True
) -> Row:
    """Cold and warm checks of the gold patch; with ``original``, a check of the empty patch."""
    image = envs.image(instance)
    row = Row(instance.instance_id)
    config = DockerSandboxConfig(image=image.tag, repo_path=TESTBED, network=False)
    with DockerSandbox(config) as box:
        _apply(box, instance.test_patch)
        committed = box.run(
            "git add -A && git -c user.name=pgs -c user.email=pgs@localhost "
            "commit -qm 'test_patch' && git rev-parse HEAD"
        )
        if not committed.ok:
            raise RuntimeError(f"cannot commit the test_patch: {committed.output[-500:]}")
        commit = committed.output.strip().splitlines()[-1]
        row.issue_tests = issue_node_ids(instance, box)
        seal = box.seal(commit)  # the ready sandbox, before the candidate
        _apply(box, instance.patch)
        baselines = Baseline()

        def check(where: Sandbox = box) -> CheckReport:
            baseline = baselines.ensure(where, commit, row.related, settings=settings)
            targets = [*row.issue_tests, *row.related]
            with original_tests(where, commit, targets, tests=row.related) as changed:
                row.tests_changed = [f"{c.path} ({c.change})" for c in changed]
                return check_candidate(
                    where,
                    properties=[],
                    repo_tests=row.related,
                    baseline=baseline,
                    settings=settings,
                    issue_tests=row.issue_tests,
                )

        for attempt in ("cold", "warm"):
            started = time.monotonic()
            row.related = related_tests(box, changed_files(instance.patch))
            row.gold = check()
            setattr(row, attempt, time.monotonic() - started)
        started = time.monotonic()
        with seal.fresh() as fresh:
            _apply(fresh, instance.patch)
            row.related = related_tests(fresh, changed_files(instance.patch))
            row.sealed_gold = check(fresh)
        row.sealed = time.monotonic() - started
        if original:
            box.run("git checkout -q -- . && git clean -qfd -e .pgs")
            row.original = check()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos-dir", type=Path)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    parser.add_argument("--instances", type=Path, default=RECORDS)
    parser.add_argument("--filter", default="", help="regex on instance ids")
    parser.add_argument("--budget", type=float, default=CheckSettings().budget)
    parser.add_argument("--python-map", action="append", default=[], metavar="WANTED=USED")
    args = parser.parse_args()
    if args.repos_dir is None or not args.repos_dir.is_dir():
        if not args.quick:
            parser.error("--repos-dir: a folder of fetched repositories is needed")
        # Quick mode without the fetched repositories: nothing to measure, and it says so.
        print(f"no repositories at --repos-dir {args.repos_dir}: skipped")
        print("check_warm_p50_s=skipped")
        return
    settings = CheckSettings(budget=args.budget)
    envs = Environments(args.repos_dir, parse_python_map(args.python_map))
    warm, sealed = [], []
    for instance in load_instances(args.instances):
        if not re.search(args.filter, instance.instance_id):
            continue
        try:
            row = check_record(instance, envs, settings)
        except Exception as e:  # one record's problem is reported, the others still run
            print(f"{instance.instance_id}: failed: {str(e)[:300]}", flush=True)
            continue
        warm.append(row.warm)
        sealed.append(row.sealed)
        print(row.line(), flush=True)
    if not warm:
        print("check_warm_p50_s=nan")
        return
    ratio = statistics.median(sealed) / statistics.median(warm)
    print(f"unsealed_warm_p50_s={statistics.median(warm):.1f}")
    print(f"sealed_over_unsealed_warm_p50={ratio:.2f}")
    print(f"check_warm_p50_s={statistics.median(sealed):.1f}")


if __name__ == "__main__":
    main()
