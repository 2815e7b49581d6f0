"""The PGS record (the trajectory's ``pgs`` key) as typed models: a ``.traj`` written before the
models existed loads and is written back byte for byte, a new run writes the same keys, and
the readers (``pgs run``'s summary, ``pgs report``, the pull request body, the cost) see its
fields.

``tests/data/pgs-demo-bce24f8.traj`` is the trajectory of ``pgs demo`` run by commit bce24f8,
whose PGS kept its record as a plain dict: two rounds (one with feedback, one with a fresh
probe), two Tester conversations, verdict ``passed``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.core.loop import RunResult
from agent.core.trajectory_file import Trajectory
from agent.github.pr import evidence, refusal
from agent.pgs.compare import prediction_fields
from agent.record.pgs import (
    PGSRecord,
    RoundRecord,
    TesterConversation,
    ValidationRecord,
)
from agent.run.outputs import usage

OLD_TRAJ = Path(__file__).resolve().parents[1] / "data" / "pgs-demo-bce24f8.traj"


def old_trajectory() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(OLD_TRAJ.read_text(encoding="utf-8"))
    return data


def as_result(data: dict[str, Any], tmp_path: Path) -> RunResult:
    traj = Trajectory(tmp_path / "t.traj", replay_config=data["replay_config"])
    traj.info = data["info"]
    traj.extra = {"pgs": data["pgs"]}
    return RunResult(
        exit_status=str(data["info"]["exit_status"]),
        submission=data["info"]["submission"],
        steps=3,
        trajectory=traj,
    )


def record_shape(pgs: dict[str, Any]) -> Any:
    """:func:`key_shape` of a record, its Tester conversations by their own keys only (their
    steps are the loop's format, not the record's)."""
    flat = {
        k: (sorted(v) if k.startswith("tester") and isinstance(v, dict) else v)
        for k, v in pgs.items()
    }
    return key_shape(flat)


def shape_holds(new: Any, old: Any) -> bool:
    """Every key of the shape ``old`` is in ``new``, at every depth."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(
            k in new and shape_holds(new[k], v) for k, v in old.items()
        )
    if isinstance(old, list) and old:
        return isinstance(new, list) and bool(new) and shape_holds(new[0], old[0])
    return True


def key_shape(value: Any) -> Any:
    """The keys of every dict, at every depth (lists by the union of their items' shapes)."""
    if isinstance(value, dict):
        return {k: key_shape(v) for k, v in value.items()}
    if isinstance(value, list):
        merged: dict[str, Any] = {}
        for item in value:
            shape = key_shape(item)
            if isinstance(shape, dict):
                merged.update(shape)
        return [merged] if merged else []
    return None


# --------------------------------------------------------------------------- old files


def test_a_traj_written_before_the_models_loads_with_its_fields_typed() -> None:
    record = PGSRecord.model_validate(old_trajectory()["pgs"])
    assert record.mode == "property-min" and record.verdict == "passed"
    assert record.verdict_reason and "pass on the patch" in record.verdict_reason
    assert [r.round for r in record.rounds] == [1, 2]
    first, second = record.rounds
    assert first.verdict == "failed" and first.failures and first.report is not None
    assert first.selection is not None and "11 tokens" in first.selection.why
    assert first.selection.tokens == 11 and first.feedback and "Round 1 of" in first.feedback
    assert second.probes and second.probes[0].new_kept and second.feedback is None
    assert record.validation is not None and record.validation.filter is True
    assert [t.why for t in record.tester_turns] == ["first", "probe"]
    assert sorted(record.conversations()) == ["tester", "tester_2"]
    assert record.conversations()["tester"].trajectory  # the Tester's own steps


def test_an_old_record_is_written_back_byte_for_byte() -> None:
    raw = old_trajectory()["pgs"]
    again = PGSRecord.model_validate(raw).model_dump(mode="json")
    assert json.dumps(again, indent=1) == json.dumps(raw, indent=1)


def test_older_and_partial_records_load_with_defaults_and_keep_unknown_keys() -> None:
    assert PGSRecord.model_validate({"mode": "none"}).verdict == "unchecked"
    assert PGSRecord.model_validate({}).mode == "none"
    raw = {
        "mode": "property",
        "verdict": "failed",
        "future_key": {"kept": "as is"},
        # a selection from before `chosen` existed, a round with no report yet
        "rounds": [{"round": 1, "patch": "", "selection": {"why": "first", "tokens": 3}}],
    }
    record = PGSRecord.model_validate(raw)
    assert record.rounds[0].selection is not None and record.rounds[0].selection.why == "first"
    assert record.rounds[0].report is None and record.validation is None
    assert record.model_dump(mode="json")["future_key"] == {"kept": "as is"}


# --------------------------------------------------------------------------- new records


def test_keys_the_dict_record_left_out_until_set_stay_out() -> None:
    fresh = RoundRecord(round=1, patch="diff")
    assert fresh.model_dump(mode="json") == {"round": 1, "patch": "diff"}
    fresh.note = "no feedback: all 5 rounds used"
    assert list(fresh.model_dump(mode="json")) == ["round", "patch", "note"]
    io = ValidationRecord(note="io: no Tester").model_dump(mode="json")
    assert io == {"kept": [], "dropped": [], "note": "io: no Tester"}
    record = PGSRecord(mode="io", properties={}, verdict_reason="no candidate was checked")
    assert "tester_error" not in record.model_dump(mode="json")
    record.tester_error = "the model is down"
    assert record.model_dump(mode="json")["tester_error"] == "the model is down"


def test_a_conversation_is_stored_under_its_key_and_read_back() -> None:
    record = PGSRecord(mode="property-min")
    turn = TesterConversation(trajectory=[{"action": "submit"}], info={"exit_status": "x"})
    record.set_conversation("tester_2", turn)
    again = PGSRecord.model_validate(record.model_dump(mode="json"))
    assert again.conversations()["tester_2"].trajectory == [{"action": "submit"}]
    with pytest.raises(ValueError, match="not a Tester conversation key"):
        record.set_conversation("verdict", turn)


# --------------------------------------------------------------------------- the readers


def test_report_fields_of_an_old_traj() -> None:
    fields = prediction_fields(old_trajectory())
    assert fields["pgs_mode"] == "property-min" and fields["pgs_verdict"] == "passed"
    assert fields["pgs_rounds"] == 1 and fields["pgs_feedback_tokens"] > 0
    # a trajectory that does not record the mode falls back to its config, then the caller's
    bare = {"replay_config": {"pgs": {"feedback": "io"}}, "pgs": {"verdict": "failed"}}
    assert prediction_fields(bare)["pgs_mode"] == "io"
    assert prediction_fields({}, mode="none")["pgs_mode"] == "none"


def test_the_pull_request_reads_the_verdict_and_properties_of_an_old_traj(
    tmp_path: Path,
) -> None:
    result = as_result(old_trajectory(), tmp_path)
    assert refusal(result, force=False) is None  # passed: a PR may be opened
    body = "\n".join(evidence(result))
    assert "verdict: **passed**, after 2 checked candidates and 1 feedback message." in body
    assert "— passes on the patch" in body and "Repository tests run on the patch" in body
    failed = old_trajectory()
    failed["pgs"]["verdict"], failed["pgs"]["verdict_reason"] = "failed", "1 check failing"
    why = refusal(as_result(failed, tmp_path), force=False)
    assert why is not None and "the PGS verdict is failed, not passed (1 check failing)" in why


def test_an_unsealed_passed_opens_no_pull_request_and_the_body_says_so(tmp_path: Path) -> None:
    """--sandbox local: the check ran where the Generator worked, so passed is treated like
    tests-only (refused without --force) and the PR body says it was not sealed."""
    data = old_trajectory()
    data["pgs"]["sealed"] = False
    result = as_result(data, tmp_path)
    why = refusal(result, force=False)
    assert why is not None and "not sealed" in why and "--sandbox docker" in why
    assert refusal(result, force=True) is None
    assert any("**Not sealed:**" in line for line in evidence(result))
    data["pgs"]["sealed"] = True
    assert refusal(as_result(data, tmp_path), force=False) is None


def test_the_cost_counts_every_tester_conversation_of_an_old_traj(tmp_path: Path) -> None:
    data = old_trajectory()
    for n, key in enumerate(("tester", "tester_2"), start=1):
        data["pgs"][key]["info"]["model_stats"] = {"tokens_sent": 10 * n, "instance_cost": 0.5}
    data["info"]["model_stats"] = {"tokens_sent": 1, "instance_cost": 1.0}
    stats = usage(as_result(data, tmp_path))
    assert stats["tokens_sent"] == 31 and stats["tester_cost"] == 1.0
    assert stats["instance_cost"] == 2.0


# --------------------------------------------------------------------------- a new run


@pytest.mark.docker
def test_a_new_run_writes_the_keys_the_old_code_wrote(demo_run: Path) -> None:
    """``pgs demo`` (the recorded session, in Docker; the suite's one run, tests/conftest.py)
    with the typed record: its ``pgs`` key has the old demo's keys at every depth, and loads
    and writes back unchanged."""
    new = json.loads((demo_run / f"{demo_run.name}.traj").read_text())["pgs"]
    # Added since the old demo: the full ablation setting (docs/pgs.md, "Ablations"), the
    # pinned base commit and the hashes of the Tester's files (issue 20).
    assert new["ablation"] == {
        "mode": "property-min",
        "rounds": 5,
        "filter": True,
        "fresh_probes": 1,
        "shrink": True,
    }
    assert len(new["base_commit"]) == 40 and new["property_sha256"]
    # Every key the old code wrote is still written, at every depth (new ones may be added).
    assert shape_holds(record_shape(new), record_shape(old_trajectory()["pgs"]))
    record = PGSRecord.model_validate(new)
    assert record.verdict == "passed" and len(record.feedback_rounds()) == 1
    assert json.dumps(record.model_dump(mode="json")) == json.dumps(new)
