"""``--attempts K``: several Generator attempts, one shared property set, the patch chosen by
the evidence (agent/pgs/attempts.py, agent/pgs/selection.py).

The selection order is tested here on records, with the flags and the Ray executor's path; what
users read back in test_attempts_readback.py; the whole feature through the real CLI, the
scripted model server and Docker on the bundled median example in test_attempts_median.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.pgs.selection import VERDICT_ORDER, choose
from agent.record.attempts import AttemptsRecord, Candidate
from tests.support.attempt_records import REGRESSION_PROP, _candidate
from tests.support.textutil import cli_error

# -- the order, on records ---------------------------------------------------------------------


def test_the_verdict_decides_first_and_the_reason_names_it() -> None:
    overfit = _candidate(1, "failed", issue_fails=True)
    breaks = _candidate(2, "failed", regression_fails=True, repo_fails=True)
    right = _candidate(3, "passed", patch_lines=9)
    chosen, reason, ties = choose([overfit, breaks, right])
    assert chosen is right and ties == []
    assert reason.startswith("attempt 3 (passed): over attempt ")
    assert "over attempt 1 by verdict (verdict passed against verdict failed)" in reason


def test_among_failed_patches_more_issue_properties_passed_wins() -> None:
    overfit = _candidate(1, "failed", issue_fails=True)
    breaks = _candidate(2, "failed", regression_fails=True)
    chosen, reason, _ = choose([overfit, breaks])
    assert chosen is breaks
    assert "by issue properties passed (1 of 1 issue properties passed against 0 of 1" in reason


def test_then_fewer_regressions_broken() -> None:
    one = _candidate(1, "failed", issue_fails=True, regression_fails=True, repo_fails=True)
    two = _candidate(2, "failed", issue_fails=True, regression_fails=True)
    chosen, reason, _ = choose([one, two])
    assert chosen is two
    assert "by regression properties and repository tests broken (1 " in reason
    assert two.broken == [REGRESSION_PROP]


def test_then_agreement_on_the_generated_inputs() -> None:
    """Two candidates fail the issue property on the same input, a third on another: the two
    that agree outrank the odd one out, whatever their size."""
    a = _candidate(1, "failed", issue_fails=True, patch_lines=1, example="f(values=[2, 1])")
    b = _candidate(2, "failed", issue_fails=True, patch_lines=5)
    c = _candidate(3, "failed", issue_fails=True, patch_lines=5)
    chosen, reason, ties = choose([a, b, c])
    assert chosen is b and ties == [3]
    assert (a.agreement, b.agreement, c.agreement) == (2, 3, 3)
    assert "over attempt 1 by agreement with the other candidates" in reason
    assert reason.endswith("tied on the evidence with attempt 3")


def test_then_the_smaller_patch_and_a_tie_goes_to_the_earlier_attempt() -> None:
    big = _candidate(1, "passed", patch_lines=6)
    small = _candidate(2, "passed", patch_lines=2)
    same = _candidate(3, "passed", patch_lines=2)
    chosen, reason, ties = choose([big, small, same])
    assert chosen is small and ties == [3]
    assert "over attempt 1 by patch size (2 patch lines against 6 patch lines)" in reason
    assert "over attempt 3 by attempt number" in reason


def test_the_record_keeps_every_candidate_and_reads_back() -> None:
    right = _candidate(1, "passed")
    chosen, reason, ties = choose([right])
    assert chosen is right
    record = AttemptsRecord(candidates=[right], chosen=1, reason=reason, ties=ties, count=3)
    again = AttemptsRecord.model_validate(json.loads(json.dumps(record.model_dump(mode="json"))))
    assert again.candidates[0].verdict == "passed" and again.chosen == 1
    assert "only candidate" in again.reason
    assert "signature" not in record.model_dump(mode="json")["candidates"][0]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["passed", "tests-only", "failed"]),
            st.booleans(),
            st.booleans(),
            st.integers(1, 4),
        ),
        min_size=1,
        max_size=5,
    ),
    st.randoms(),
)
def test_the_choice_does_not_depend_on_the_order_the_candidates_come_in(
    specs: list[tuple[str, bool, bool, int]], rnd: Any
) -> None:
    def made() -> list[Candidate]:
        return [
            _candidate(k, verdict, issue_fails=i, regression_fails=r, patch_lines=n)  # type: ignore[arg-type]
            for k, (verdict, i, r, n) in enumerate(specs, start=1)
        ]

    first, reason, _ = choose(made())
    shuffled = made()
    rnd.shuffle(shuffled)
    again, reason_again, _ = choose(shuffled)
    assert first is not None and again is not None
    assert first.attempt == again.attempt and reason == reason_again
    best = min(VERDICT_ORDER.index(v) for v, *_ in specs)
    assert VERDICT_ORDER.index(first.verdict) == best


# -- bad flags ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--attempts", "0"], "--attempts 0: give 1 or more"),
        (["--attempt-temperatures", "0,hot"], "'hot' is not a number"),
        (["--attempts-stop-on", "great"], "'great' is no verdict"),
    ],
)
def test_bad_attempts_flags_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    from agent.cli import make_example_repo

    repo = make_example_repo(tmp_path / "stats")
    argv = ["run", "--repo", str(repo), "--issue", "median is wrong", "--model", "m", *flags]
    assert says in cli_error(capsys, *argv)


# -- the Ray executor's path: the attempt folders travel with the instance's files -------------


def test_a_detached_run_s_attempt_folders_land_in_the_output_folder(tmp_path: Path) -> None:
    """What a Ray task returns (``Finished.files``, by path relative to ``<id>/``) is written
    by the driver as the local run wrote it: the attempt folders beside the main files."""
    from agent.run.config import load_config
    from agent.swebench import Environments, Instance
    from agent.swebench.instance_run import Finished
    from agent.swebench.progress import Progress
    from agent.swebench.scheduler import Batch

    iid = "acme__lib-1"
    instance = Instance.from_record({"instance_id": iid, "repo": "acme/lib", "base_commit": "a"})
    batch = Batch(
        [instance],
        load_config(None, {"model": {"name": "m"}}),
        tmp_path,
        Environments(tmp_path, {}),
    )
    files = {
        f"{iid}.traj": json.dumps({"info": {"exit_status": "submitted"}}),
        f"{iid}.patch": "",
        f"attempt-1/{iid}.traj": json.dumps({"info": {"exit_status": "submitted"}}),
        f"attempt-1/{iid}.pred": "{}",
    }
    finished = Finished(
        instance_id=iid,
        exit_status="submitted",
        files=files,
        pred=None,
        cost=0.0,
        api_calls=0,
        seconds=1.0,
        worker="node:1",
    )
    assert batch.land(instance, finished, Progress(1, 1, batch.stats)) == "submitted"
    assert (tmp_path / iid / "attempt-1" / f"{iid}.pred").read_text() == "{}"
    assert (tmp_path / iid / f"{iid}.traj").exists()
