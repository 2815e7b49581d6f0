"""The Generator end to end, interrupted and watched from outside: Ctrl-C in this process and on a
``pgs run`` process (exit code 130, a valid ``.traj``, no container left), and the API key of a
``pgs run`` process never reaching its output folder, the terminal or the model. The scripted
server over HTTP with the real openai client, a real Docker sandbox, real git."""

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

from agent.models.script_server import ScriptedServer
from agent.run.outputs import output_paths
from agent.run.run_task import run_task
from agent.run.task import check_repo, load_issue
from envs.docker_util import LABEL, PID_LABEL
from tests.support.textutil import FIX, ISSUE, MODEL, SUBMIT, bash, config_for, pgs_env

PGS = [sys.executable, "-m", "agent.cli"]


def our_containers(docker_client: Any, pid: int) -> set[str]:
    filters = {"label": [f"{LABEL}=1", f"{PID_LABEL}={pid}"]}
    return {
        c.id for c in docker_client.containers.list(all=True, filters=filters, ignore_removed=True)
    }


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
