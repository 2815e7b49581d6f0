"""``pgs inspect`` reads every trajectory, pgs's, SWE-agent's and mini-swe-agent's, through the
one run record (:class:`agent.record.trajectory.RunRecord`): the page's view holds the record it
was built from, and what a foreign file lacked is the record's ``missing``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.inspect.load import InspectError, load
from agent.inspect.model import TrajectoryView
from agent.record.foreign import record_of
from agent.record.trajectory import RunRecord
from tests.models.test_replay_formats import V1

DATA = Path(__file__).parent.parent / "data"


def loaded(path: Path) -> TrajectoryView:
    traj = load(path)
    assert isinstance(traj, TrajectoryView)
    return traj


@pytest.mark.parametrize(
    ("name", "writer"),
    [
        ("pgs-demo-pgs0-2026-12-01.traj", "pgs"),
        ("pgs-demo-bce24f8.traj", "pgs"),
        ("swe-agent-1x-test-repo.traj", "swe-agent"),
    ],
)
def test_pgs_and_swe_agent_files_are_shown_from_their_run_record(name: str, writer: str) -> None:
    path = DATA / name
    traj = loaded(path)
    expected = record_of(json.loads(path.read_text(encoding="utf-8")))

    assert isinstance(traj.record, RunRecord)
    assert traj.writer == traj.record.writer == writer
    assert traj.record.missing == expected.missing
    assert len(traj.steps) == len(traj.record.trajectory) == len(expected.trajectory) > 0
    assert [s.action for s in traj.steps] == [s.action for s in traj.record.trajectory]
    assert traj.exit_status == traj.record.info.exit_status
    if writer == "pgs":
        assert traj.pgs is not None and traj.record.pgs is not None
        assert traj.pgs.verdict == traj.record.pgs.verdict
    else:  # a foreign file: what it lacked is said by the record
        assert traj.record.pgs is None and traj.pgs is None
        assert traj.record.missing == [] or all(
            m.startswith("missing: ") for m in traj.record.missing
        )


def test_a_mini_swe_agent_file_is_shown_from_its_run_record(tmp_path: Path) -> None:
    path = tmp_path / "flask-1.traj.json"
    path.write_text(json.dumps(V1))
    traj = loaded(path)

    assert traj.writer == traj.record.writer == "mini-swe-agent"
    assert traj.record.history == V1["messages"]
    assert "missing: execution_time (mini-swe-agent does not record it)" in traj.record.missing
    assert "missing: replay_config (the run's configuration)" not in traj.record.missing
    assert traj.exit_status == traj.record.info.exit_status == "Submitted"


def test_what_the_record_could_not_read_is_on_the_record_and_the_page(tmp_path: Path) -> None:
    path = tmp_path / "damaged.traj"
    steps = [{"action": "ls", "observation": "x", "thought": "", "execution_time": 1}, 5]
    path.write_text(json.dumps({"trajectory": steps, "history": [], "info": {}}))
    traj = loaded(path)

    assert any(m.startswith("missing: trajectory.1 (unreadable") for m in traj.record.missing)
    assert [s.index for s in traj.steps] == [1, 2] and traj.steps[0].action == "ls"
    assert traj.steps[1].missing == ["missing: the step itself (not a JSON object)"]


def test_json_that_is_no_trajectory_is_refused_by_the_record(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"name": "x"}))
    with pytest.raises(InspectError, match=r"not a trajectory.*found: name"):
        load(path)
