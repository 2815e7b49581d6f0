"""Fresh inputs every check: a seed per check (``PGS_SEED``), the same seed the same inputs,
and every failing input a property's search saw in the counterexample pool, the fewest tokens
fed back. Real pytest and Hypothesis: on the host's Python through a local sandbox, and on the
repositories' Python 3.9 in a Docker sandbox."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.trajectory_file import Trajectory
from agent.pgs.config import PGSConfig
from agent.pgs.feedback import failure_input, select_failure
from agent.pgs.reviewer import PGS
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.tokens import SimpleCounter
from agent.record.check import CheckReport
from envs.local import LocalSandbox, LocalSandboxConfig

SETTINGS = CheckSettings(python=sys.executable, test_timeout=10)
PATH = ".pgs/properties/test_inputs.py"

#: Each property logs every input it runs to CALLS, one JSON line per call.
PROPERTIES = """\
import json
import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st


def log(name, value):
    if os.environ.get("CALLS"):
        with open(os.environ["CALLS"], "a") as f:
            f.write(json.dumps([name, value]) + "\\n")


@pytest.mark.pgs_regression("any list of integers passes")
@given(st.lists(st.integers(), max_size=5))
def test_passes(xs):
    log("passes", xs)


@pytest.mark.pgs_issue("no element is 1000 or more")
@given(st.lists(st.integers(0, 10_000), min_size=1))
def test_small(xs):
    log("small", xs)
    assert max(xs) < 1000, f"returned {max(xs)!r}, expected < 1000"


@pytest.mark.pgs_issue("returns at once")
@given(st.integers(0, 100))
def test_hangs(n):
    if n > 10:
        time.sleep(60)
"""


def _calls(path: Path) -> list[tuple[str, Any]]:
    if not path.exists():
        return []
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]


def _run(
    sandbox: Any, calls: Path, *names: str, settings: CheckSettings = SETTINGS
) -> tuple[CheckReport, list[tuple[str, Any]]]:
    if calls.exists():
        calls.unlink()
    sandbox.write_file(PATH, PROPERTIES)
    targets = [f"{PATH}::{name}" for name in names]
    report = run_pytest(sandbox, targets, settings=settings, timeout=120)
    return report, _calls(calls)


@pytest.fixture
def local(small_repo: Path, tmp_path: Path) -> Iterator[Any]:
    # The local sandbox passes only an allow-list of the host's environment: CALLS is given
    # as the sandbox's own variable.
    config = LocalSandboxConfig(env={"CALLS": str(tmp_path / "calls.jsonl")})
    with LocalSandbox(small_repo, config) as sandbox:
        yield sandbox


def test_two_seeds_draw_different_inputs_and_one_seed_the_same(local: Any, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    seeded = [SETTINGS.model_copy(update={"seed": seed}) for seed in (11, 12, 11)]
    first, second, again = (_run(local, calls, "test_passes", settings=s)[1] for s in seeded)
    assert len(first) == SETTINGS.max_examples == 64  # the paper's 64 inputs per property
    assert first != second  # a new seed, new inputs
    assert first == again  # the recorded seed replays them
    # Without a seed the check is derandomised: the same inputs each time, whatever the seed was.
    plain = [_run(local, calls, "test_passes")[1] for _ in range(2)]
    assert plain[0] == plain[1] and plain[0] not in (first, second)


def test_replaying_the_recorded_seed_gives_the_same_failing_inputs(
    local: Any, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    settings = SETTINGS.model_copy(update={"seed": 2024})
    reports = [_run(local, calls, "test_small", settings=settings)[0] for _ in range(2)]
    first, second = (r.results[0] for r in reports)
    assert first.category == "property_violation"
    assert first.example == second.example == "test_small(xs=[1000])"
    assert [e.example for e in first.examples] == [e.example for e in second.examples]


def test_every_failing_input_of_a_property_is_in_the_pool_and_the_fewest_tokens_win(
    local: Any, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    settings = SETTINGS.model_copy(update={"seed": 7, "keep_inputs": 16})
    report, logged = _run(local, calls, "test_small", settings=settings)
    (result,) = report.results
    pool = result.examples
    # Hypothesis reports the one input it shrank to; the plugin kept the others it failed on.
    assert pool[0].example == result.example == "test_small(xs=[1000])"
    assert 3 <= len(pool) <= 1 + 16
    failing = {json.dumps(xs) for name, xs in logged if name == "small" and max(xs) >= 1000}
    for other in pool[1:]:
        assert other.category == "property_violation" and not other.explicit
        assert other.returned and other.returned.startswith("returned ")
        assert other.trace and "test_inputs.py" in other.trace
        assert json.dumps(eval(failure_input(result, other).removeprefix("xs="))) in failing
    assert len({e.example for e in pool}) == len(pool)  # distinct
    # The selection counts every input of the pool (these, and the pool pass's: every
    # failing input of the run, tests/pgs/test_pool.py) and takes the fewest tokens.
    chosen = select_failure(report, "property-min", SimpleCounter())
    assert chosen is not None and chosen.candidates == len(result.failing_inputs()) > len(pool)
    assert chosen.input == "xs=[1000]"
    # Under a counter that prefers long inputs, another member of the pool is fed back: the
    # choice is over the whole pool, not Hypothesis's one report.
    longest = select_failure(report, "property-min", LongIsCheap())
    assert longest is not None and longest.input != "xs=[1000]"
    every = result.failing_inputs()
    assert len(longest.input) == max(len(failure_input(result, e)) for e in every)


class LongIsCheap:
    name = "long-is-cheap"

    def count(self, text: str) -> int:
        return 10_000 - len(text)


def test_keep_inputs_0_keeps_only_the_reported_input(local: Any, tmp_path: Path) -> None:
    settings = SETTINGS.model_copy(update={"seed": 7, "keep_inputs": 0})
    report, _ = _run(local, tmp_path / "calls.jsonl", "test_small", settings=settings)
    assert [e.example for e in report.results[0].examples] == ["test_small(xs=[1000])"]


def test_a_hang_still_names_the_input_it_was_running(local: Any, tmp_path: Path) -> None:
    settings = SETTINGS.model_copy(update={"seed": 3, "test_timeout": 2})
    report, _ = _run(local, tmp_path / "calls.jsonl", "test_hangs", settings=settings)
    (result,) = report.results
    assert result.category == "timeout"
    assert result.example and result.example.startswith("test_hangs(n=")


# --------------------------------------------------------------------------- seeds of a run


def test_each_check_of_a_run_has_its_own_seed_derived_from_the_runs_seed(tmp_path: Path) -> None:
    def pgs(config: PGSConfig) -> PGS:
        return PGS(
            config,
            sandbox=None,  # type: ignore[arg-type]  # no step runs: only the seeds are read
            toolset=None,  # type: ignore[arg-type]
            tester_model=None,  # type: ignore[arg-type]
            counter=SimpleCounter(),
            trajectory=Trajectory(tmp_path / "t.traj", replay_config={}),
            problem_statement="",
        )

    seeds = [pgs(PGSConfig(seed=5)).seed_for(n) for n in (1, 2, 3)]
    assert len(set(seeds)) == 3
    assert [pgs(PGSConfig(seed=5)).seed_for(n) for n in (1, 2, 3)] == seeds  # a replay
    assert pgs(PGSConfig(seed=6)).seed_for(1) != seeds[0]
    drawn = pgs(PGSConfig())
    assert drawn.record.seed is not None  # drawn at random and recorded, to replay
    assert drawn.traj.extra["pgs"]["seed"] == drawn.record.seed
    assert pgs(PGSConfig(fresh_inputs=False)).seed_for(1) is None  # derandomised


@pytest.mark.docker
def test_seeds_and_the_pool_work_on_python_3_9_too(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
    from envs.images import build_repo_image
    from tests.support.example_repos import DEDUPE

    path = DEDUPE.make(tmp_path_factory.mktemp("dedupe") / "dedupe")
    with DockerSandbox(DockerSandboxConfig(image=build_repo_image(path).tag)) as box:
        assert "Python 3.9" in box.run("python3 -V").output
        box.write_file(PATH, PROPERTIES)
        target = [f"{PATH}::test_small"]

        def check(seed: int) -> CheckReport:
            settings = SETTINGS.model_copy(update={"python": "python3", "seed": seed})
            return run_pytest(box, target, settings=settings, timeout=120)

        first, second, again = check(1), check(2), check(1)
    pools = [[e.example for e in r.results[0].examples] for r in (first, second, again)]
    assert pools[0][0] == "test_small(xs=[1000])" and len(pools[0]) >= 2
    assert pools[0] == pools[2] and pools[0] != pools[1]
