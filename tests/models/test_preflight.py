"""The model's server and key are checked before any image or sandbox work (issue 32): a
refused key, a server that is down, a host name that does not resolve, a base URL without a
scheme and OpenAI without a key are each one ``pgs: error:`` line within seconds, naming the
URL, the key's variable and the fix, never the key. No placeholder key is ever sent: without
a key a local server gets no Authorization header. The saved ``<id>.config.yaml`` records the
base URL a ``.env`` file gave, so ``--config`` of it reaches the same server elsewhere.

``pgs`` runs as a user starts it (``python -m agent.cli`` in a subprocess); Docker is pointed
at a closed port with ``--sandbox docker``, so a run that got as far as the sandbox would fail
with Docker's error (exit code 3), not the model's. The servers are real HTTP servers on
127.0.0.1: the scripted model (agent/models/script_server.py) and small ones that answer 401
or 404 and record each request's Authorization header.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.models.script_server import ScriptedServer
from tests.support.repos import make_repo
from tests.support.textutil import (
    BUGGY,
    ISSUE,
    MODEL,
    ROOT,
    SUBMIT,
    bash,
    closed_port,
    pgs_env,
    run_argv,
)

KEY = "sk-test-Zq8pX2vLr7NcY4"  # a key of the test's own: it must never be printed
FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py")
#: The most a refusal may take: the preflight is one request of a few seconds, no retries.
QUICK = 20.0


class Recorder:
    """An HTTP server on 127.0.0.1 answering every request with ``status`` (and, for 200, a
    model list or a chat completion that calls ``submit``); ``.seen`` holds (method, path,
    Authorization header) of each request."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.seen: list[tuple[str, str, str | None]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                recorder.seen.append((self.command, self.path, self.headers.get("Authorization")))
                body: dict[str, Any]
                if recorder.status == 401:
                    body = {"error": {"message": "Incorrect API key provided", "code": "bad"}}
                elif recorder.status != 200:
                    body = {"error": {"message": "Not Found"}}
                elif self.path.endswith("/models"):
                    body = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                else:
                    body = completion()
                data = json.dumps(body).encode()
                self.send_response(recorder.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Recorder:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def completion() -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "submit", "arguments": "{}"}}
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "textutil", BUGGY)


@pytest.fixture
def no_docker() -> Iterator[dict[str, str]]:
    """The environment of a pgs whose Docker is a closed port: reaching the sandbox is exit 3."""
    yield pgs_env(DOCKER_HOST=f"tcp://127.0.0.1:{closed_port()}")


def pgs(
    argv: list[str], env: dict[str, str], cwd: Path = ROOT
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, time.monotonic() - started


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The run's only stderr line, a ``pgs: error:``; no traceback, and the key nowhere."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgs: error: "), done.stderr
    assert KEY not in done.stderr + done.stdout
    return lines[0]


def docker_run(repo: Path, url: str, out: Path, *extra: str) -> list[str]:
    return run_argv(repo, "--sandbox", "docker", "--output-dir", str(out), *extra, url=url)


# --------------------------------------------------------------------------- refused before


def test_a_refused_key_is_one_line_before_the_sandbox(
    repo: Path, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    with Recorder(status=401) as server:
        done, took = pgs(docker_run(repo, server.url, tmp_path / "out"), no_docker)
        env = no_docker | {"OPENAI_API_KEY": KEY}
        keyed, _ = pgs(docker_run(repo, server.url, tmp_path / "out"), env)
    assert done.returncode == 2 and took < QUICK
    line = one_line(done)
    assert f"{server.url} refused the API key of OPENAI_API_KEY (it is unset" in line
    assert "set OPENAI_API_KEY to a valid key" in line
    assert keyed.returncode == 2
    assert "refused the API key of OPENAI_API_KEY (HTTP 401)" in one_line(keyed)
    assert [(m, p) for m, p, _ in server.seen] == [("GET", "/v1/models")] * 2  # no chat call
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["a closed port", "a host name that does not resolve"])
def test_a_server_that_is_not_there_is_one_line_before_the_sandbox(
    where: str, repo: Path, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    if where == "a closed port":
        url, reason = f"http://127.0.0.1:{closed_port()}/v1", "connection refused"
    else:
        url = "http://no-such-model-server.invalid:8000/v1"
        reason = "the host name does not resolve"
    done, took = pgs(docker_run(repo, url, tmp_path / "out"), no_docker)
    assert done.returncode == 2 and took < QUICK
    line = one_line(done)
    assert f"cannot reach the model's server at {url} ({reason}" in line
    assert f"is the server running at {url}? start it, or fix --base-url" in line
    assert "attempt" not in line  # one try, not the run's retries


def test_a_base_url_from_the_environment_is_named_as_such(
    repo: Path, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = run_argv(repo, "--sandbox", "docker", "--output-dir", str(tmp_path / "out"))
    argv.remove("--base-url")
    argv.remove("http://127.0.0.1:9/v1")
    done, _ = pgs(argv, no_docker | {"OPENAI_BASE_URL": url})
    assert done.returncode == 2
    assert f"is the server running at {url}? start it, or fix OPENAI_BASE_URL" in one_line(done)
    done, _ = pgs(argv, no_docker | {"OPENAI_BASE_URL": "localhost:8000"})
    assert done.returncode == 2
    assert one_line(done) == (
        "pgs: error: OPENAI_BASE_URL: 'localhost:8000' has no http:// or https:// scheme: "
        "write http://localhost:8000 (or https://localhost:8000)"
    )


def test_a_base_url_without_a_scheme_is_refused_when_parsed(
    repo: Path, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    done, took = pgs(docker_run(repo, "localhost:8000", tmp_path / "out"), no_docker)
    assert done.returncode == 2 and took < QUICK
    assert one_line(done) == (
        "pgs: error: --model.base-url: 'localhost:8000' has no http:// or https:// scheme: "
        "write http://localhost:8000 (or https://localhost:8000)"
    )


def test_openai_without_a_key_is_refused_at_once(
    repo: Path, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    argv = ["run", "--repo", str(repo), "--issue", ISSUE, "--model", "gpt-4o-mini"]
    done, took = pgs([*argv, "--output-dir", str(tmp_path / "out")], no_docker)
    assert done.returncode == 2 and took < QUICK
    assert one_line(done) == (
        "pgs: error: no API key for https://api.openai.com/v1: set OPENAI_API_KEY to your "
        "OpenAI key (or pass --base-url for a server of your own, which needs none)"
    )


def test_the_demo_with_a_real_model_checks_it_before_the_image(
    tmp_path: Path, no_docker: dict[str, str]
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    env = no_docker | {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": url}
    done, took = pgs(["demo", "--output-dir", str(tmp_path / "demo")], env)
    assert done.returncode == 2 and took < QUICK
    assert f"cannot reach the model's server at {url}" in one_line(done)


def test_a_server_without_models_is_reachable(
    repo: Path, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    # Some servers have no GET /models: the run goes on, and meets the closed Docker port.
    with Recorder(status=404) as server:
        done, _ = pgs(docker_run(repo, server.url, tmp_path / "out"), no_docker)
    assert done.returncode == 3, done.stderr
    assert "DOCKER_HOST" in done.stderr and "cannot reach the model" not in done.stderr
    assert [(m, p) for m, p, _ in server.seen] == [("GET", "/v1/models")]


def test_the_check_can_be_turned_off(repo: Path, tmp_path: Path, no_docker: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"  # a server that comes up later
    argv = docker_run(repo, url, tmp_path / "out", "--no-model.check-endpoint")
    done, _ = pgs(argv, no_docker)
    assert done.returncode == 3, done.stderr  # Docker's error: the model was not asked


# --------------------------------------------------------------------------- no placeholder key


def test_no_key_means_no_authorization_header(repo: Path, tmp_path: Path) -> None:
    with Recorder() as server:
        argv = run_argv(
            repo, "--sandbox", "local", "--output-dir", str(tmp_path / "a"), url=server.url
        )
        done, _ = pgs(argv, pgs_env())
        unkeyed = list(server.seen)
        server.seen.clear()
        argv = [a if a != str(tmp_path / "a") else str(tmp_path / "b") for a in argv]
        keyed, _ = pgs(argv, pgs_env(OPENAI_API_KEY=KEY))
    assert done.returncode == 0, done.stderr
    assert [(m, p) for m, p, _ in unkeyed] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert [auth for _, _, auth in unkeyed] == [None, None]  # no sk-none, no header at all
    assert keyed.returncode == 0, keyed.stderr
    assert [auth for _, _, auth in server.seen] == [f"Bearer {KEY}"] * 2
    assert KEY not in keyed.stderr + keyed.stdout


# --------------------------------------------------------------------------- the saved config


def test_the_saved_config_records_the_base_url_a_dot_env_gave(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"  # where the user keeps .env, outside the repository
    home.mkdir()
    out = tmp_path / "out"
    argv = run_argv(repo, "--sandbox", "local", "--output-dir", str(out))
    argv.remove("--base-url")
    argv.remove("http://127.0.0.1:9/v1")
    with ScriptedServer([FIX, SUBMIT, FIX, SUBMIT]) as server:
        (home / ".env").write_text(f"OPENAI_BASE_URL={server.url}\n")
        with_dot_env = {k: v for k, v in pgs_env().items() if k != "PYTHON_DOTENV_DISABLED"}
        done, _ = pgs(argv, with_dot_env, cwd=home)
        assert done.returncode == 0, done.stderr
        (saved,) = out.glob("*/*.config.yaml")
        model = yaml.safe_load(saved.read_text())["model"]
        assert model["base_url"] == server.url
        assert model["api_key_env"] == "OPENAI_API_KEY"  # the variable's name, never a key
        # Elsewhere, without the .env: the saved config reaches the same server.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        again = ["run", "--repo", str(repo), "--issue", ISSUE, "--config", str(saved)]
        rerun, _ = pgs([*again, "--output-dir", str(tmp_path / "again")], pgs_env(), elsewhere)
        assert rerun.returncode == 0, rerun.stderr
        assert len(server.requests) == 4  # both runs' two calls reached it


# --------------------------------------------------------------------------- every command


VERIFIED = ROOT / "tests" / "data" / "verified-dev.jsonl"


@pytest.mark.parametrize("command", ["batch", "select", "ladder"])
def test_every_command_with_a_model_checks_it_before_any_work(
    command: str, tmp_path: Path, no_docker: dict[str, str]
) -> None:
    # The commands of many instances: a server that is not there is one line, before any
    # image, sandbox or row, and nothing is written.
    url = f"http://127.0.0.1:{closed_port()}/v1"
    out = tmp_path / "out"
    model = ["--model.name", "scripted", "--model.base-url", url]
    model += ["--model.prices", '{"scripted": [0, 0]}']
    if command == "batch":
        argv = ["batch", "--instances", str(VERIFIED), "--output-dir", str(out), *model]
    elif command == "select":
        preds = tmp_path / "preds.json"
        preds.write_text(json.dumps({"x": {"instance_id": "x", "model_patch": "diff"}}))
        argv = ["select", "--predictions", str(preds), "--instances", str(VERIFIED)]
        argv += ["--output-dir", str(out), *model]
    else:
        argv = ["ladder", "--examples", "median", "--output-dir", str(out), *model]
    done, took = pgs(argv, no_docker)
    assert done.returncode == 2 and took < QUICK, done.stderr
    line = one_line(done)
    assert f"cannot reach the model's server at {url} (connection refused" in line
    assert not out.exists()
