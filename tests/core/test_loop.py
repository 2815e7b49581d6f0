"""The Generator end to end: the scripted server over HTTP with the real openai client, a real
Docker sandbox (the base image with the repository copied in), real git and real pytest.

Every test looks at what a user sees: the exit status, the ``.patch`` (does it fix the bug?),
the ``.traj`` / ``.pred`` files, the messages the model received, the CLI's output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.run.outputs import output_paths
from agent.run.run_task import run_task
from agent.run.task import check_repo, load_issue
from envs.docker_util import LABEL, PID_LABEL
from tests.support.repos import git, make_repo
from tests.support.textutil import (
    BUGGY,
    CHECK,
    FIX,
    FIX_STEPS,
    ISSUE,
    MODEL,
    SUBMIT,
    bash,
    call,
    cli_error,
    closed_port,
    config_for,
    hidden_tests_pass,
    last_message,
    pgs_env,
    run_agent,
    run_argv,
)

ROOT = Path(__file__).resolve().parents[2]
PGS = [sys.executable, "-m", "agent.cli"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "textutil", BUGGY)


def our_containers(docker_client: Any, pid: int) -> set[str]:
    filters = {"label": [f"{LABEL}=1", f"{PID_LABEL}={pid}"]}
    return {c.id for c in docker_client.containers.list(all=True, filters=filters)}


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


# --------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_leaves_a_valid_traj_and_no_container(
    repo: Path, base_image: str, tmp_path: Path, docker_client: Any
) -> None:
    main_thread = threading.main_thread().ident
    assert main_thread is not None
    steps = [FIX, bash("echo looking"), SUBMIT]

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        asked = sum(m["role"] == "assistant" for m in request["messages"])
        if asked == 2:  # the third request: the user presses Ctrl-C while the model thinks
            signal.pthread_kill(main_thread, signal.SIGINT)
        return steps[asked]

    before = our_containers(docker_client, os.getpid())
    out = tmp_path / "out"
    with ScriptedServer(policy) as server:
        task = load_issue(ISSUE, check_repo(repo, allow_dirty=False))
        with pytest.raises(KeyboardInterrupt):
            run_task(task, config_for(server.url, base_image), out)

    traj = json.loads(output_paths(out, task.instance_id).traj.read_text())
    assert traj["info"]["exit_status"] == "interrupted"
    assert [s["action"].split()[0] for s in traj["trajectory"]] == ["str_replace_editor", "echo"]
    assert "+    return text.upper()" in traj["info"]["submission"]
    assert our_containers(docker_client, os.getpid()) == before


def pgs_run_args(repo: Path, url: str, image: str, out: Path) -> list[str]:
    return [
        *PGS,
        "run",
        "--repo",
        str(repo),
        "--issue",
        ISSUE,
        "--model",
        MODEL,
        "--base-url",
        url,
        "--image",
        image,
        "--model.prices",
        json.dumps({MODEL: [0, 0]}),
        "--output-dir",
        str(out),
        "--feedback",
        "none",
    ]


def test_ctrl_c_on_pgs_run_exits_130_with_the_traj_saved(
    repo: Path, base_image: str, tmp_path: Path, docker_client: Any
) -> None:
    process: dict[str, subprocess.Popen[str]] = {}
    steps = [FIX, bash("echo looking"), SUBMIT]

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        asked = sum(m["role"] == "assistant" for m in request["messages"])
        if asked == 2:
            process["pgs"].send_signal(signal.SIGINT)
        return steps[asked]

    out = tmp_path / "out"
    with ScriptedServer(policy) as server:
        proc = subprocess.Popen(
            pgs_run_args(repo, server.url, base_image, out),
            env=pgs_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        process["pgs"] = proc
        _, stderr = proc.communicate(timeout=120)

    assert proc.returncode == 130, stderr
    assert "pgs: error: interrupted" in stderr
    assert "Traceback" not in stderr
    trajs = list(out.glob("*/*.traj"))
    assert len(trajs) == 1 and str(trajs[0]) in stderr.replace("\n", "")
    traj = json.loads(trajs[0].read_text())
    assert traj["info"]["exit_status"] == "interrupted"
    assert len(traj["trajectory"]) == 2
    assert not our_containers(docker_client, proc.pid)


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


# --------------------------------------------------------------------------- secrets


def test_api_key_never_reaches_the_output_folder_the_terminal_or_the_model(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    key = f"sk-pgs-test-{uuid.uuid4().hex}"
    out = tmp_path / "out"
    script = [bash('env; echo "key=$OPENAI_API_KEY"'), FIX, SUBMIT]
    with ScriptedServer(script) as server:
        done = subprocess.run(
            # -vv: debug logs (the libraries' HTTP requests included) must not show the key
            [*PGS, "-vv", *pgs_run_args(repo, server.url, base_image, out)[len(PGS) :]],
            env=pgs_env(OPENAI_API_KEY=key),
            capture_output=True,
            text=True,
            timeout=120,
        )
        requests = json.dumps(server.requests)

    assert done.returncode == 0, done.stderr
    assert "+    return text.upper()" in done.stdout
    assert key not in done.stdout and key not in done.stderr
    assert key not in requests  # the sandbox does not see the key, so no observation holds it
    files = [p for p in out.rglob("*") if p.is_file()]
    # The output folder's .gitignore (``*``, pgs made the folder) is checked for the key too.
    assert out / ".gitignore" in files
    suffixes = {p.suffix for p in files if p.name != ".gitignore"}
    assert suffixes == {".traj", ".patch", ".pred", ".log", ".yaml"}
    for path in files:
        assert key not in path.read_text(), path


# --------------------------------------------------------------------------- the CLI


def test_cli_rejects_a_missing_repo_and_a_folder_without_git(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(capsys, *run_argv(tmp_path / "nope"))
    assert "does not exist" in line and "nope" in line
    (tmp_path / "plain").mkdir()
    line = cli_error(capsys, *run_argv(tmp_path / "plain"))
    assert "not a git repository" in line and "git init" in line


def test_cli_rejects_an_empty_issue(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "issue.md"
    empty.write_text("  \n")
    argv = run_argv(repo)
    argv[argv.index("--issue") + 1] = str(empty)
    assert "is empty" in cli_error(capsys, *argv)
    argv[argv.index("--issue") + 1] = ""
    assert "--issue text is empty" in cli_error(capsys, *argv)


def test_cli_rejects_bad_config_files_naming_the_field(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agent:\n  step_limit: [1,\n")
    line = cli_error(capsys, *run_argv(repo, "--config", str(config)))
    assert "not valid YAML at line" in line
    config.write_text("agent:\n  step_limit: -1\n")
    assert "agent.step_limit" in cli_error(capsys, *run_argv(repo, "--config", str(config)))
    config.write_text("agent:\n  step_limmit: 3\n")
    assert "agent.step_limmit" in cli_error(capsys, *run_argv(repo, "--config", str(config)))


def test_cli_rejects_an_unknown_tool_bundle(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundles = json.dumps([str(tmp_path / "no-such-bundle")])
    # The model is never asked (no server at the URL): the bundle is the command's mistake.
    argv = run_argv(repo, "--tools.bundles", bundles, "--no-model.check-endpoint")
    line = cli_error(capsys, *argv)
    assert "no-such-bundle" in line and "no such folder" in line


def test_cli_dirty_tree_needs_allow_dirty_and_the_patch_holds_only_the_agent_change(
    repo: Path, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "README.md").write_text("text helpers, edited by the user\n")
    (repo / "notes.txt").write_text("the user's notes\n")
    line = cli_error(capsys, *run_argv(repo))
    assert "uncommitted changes" in line and "--allow-dirty" in line

    out = tmp_path / "out"
    with ScriptedServer(FIX_STEPS) as server:
        extra = ["--allow-dirty", "--image", base_image, "--output-dir", str(out)]
        code = main(run_argv(repo, *extra, url=server.url))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    patch = next(out.glob("*/*.patch")).read_text()
    assert patch == captured.out
    assert "textutil.py" in patch
    assert "README.md" not in patch and "notes.txt" not in patch
    # The patch applies on top of the user's tree, which the run left as it was.
    assert git(repo, "status", "--porcelain").split() == ["M", "README.md", "??", "notes.txt"]
    subprocess.run(["git", "apply", "--check", "-"], cwd=repo, input=patch, text=True, check=True)


def test_cli_unreachable_server_is_one_error_line(
    repo: Path, base_image: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = run_argv(repo, "--image", base_image, "--output-dir", str(tmp_path / "out"), url=url)
    line = cli_error(capsys, *argv)  # found before the run: nothing started, nothing written
    assert f"cannot reach the model's server at {url}" in line and "--base-url" in line
    assert not (tmp_path / "out").exists()


def test_cli_refused_api_key_is_one_error_line(
    repo: Path, base_image: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with ScriptedServer([{"error": 401}]) as server:
        argv = run_argv(
            repo, "--image", base_image, "--output-dir", str(tmp_path / "out"), url=server.url
        )
        line = cli_error(capsys, *argv, code=1)
    assert "API key was refused" in line and "OPENAI_API_KEY" in line


# --------------------------------------------------------------------------- the demo


def test_demo_builds_the_repository_image_and_its_patch_passes_the_hidden_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    code = main(["demo", "--output-dir", str(tmp_path / "demo")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert (
        "hidden tests on the patched repository: PASS (sealed: in a fresh container of the "
        "repository's image, never touched by the agent)"
    ) in captured.err.splitlines()
    assert "exit status: submitted" in captured.err
    assert "+    middle = len(ordered) // 2" in captured.out


def test_cli_repository_image_at_another_commit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docker_client: Any
) -> None:
    from agent.cli import make_example_repo
    from envs.images import build_repo_image

    repo = make_example_repo(tmp_path / "stats")
    image = build_repo_image(repo).tag  # the demo's image: cached after the first build
    make_repo(repo, {"stats.py": (repo / "stats.py").read_text() + "\n# moved on\n"}, "later")
    with ScriptedServer([]) as server:  # the model answers: the image is what is refused
        argv = run_argv(
            repo, "--image", image, "--output-dir", str(tmp_path / "out"), url=server.url
        )
        line = cli_error(capsys, *argv)
        assert not server.requests
    assert "the image holds a repository at /repo at commit" in line
    assert "pgs env build" in line
