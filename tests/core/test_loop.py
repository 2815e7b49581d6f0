"""The Generator end to end: the scripted server over HTTP with the real openai client, a real
Docker sandbox (the base image with the repository copied in), real git and real pytest.

Every test looks at what a user sees: the exit status, the ``.patch`` (does it fix the bug?),
the ``.traj`` / ``.pred`` files, the messages the model received, the CLI's output. Ctrl-C
and the API key of a ``pgs run`` process are in test_loop_process.py, the command line's
refusals and the demo in test_loop_cli.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.textutil import (
    CHECK,
    FIX,
    FIX_STEPS,
    MODEL,
    SUBMIT,
    bash,
    call,
    hidden_tests_pass,
    last_message,
    run_agent,
)

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- fixing a bug


def test_tool_calls_fix_the_bug_and_write_patch_pred_traj(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    run = run_agent(repo, FIX_STEPS, base_image, tmp_path / "out")

    assert run.result.exit_status == "submitted"
    patch = run.paths.patch.read_text()
    assert "+    return text.upper()" in patch
    # Running Python in the sandbox left __pycache__ behind; it is not part of the patch.
    assert "__pycache__" not in patch and ".pyc" not in patch
    assert not hidden_tests_pass(repo, "", tmp_path / "before")
    assert hidden_tests_pass(repo, patch, tmp_path / "after")
    # The model saw the fixed behaviour before submitting.
    assert "HI!" in last_message(run.requests[3])["content"]

    pred = json.loads(run.paths.pred.read_text())
    assert pred == {
        "instance_id": run.paths.traj.stem,
        "model_name_or_path": MODEL,
        "model_patch": patch,
        # What `pgs report` compares (--feedback none here: nothing checked the patch).
        "pgs_mode": "none",
        # The rest of the ablation setting: --feedback none uses none of it.
        "pgs_max_rounds": None,
        "pgs_filter": None,
        "pgs_fresh_probes": None,
        "pgs_shrink": None,
        "pgs_verdict": "unchecked",
        "pgs_rounds": 0,
        "pgs_feedback_tokens": 0,
        "cost": 0.0,
    }
    traj = run.traj
    assert {"trajectory", "history", "info", "replay_config"} <= set(traj)
    assert traj["info"]["exit_status"] == "submitted"
    assert traj["info"]["submission"] == patch
    assert set(traj["info"]["model_stats"]) >= {
        "instance_cost",
        "tokens_sent",
        "tokens_received",
        "api_calls",
    }
    assert traj["info"]["model_stats"]["api_calls"] == 4
    assert traj["info"]["model_stats"]["tokens_sent"] > 0
    steps = traj["trajectory"]
    assert [s["action"].split()[0] for s in steps] == [
        "str_replace_editor",
        "str_replace_editor",
        "python3",
        "submit",
    ]
    for step in steps:
        assert {"action", "observation", "response", "thought", "execution_time", "state"} <= set(
            step
        )
        assert {"query"} <= set(step)
    assert steps[1]["thought"] == "It lower-cases; the docstring says upper."
    assert "diff" in steps[-1]["state"]  # the state command ran
    roles = [m["role"] for m in traj["history"]]
    assert roles[:2] == ["system", "user"] and roles.count("tool") == 4
    assert all({"role", "content", "agent", "message_type"} <= set(m) for m in traj["history"])
    assert any(m.get("tool_calls") for m in traj["history"])
    # What SWE-agent's inspectors read: each reply's thought and action in the history, and
    # each step's own tokens (adding up to the run's).
    replies = [m for m in traj["history"] if m["role"] == "assistant"]
    assert [m["action"] for m in replies] == [s["action"] for s in steps]
    assert replies[1]["thought"] == "It lower-cases; the docstring says upper."
    stats = traj["info"]["model_stats"]
    assert sum(s["usage"]["tokens_sent"] for s in steps) == stats["tokens_sent"]


def test_text_mode_fixes_the_bug_with_one_bash_block_per_reply(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [
        {
            "content": "THOUGHT: read the code.\n\n```bash\n"
            "str_replace_editor view /repo/textutil.py\n```"
        },
        {
            "content": "THOUGHT: it lower-cases.\n\n```bash\nstr_replace_editor str_replace "
            "/repo/textutil.py --old_str 'text.lower()' --new_str 'text.upper()'\n```"
        },
        {"content": f"Check it.\n\n```bash\n{CHECK}\n```"},
        {"content": "Done.\n\n```bash\nsubmit\n```"},
    ]
    run = run_agent(
        repo, script, base_image, tmp_path / "out", {"model": {"function_calling": False}}
    )

    assert run.result.exit_status == "submitted"
    patch = run.paths.patch.read_text()
    assert hidden_tests_pass(repo, patch, tmp_path / "after")
    assert all("tools" not in r for r in run.requests)  # text mode sends no functions
    system = run.requests[0]["messages"][0]["content"]
    assert "```bash" in system and "str_replace_editor <command> <path>" in system
    observation = last_message(run.requests[3])
    assert observation["role"] == "user" and "HI!" in observation["content"]
    assert run.traj["trajectory"][1]["thought"] == "THOUGHT: it lower-cases."


# --------------------------------------------------------------------------- format errors


def test_reply_without_a_tool_call_gets_the_format_error_and_the_run_goes_on(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [{"content": "I think the bug is in shout()."}, *FIX_STEPS]
    run = run_agent(repo, script, base_image, tmp_path / "out")

    error = last_message(run.requests[1])
    assert error["role"] == "user"
    assert "your reply called no tool" in error["content"]
    assert "Call exactly one tool" in error["content"]
    assert run.result.exit_status == "submitted"
    assert hidden_tests_pass(repo, run.result.submission, tmp_path / "after")


def test_two_bash_blocks_in_text_mode_get_the_format_error(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [
        {"content": "First\n```bash\nls\n```\nthen\n```bash\ncat textutil.py\n```"},
        {"content": "```bash\nsubmit\n```"},
    ]
    run = run_agent(
        repo, script, base_image, tmp_path / "out", {"model": {"function_calling": False}}
    )

    error = last_message(run.requests[1])
    assert error["role"] == "user" and "2 bash code blocks" in error["content"]
    assert "exactly one fenced ```bash block" in error["content"]
    assert run.result.exit_status == "submitted"
    assert run.result.steps == 1  # the malformed reply ran nothing


def test_three_format_errors_in_a_row_end_the_run(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [{"content": "hmm"}, call("no_such_tool"), {"content": "still thinking"}]
    run = run_agent(repo, script, base_image, tmp_path / "out")

    assert run.result.exit_status == "exit_format"
    assert len(run.requests) == 3
    assert "Unknown tool 'no_such_tool'" in last_message(run.requests[2])["content"]
    traj = run.traj
    assert traj["info"]["exit_status"] == "exit_format"
    assert traj["trajectory"] == []
    assert run.paths.patch.read_text() == ""


# --------------------------------------------------------------------------- limits


def test_step_limit_submits_the_current_diff(repo: Path, base_image: str, tmp_path: Path) -> None:
    script = [FIX, bash("echo still looking"), SUBMIT]
    run = run_agent(repo, script, base_image, tmp_path / "out", {"agent": {"step_limit": 2}})

    assert run.result.exit_status == "submitted (exit_step_limit)"
    assert len(run.requests) == 2  # the third reply was never asked for
    patch = run.paths.patch.read_text()
    assert "+    return text.upper()" in patch
    assert json.loads(run.paths.pred.read_text())["model_patch"] == patch
    assert "step limit of 2" in run.traj["info"]["limit_message"]


def test_cost_limit_submits_the_current_diff(repo: Path, base_image: str, tmp_path: Path) -> None:
    # $1000 per 1M prompt tokens: the first call (a few hundred tokens) costs more than $0.05.
    overrides = {"model": {"prices": {MODEL: [1000.0, 0.0]}, "per_instance_cost_limit": 0.05}}
    run = run_agent(repo, [FIX, SUBMIT], base_image, tmp_path / "out", overrides)

    assert run.result.exit_status == "submitted (exit_cost)"
    assert len(run.requests) == 1
    assert "+    return text.upper()" in run.paths.patch.read_text()
    info = run.traj["info"]
    assert info["model_stats"]["instance_cost"] >= 0.05
    assert "per_instance_cost_limit" in info["limit_message"]


# --------------------------------------------------------------------------- server failures


def test_rate_limit_then_server_error_are_retried_and_the_run_submits(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [{"error": 429, "retry_after": 0}, {"error": 500, "message": "overloaded"}, *FIX_STEPS]
    run = run_agent(repo, script, base_image, tmp_path / "out")

    assert run.result.exit_status == "submitted"
    assert len(run.requests) == 6  # two failed attempts, then the four replies
    assert run.traj["info"]["model_stats"]["api_calls"] == 4
    assert hidden_tests_pass(repo, run.result.submission, tmp_path / "after")


# --------------------------------------------------------------------------- replay


def test_replaying_the_saved_traj_reproduces_the_patch(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [{"content": "no tool call here"}, *FIX_STEPS]  # a format error is replayed too
    first = run_agent(repo, script, base_image, tmp_path / "first")
    copy = tmp_path / "copy"
    subprocess.run(["git", "clone", "-q", str(repo), str(copy)], check=True)

    again = run_agent(copy, first.paths.traj, base_image, tmp_path / "again")

    assert again.result.exit_status == first.result.exit_status == "submitted"
    assert again.paths.patch.read_text() == first.paths.patch.read_text()
    assert [s["action"] for s in again.traj["trajectory"]] == [
        s["action"] for s in first.traj["trajectory"]
    ]


# --------------------------------------------------------------------------- observations


def test_interactive_command_is_refused_with_a_hint_and_not_run(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [bash("touch /repo/RAN; vim textutil.py"), SUBMIT]
    run = run_agent(repo, script, base_image, tmp_path / "out")

    refusal = last_message(run.requests[1])["content"]
    assert "`vim` needs an interactive terminal" in refusal
    assert "str_replace_editor" in refusal  # the hint says what to use instead
    assert run.traj["trajectory"][0]["exit_code"] == 1
    assert "RAN" not in run.result.submission  # nothing of the command ran
    assert run.result.submission == ""


def test_long_output_is_cut_in_the_middle_with_a_note(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [bash("seq 1 100000"), SUBMIT]
    run = run_agent(
        repo, script, base_image, tmp_path / "out", {"agent": {"max_observation_chars": 1000}}
    )

    seen = last_message(run.requests[1])["content"]
    assert len(seen) < 1400
    assert seen.startswith("1\n2\n3\n")
    assert seen.rstrip().endswith("99999\n100000")
    assert "characters omitted" in seen and "head, tail, grep" in seen


def test_a_huge_output_says_how_much_was_really_cut(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    # 50 MB: the sandbox keeps 1 MB of it, the prompt 12 000 characters; the note counts both.
    huge = "python3 -c \"import sys; sys.stdout.write('x' * 50_000_000)\""
    run = run_agent(repo, [bash(huge), SUBMIT], base_image, tmp_path / "out")

    seen = last_message(run.requests[1])["content"]
    assert f"[... {50_000_000 - 12_000} characters omitted;" in seen
    assert len(seen) < 12_200


def test_older_observations_are_elided_in_the_prompt_but_kept_in_the_traj(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [bash(f"echo output-{i}") for i in range(1, 5)] + [SUBMIT]
    run = run_agent(repo, script, base_image, tmp_path / "out", {"agent": {"keep_observations": 2}})

    final = run.requests[-1]["messages"]
    observations = [m["content"] for m in final if m["role"] == "tool"]
    assert observations[:2] == ["Old output of this command omitted (1 lines)."] * 2
    assert observations[2:] == ["output-3", "output-4"]
    history = [m["content"] for m in run.traj["history"] if m["role"] == "tool"]
    assert history[:4] == ["output-1", "output-2", "output-3", "output-4"]
