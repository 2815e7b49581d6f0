"""PGS's check on real SWE-bench Verified records: the gold patch, FAIL_TO_PASS as the issue
tests, the related tests of large real test suites (sympy, pytest, pylint, seaborn) within the
time budget. Opt-in, because CI cannot fetch the repositories (see
``tests/swebench/test_swebench_real.py`` for how to lay them out):

    PGS_SWEBENCH_REPOS=/work/data/repos .venv/bin/python -m pytest tests/pgs/test_check_real.py

The instance images are built on first use (about 15 minutes for the eight), then reused.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.pgs.baseline import cut_targets
from agent.pgs.runner import CheckSettings
from agent.swebench import Environments, Instance, load_instances
from bench.check import RECORDS, check_record

REPOS = os.environ.get("PGS_SWEBENCH_REPOS")
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not REPOS,
        reason="set PGS_SWEBENCH_REPOS to a folder of OWNER__NAME clones of the eight records' "
        "repositories (see tests/swebench/test_swebench_real.py) to run the real checks",
    ),
]
INSTANCES = load_instances(RECORDS)
#: The record with the most related test files (sympy's numbers module: 285 of them).
MANY_RELATED = "sympy__sympy-24562"


@pytest.fixture(scope="module")
def envs() -> Environments:
    return Environments(Path(REPOS or "."), {})


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: i.instance_id)
def test_the_gold_patch_passes_its_check_and_the_original_fails_the_issue_tests(
    instance: Instance, envs: Environments
) -> None:
    settings = CheckSettings()
    row = check_record(instance, envs, settings)
    assert row.newly_failing == [], row.gold.failures()[0].model_dump()
    assert row.gold.errors == []
    assert row.issue_pass, [r.nodeid for r in row.gold.results if r.kind == "issue"]
    assert row.issue_fail_on_original
    assert row.warm < settings.budget + 60  # the related tests fit the budget


def test_a_small_budget_cuts_explicitly_and_still_runs_the_issue_tests(
    envs: Environments,
) -> None:
    (instance,) = [i for i in INSTANCES if i.instance_id == MANY_RELATED]
    settings = CheckSettings(budget=20)
    row = check_record(instance, envs, settings, original=False)
    assert row.gold.cut and row.gold.cut.startswith("budget 20 s: ")
    left_out = [t for t in row.related if t in row.gold.cut]
    assert left_out and len(left_out) < len(row.related)
    assert not any(r.nodeid.split("::")[0] in left_out for r in row.gold.results)
    assert row.newly_failing == [] and row.issue_pass
    assert row.cold < 2 * settings.budget + 60 and row.warm < settings.budget + 60
    assert cut_targets(row.gold) == {}  # markers stay in the baseline, not the candidate's report
