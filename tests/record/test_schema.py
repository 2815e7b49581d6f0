"""The run record is one schema: pgs writes it, every reader reads it, and other agents' files
(SWE-agent, mini-swe-agent) load into it with a list of what they lacked. Old pgs files load and
rewrite byte for byte; a new file says its version first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.core.trajectory_file import Trajectory
from agent.record.foreign import convert
from agent.record.pgs import PGSRecord
from agent.record.steps import Info, Step
from agent.record.trajectory import TRAJECTORY_FORMAT, UNVERSIONED, RunRecord
from tests.models.test_replay_formats import V1, V2_TOOLCALLS

DATA = Path(__file__).parents[1] / "data"
PGS_0 = DATA / "pgs-demo-bce24f8.traj"
#: Written by `pgs demo` on 2026-12-01, before the version was recorded (the last pgs-0 layout).
PGS_0_LAST = DATA / "pgs-demo-pgs0-2026-12-01.traj"
SWE_AGENT_1X = DATA / "swe-agent-1x-test-repo.traj"
SCHEMA = Path(__file__).parents[2] / "docs" / "trajectory-format.schema.json"


def test_an_old_pgs_file_loads_as_version_0_and_rewrites_byte_for_byte() -> None:
    text = PGS_0.read_text(encoding="utf-8")
    record = RunRecord.read(PGS_0)
    assert record.version == UNVERSIONED and record.trajectory_format is None
    assert record.writer == "pgs" and record.pgs is not None and record.pgs.verdict == "passed"
    assert len(record.trajectory) == 7 and record.trajectory[0].exit_code == 0
    assert record.info.exit_status == "submitted" and record.info.model_stats is not None
    assert record.dumps() == text


@pytest.mark.parametrize("path", [PGS_0, PGS_0_LAST], ids=["bce24f8", "2026-12-01"])
def test_every_old_pgs_file_rewrites_byte_for_byte(path: Path) -> None:
    record = RunRecord.read(path)
    assert record.version == UNVERSIONED and record.pgs is not None
    assert record.pgs.rounds and record.pgs.conversations()
    assert record.dumps() == path.read_text(encoding="utf-8")
    assert convert(json.loads(record.dumps())).missing == []


def test_a_changed_old_file_keeps_its_layout_and_adds_only_what_was_set() -> None:
    record = RunRecord.read(PGS_0)
    record.info.exit_status = "interrupted"
    record.info.error = "Ctrl-C"
    data = json.loads(record.dumps())
    original = json.loads(PGS_0.read_text(encoding="utf-8"))
    assert list(data) == list(original)  # no trajectory_format added to an old file
    assert list(data["info"]) == [*original["info"], "error"]
    assert data["info"]["exit_status"] == "interrupted"


def test_a_new_file_says_its_version_first_and_reads_back_the_same(tmp_path: Path) -> None:
    traj = Trajectory(tmp_path / "x.traj", replay_config={"model": {"name": "replay"}})
    traj.steps.append(Step(action="ls", observation="a\n", exit_code=0))
    traj.info.exit_status, traj.info.submission = "submitted", ""
    traj.save()
    text = traj.path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert next(iter(data)) == "trajectory_format"
    assert data["trajectory_format"] == TRAJECTORY_FORMAT == "pgs-1"
    again = RunRecord.read(traj.path)
    assert again.version == "pgs-1" and again.trajectory[0].action == "ls"
    assert again.dumps() == text


def test_unknown_keys_are_kept_and_missing_ones_defaulted() -> None:
    data: dict[str, Any] = {
        "trajectory": [{"action": "ls", "from_the_future": [1]}],
        "info": {"exit_status": "submitted", "new_field": {"x": 1}},
        "replay_config": {},
        "later_key": True,
    }
    record = RunRecord.load(data)
    assert record.history == [] and record.info.submission is None
    assert record.trajectory[0].observation == "" and record.pgs_record.mode == "none"
    assert json.loads(record.dumps()) == data


@pytest.mark.parametrize("number", [3600, 3600.0, 0, 0.25])
def test_numbers_are_written_back_as_the_file_has_them(number: float) -> None:
    data = {"info": {"duration": number, "limits": {"seconds": number}}}
    assert RunRecord.load(data).dumps() == json.dumps(data, indent=1)


def test_swe_agent_mini_swe_agent_and_pgs_trajectories_load_through_the_one_schema() -> None:
    swe = convert(json.loads(SWE_AGENT_1X.read_text(encoding="utf-8")))
    mini_1 = convert(V1)
    mini_2 = convert(V2_TOOLCALLS)
    pgs = convert(json.loads(PGS_0.read_text(encoding="utf-8")))
    for record in (swe, mini_1, mini_2, pgs):
        assert isinstance(record, RunRecord)
        assert isinstance(record.info, Info) and all(isinstance(s, Step) for s in record.trajectory)

    assert swe.writer == "swe-agent" and swe.info.exit_status == "submitted"
    assert swe.trajectory[0].action == "find_file missing_colon.py"
    assert "missing: replay_config (the run's configuration)" in swe.missing
    assert "missing: info.model_stats (tokens and cost)" in swe.missing

    assert mini_1.writer == "mini-swe-agent" and mini_1.info.exit_status == "Submitted"
    assert [s.action for s in mini_1.trajectory] == [
        "ls -R",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
    ]
    assert mini_1.trajectory[0].exit_code == 0 and len(mini_1.history) == 6
    assert "missing: execution_time (mini-swe-agent does not record it)" in mini_1.missing
    assert [(s.action, s.exit_code) for s in mini_2.trajectory] == [("ls -R", 0)]

    assert pgs.writer == "pgs" and pgs.missing == []
    assert pgs.pgs_record.verdict == "passed" and pgs.dumps() == PGS_0.read_text(encoding="utf-8")


def test_a_damaged_file_loads_with_what_it_has_and_says_what_did_not_read() -> None:
    record = convert(
        {
            "trajectory": [{"action": 3, "observation": "ok"}, 5],
            "history": [],
            "info": {"exit_status": "submitted", "submission": "", "model_stats": "lots"},
            "pgs": {"mode": "property", "verdict": "maybe"},
        }
    )
    assert [s.observation for s in record.trajectory] == ["ok"]
    assert record.info.exit_status == "submitted" and record.pgs_record.mode == "property"
    assert "missing: trajectory.0.action (unreadable: Input should be a valid string)" in (
        record.missing
    )
    assert any(m.startswith("missing: trajectory.1 (unreadable") for m in record.missing)
    assert any(m.startswith("missing: pgs.verdict (unreadable") for m in record.missing)
    assert any(m.startswith("missing: info.model_stats (unreadable") for m in record.missing)


def test_the_pgs_record_is_the_same_class_the_run_record_holds() -> None:
    assert RunRecord.model_fields["pgs"].annotation == PGSRecord | None


def test_the_published_json_schema_is_current() -> None:
    """docs/trajectory-format.schema.json is RunRecord's schema (regenerate it with
    ``python -m agent.record.schema``)."""
    from agent.record.schema import schema_text

    assert SCHEMA.read_text(encoding="utf-8") == schema_text()
