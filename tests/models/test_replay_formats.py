"""The replay model reads mini-swe-agent's trajectories (1.x ``mini-swe-agent-1``, 2.x
``mini-swe-agent-1.1`` with chat-completion tool calls or a Responses API ``output``) as it reads
SWE-agent's ``.traj``: the model's replies, in order, become the steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.errors import ScriptError
from agent.models import ModelConfig
from agent.models.replay import ReplayModel
from agent.models.script_format import load_script

#: Replies of gemini-3-pro under mini-swe-agent 1.15 (pallets__flask-5014, messages[2] and
#: messages[-2], public results bash-only/20251118_mini-v1.15.0_gemini-3-pro-preview-20251118).
FIRST = (
    "THOUGHT: I need to explore the codebase to locate the `Blueprint` class and understand how "
    "it is initialized. I'll start by listing the files in the current directory.\n\n```bash\n"
    "ls -R\n```"
)
LAST = (
    "THOUGHT: The diff looks correct.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && "
    "git add -A && git diff --cached\n```"
)

V1: dict[str, Any] = {
    "info": {"exit_status": "Submitted", "submission": "diff --git a/x b/x\n"},
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>\nfix it\n</pr_description>"},
        {"role": "assistant", "content": FIRST, "extra": {"response": {"id": "gen-1"}}},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n.:\nsrc\n</output>"},
        {"role": "assistant", "content": LAST},
        {"role": "user", "content": "diff --git a/x b/x\n"},
    ],
    "trajectory_format": "mini-swe-agent-1",
}
CALL = {"command": "ls -R"}
V2_TOOLCALLS: dict[str, Any] = {
    "info": {"exit_status": "Submitted", "submission": ""},
    "messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": "list",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps(CALL)},
                }
            ],
            "extra": {"actions": [{"command": "ls -R", "tool_call_id": "c1"}]},
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "<returncode>0</returncode>\n<output>\nsrc\n</output>",
            "extra": {"returncode": 0, "raw_output": "src\n"},
        },
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}
V2_RESPONSES: dict[str, Any] = {
    "info": {},
    "messages": [
        {"role": "user", "content": "u"},
        {
            "object": "response",
            "output": [
                {"type": "reasoning", "summary": []},
                {"type": "message", "content": [{"type": "output_text", "text": "list"}]},
                {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
            ],
        },
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", ["run.traj.json", "run.json", "run.traj"])
def test_a_mini_1x_trajectory_is_a_script_of_its_replies(tmp_path: Path, name: str) -> None:
    script = load_script(write(tmp_path, name, V1))
    assert [s.content for s in script.steps or []] == [FIRST, LAST]  # type: ignore[union-attr]


def test_the_replay_model_answers_with_them(tmp_path: Path) -> None:
    path = write(tmp_path, "run.traj.json", V1)
    model = ReplayModel(ModelConfig(name="replay", script=str(path), function_calling=False))
    answers = [model.query([{"role": "user", "content": "go"}]).content for _ in range(2)]
    assert answers == [FIRST, LAST]


def test_mini_2x_tool_calls_and_responses_api_replies(tmp_path: Path) -> None:
    calls = load_script(write(tmp_path, "a.traj.json", V2_TOOLCALLS)).steps or []
    (step,) = calls
    assert step.content == "list"  # type: ignore[union-attr]
    assert [(c.name, c.arguments) for c in step.tool_calls] == [("bash", json.dumps(CALL))]  # type: ignore[union-attr]
    (reply,) = load_script(write(tmp_path, "b.traj.json", V2_RESPONSES)).steps or []
    assert reply.content == "list"  # type: ignore[union-attr]
    assert [c.name for c in reply.tool_calls] == ["bash"]  # type: ignore[union-attr]


def test_a_file_with_neither_history_nor_messages_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, "x.traj.json", {"info": {}})
    with pytest.raises(ScriptError, match="'history' or 'messages'"):
        load_script(path)


#: A real SWE-agent 1.x run (gpt-4o, function calling) from SWE-agent's own test data, trimmed:
#: its history holds four replies, the fifth (``submit``) only its ``trajectory``.
SWE_AGENT_1X = Path(__file__).resolve().parents[1] / "data" / "swe-agent-1x-test-repo.traj"


def test_a_swe_agent_1x_step_kept_only_in_the_trajectory_is_replayed() -> None:
    from agent.inspect.recording import recorded_replies
    from agent.models.script_format import trajectory_replies

    traj = json.loads(SWE_AGENT_1X.read_text())
    replies = trajectory_replies(traj)
    assert [where for where, _ in replies] == [
        "history[2]",
        "history[4]",
        "history[6]",
        "history[8]",
        "trajectory[4]",
    ]
    # The submission was a call of the submit tool without arguments, as SWE-agent ran it.
    assert replies[-1][1]["tool_calls"] == [{"name": "submit", "arguments": "{}"}]
    assert replies[-1][1]["content"].startswith("The script `missing_colon.py` ran successfully")
    recorded = recorded_replies(traj)
    assert [r.command for r in recorded][-2:] == [
        "python3 /SWE-agent__test-repo/tests/missing_colon.py",
        "submit",
    ]
    assert recorded[-1].submitted and not any(r.submitted for r in recorded[:-1])


def test_the_replay_model_answers_a_swe_agent_1x_run_to_its_submission(tmp_path: Path) -> None:
    script = load_script(str(SWE_AGENT_1X))
    assert len(script.steps) == 5
    assert script.steps[-1].tool_calls[0].name == "submit"
