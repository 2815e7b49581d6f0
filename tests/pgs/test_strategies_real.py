"""``bench/strategies.py --verified``: a real SWE-bench Verified record's FAIL_TO_PASS tests,
run on the original code with ``pool_tests``, give a pool of one input per failing test, each
with its three measures, and every strategy of Table 1 chooses from it.

Opt-in, as the other real SWE-bench tests: set ``PGS_SWEBENCH_REPOS`` to a folder of
``OWNER__NAME`` clones (``psf__requests`` is enough here; see
``tests/swebench/test_swebench_real.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.pgs.pool import STRATEGIES, candidates, strategy_name
from agent.pgs.runner import CheckSettings
from agent.pgs.tokens import SimpleCounter
from agent.swebench import Environments, load_instances
from bench.check import RECORDS
from bench.strategies import choices, verified_check

REPOS = os.environ.get("PGS_SWEBENCH_REPOS")
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not REPOS,
        reason="set PGS_SWEBENCH_REPOS to a folder of OWNER__NAME clones (psf__requests) to run "
        "the strategies on a real record",
    ),
]
#: A Verified record with two FAIL_TO_PASS tests, both failing on the original code.
INSTANCE = "psf__requests-6028"


def test_the_failing_issue_tests_of_a_real_record_are_its_pool() -> None:
    (instance,) = [i for i in load_instances(RECORDS) if i.instance_id == INSTANCE]
    envs = Environments(Path(REPOS or "."), {})
    report = verified_check(instance, envs, CheckSettings(pool_tests=True))
    failing = report.failures()
    assert len(failing) == len(instance.fail_to_pass) == 2
    pool = candidates(report)
    assert len(pool) == 2
    for result, pooled in pool:
        assert pooled.source == "test" and pooled.example == result.nodeid
        assert pooled.runtime is not None and pooled.lines and pooled.lines > 0
    picked = choices(report, SimpleCounter())
    assert set(picked) == {strategy_name(f, s) for f, s in STRATEGIES} | {"pgs"}
    assert all(c.input_tokens > 0 and c.message_tokens > 0 for c in picked.values())
