"""``pgs inspect`` reads mini-swe-agent trajectories: the steps rebuilt from the messages (the
command each reply ran, its exit code and output, refused replies shown with the agent's
answer), the issue, the exit status and the submitted patch."""

from __future__ import annotations

import json
from pathlib import Path

from agent.inspect.load import load
from agent.inspect.model import BatchView, TrajectoryView
from tests.models.test_replay_formats import FIRST, LAST, V1, V2_TOOLCALLS

REFUSED = "```bash\nls\n```\nthen\n```bash\npwd\n```"
FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."


def loaded(tmp_path: Path, data: dict[str, object]) -> TrajectoryView:
    path = tmp_path / "flask-1.traj.json"
    path.write_text(json.dumps(data))
    traj = load(path)
    assert isinstance(traj, TrajectoryView)
    return traj


def test_a_mini_1x_run_shows_its_steps_issue_status_and_patch(tmp_path: Path) -> None:
    messages = list(V1["messages"])
    messages[4:4] = [
        {"role": "assistant", "content": REFUSED},
        {"role": "user", "content": FORMAT_ERROR},
    ]
    traj = loaded(tmp_path, {**V1, "messages": messages, "instance_id": "pallets__flask-5014"})

    assert traj.writer == "mini-swe-agent" and traj.instance_id == "pallets__flask-5014"
    assert traj.issue == "fix it" and traj.exit_status == "Submitted"
    assert [s.action for s in traj.steps] == [
        "ls -R",
        "",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
    ]
    first, refused, last = traj.steps
    assert first.response == FIRST and first.exit_code == 0 and first.observation == ".:\nsrc\n"
    assert refused.observation == FORMAT_ERROR and refused.exit_code is None
    assert last.response == LAST
    assert traj.submission is not None and traj.submission.text == "diff --git a/x b/x\n"


def test_a_mini_2x_run_reads_the_recorded_actions_and_exit_codes(tmp_path: Path) -> None:
    traj = loaded(tmp_path, V2_TOOLCALLS)
    (step,) = traj.steps
    assert step.action == "ls -R" and step.exit_code == 0


def test_minis_results_folder_is_a_batch_and_a_run_folder_a_run(tmp_path: Path) -> None:
    trajs = tmp_path / "trajs"  # mini-swe-agent's layout: trajs/<id>/<id>.traj.json
    for iid in ("a__a-1", "b__b-2"):
        (trajs / iid).mkdir(parents=True)
        (trajs / iid / f"{iid}.traj.json").write_text(json.dumps({**V1, "instance_id": iid}))
    batch = load(trajs)
    assert isinstance(batch, BatchView)
    assert [(r.instance_id, r.exit_status, r.steps) for r in batch.rows] == [
        ("a__a-1", "Submitted", 2),
        ("b__b-2", "Submitted", 2),
    ]
    one = load(trajs / "a__a-1")
    assert isinstance(one, TrajectoryView) and one.instance_id == "a__a-1"
