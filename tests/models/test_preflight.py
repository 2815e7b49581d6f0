"""The model's server and key are checked before any image or sandbox work (issue 32): a
refused key, a server that is down, a host name that does not resolve, a base URL without a
scheme and OpenAI without a key are each one ``pgs: error:`` line within seconds, naming the
URL, the key's variable and the fix, never the key. No placeholder key is ever sent: without
a key a local server gets no Authorization header. The saved ``<id>.config.yaml`` records the
base URL a ``.env`` file gave, so ``--config`` of it reaches the same server elsewhere.

``pgs`` runs in this process, as a user's command line (tests/support/inprocess.py: nothing
here is about the process; a refusal is one request, no retries, whatever the run's retries);
Docker is pointed at a closed port with ``--sandbox docker``, so a run that got as far as the
sandbox would fail with Docker's error (exit code 3), not the model's. The servers are real HTTP
servers on 127.0.0.1: the scripted model (agent/models/script_server.py) and small ones that
answer 401 or 404 and record each request's Authorization header, or count the connections
they drop.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.models.script_server import ScriptedServer
from tests.support.inprocess import Ran, run_pgs
from tests.support.repos import make_repo
from tests.support.textutil import (
    BUGGY,
    ISSUE,
    MODEL,
    ROOT,
    SUBMIT,
    bash,
    closed_port,
    run_argv,
)

KEY = "sk-test-Zq8pX2vLr7NcY4"  # a key of the test's own: it must never be printed
FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py")
Capture = pytest.CaptureFixture[str]


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
    yield {"DOCKER_HOST": f"tcp://127.0.0.1:{closed_port()}"}


def pgs(
    capfd: Capture, argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT, **kw: Any
) -> Ran:
    return run_pgs(argv, capfd, cwd=cwd, env=env, **kw)


def one_line(done: Ran) -> str:
    """The run's only stderr line, a ``pgs: error:``; no traceback, and the key nowhere."""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgs: error: "), done.stderr
    assert KEY not in done.stderr + done.stdout
    return lines[0]


def docker_run(repo: Path, url: str, out: Path, *extra: str) -> list[str]:
    return run_argv(repo, "--sandbox", "docker", "--output-dir", str(out), *extra, url=url)


# --------------------------------------------------------------------------- refused before


def test_a_refused_key_is_one_line_before_the_sandbox(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    with Recorder(status=401) as server:
        done = pgs(capfd, docker_run(repo, server.url, tmp_path / "out"), no_docker)
        env = no_docker | {"OPENAI_API_KEY": KEY}
        keyed = pgs(capfd, docker_run(repo, server.url, tmp_path / "out"), env)
    assert done.returncode == 2
    line = one_line(done)
    assert f"{server.url} refused the API key of OPENAI_API_KEY (it is unset" in line
    assert "set OPENAI_API_KEY to a valid key" in line
    assert keyed.returncode == 2
    assert "refused the API key of OPENAI_API_KEY (HTTP 401)" in one_line(keyed)
    assert [(m, p) for m, p, _ in server.seen] == [("GET", "/v1/models")] * 2  # no chat call
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["a closed port", "a host name that does not resolve"])
def test_a_server_that_is_not_there_is_one_line_before_the_sandbox(
    where: str, repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    if where == "a closed port":
        url, reason = f"http://127.0.0.1:{closed_port()}/v1", "connection refused"
    else:
        url = "http://no-such-model-server.invalid:8000/v1"
        reason = "the host name does not resolve"
    done = pgs(capfd, docker_run(repo, url, tmp_path / "out"), no_docker)
    assert done.returncode == 2
    line = one_line(done)
    assert f"cannot reach the model's server at {url} ({reason}" in line
    assert f"is the server running at {url}? start it, or fix --base-url" in line
    assert "attempt" not in line  # one try, not the run's retries


class Dropper:
    """A TCP server on 127.0.0.1 that closes every connection it accepts, counting them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.accepted = 0

    def __enter__(self) -> Dropper:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.accepted += 1
            conn.close()

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_the_check_is_one_try_whatever_the_runs_retries(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    # A server that drops the connection is what the run's retries are for (a connection
    # error); the check before the run asks once, so a server that is not there costs seconds.
    retries = json.dumps({"attempts": 4, "min_wait": 0.01, "max_wait": 0.02})
    with Dropper() as server:
        argv = docker_run(repo, server.url, tmp_path / "out", "--model.retries", retries)
        done = pgs(capfd, argv, no_docker)
    assert done.returncode == 2
    assert f"cannot reach the model's server at {server.url}" in one_line(done)
    assert server.accepted == 1
    assert not (tmp_path / "out").exists()


def test_a_base_url_from_the_environment_is_named_as_such(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    argv = run_argv(repo, "--sandbox", "docker", "--output-dir", str(tmp_path / "out"))
    argv.remove("--base-url")
    argv.remove("http://127.0.0.1:9/v1")
    done = pgs(capfd, argv, no_docker | {"OPENAI_BASE_URL": url})
    assert done.returncode == 2
    assert f"is the server running at {url}? start it, or fix OPENAI_BASE_URL" in one_line(done)
    done = pgs(capfd, argv, no_docker | {"OPENAI_BASE_URL": "localhost:8000"})
    assert done.returncode == 2
    assert one_line(done) == (
        "pgs: error: OPENAI_BASE_URL: 'localhost:8000' has no http:// or https:// scheme: "
        "write http://localhost:8000 (or https://localhost:8000)"
    )


def test_a_base_url_without_a_scheme_is_refused_when_parsed(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    done = pgs(capfd, docker_run(repo, "localhost:8000", tmp_path / "out"), no_docker)
    assert done.returncode == 2
    assert one_line(done) == (
        "pgs: error: --model.base-url: 'localhost:8000' has no http:// or https:// scheme: "
        "write http://localhost:8000 (or https://localhost:8000)"
    )


def test_openai_without_a_key_is_refused_at_once(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    argv = ["run", "--repo", str(repo), "--issue", ISSUE, "--model", "gpt-4o-mini"]
    done = pgs(capfd, [*argv, "--output-dir", str(tmp_path / "out")], no_docker)
    assert done.returncode == 2
    assert one_line(done) == (
        "pgs: error: no API key for https://api.openai.com/v1: set OPENAI_API_KEY to your "
        "OpenAI key (or pass --base-url for a server of your own, which needs none)"
    )


def test_the_demo_with_a_real_model_checks_it_before_the_image(
    tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    env = no_docker | {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": url}
    done = pgs(capfd, ["demo", "--output-dir", str(tmp_path / "demo")], env)
    assert done.returncode == 2
    assert f"cannot reach the model's server at {url}" in one_line(done)


def test_a_server_without_models_is_reachable(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    # Some servers have no GET /models: the run goes on, and meets the closed Docker port.
    with Recorder(status=404) as server:
        done = pgs(capfd, docker_run(repo, server.url, tmp_path / "out"), no_docker)
    assert done.returncode == 3, done.stderr
    assert "DOCKER_HOST" in done.stderr and "cannot reach the model" not in done.stderr
    assert [(m, p) for m, p, _ in server.seen] == [("GET", "/v1/models")]


def test_the_check_can_be_turned_off(
    repo: Path, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"  # a server that comes up later
    argv = docker_run(repo, url, tmp_path / "out", "--no-model.check-endpoint")
    done = pgs(capfd, argv, no_docker)
    assert done.returncode == 3, done.stderr  # Docker's error: the model was not asked


# --------------------------------------------------------------------------- no placeholder key


def test_no_key_means_no_authorization_header(repo: Path, tmp_path: Path, capfd: Capture) -> None:
    with Recorder() as server:
        argv = run_argv(
            repo, "--sandbox", "local", "--output-dir", str(tmp_path / "a"), url=server.url
        )
        done = pgs(capfd, argv)
        unkeyed = list(server.seen)
        server.seen.clear()
        argv = [a if a != str(tmp_path / "a") else str(tmp_path / "b") for a in argv]
        keyed = pgs(capfd, argv, {"OPENAI_API_KEY": KEY})
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


def test_the_saved_config_records_the_base_url_a_dot_env_gave(
    repo: Path, tmp_path: Path, capfd: Capture
) -> None:
    home = tmp_path / "home"  # where the user keeps .env, outside the repository
    home.mkdir()
    out = tmp_path / "out"
    argv = run_argv(repo, "--sandbox", "local", "--output-dir", str(out))
    argv.remove("--base-url")
    argv.remove("http://127.0.0.1:9/v1")
    with ScriptedServer([FIX, SUBMIT, FIX, SUBMIT]) as server:
        (home / ".env").write_text(f"OPENAI_BASE_URL={server.url}\n")
        done = pgs(capfd, argv, cwd=home, unset=["PYTHON_DOTENV_DISABLED"])
        assert done.returncode == 0, done.stderr
        (saved,) = out.glob("*/*.config.yaml")
        model = yaml.safe_load(saved.read_text())["model"]
        assert model["base_url"] == server.url
        assert model["api_key_env"] == "OPENAI_API_KEY"  # the variable's name, never a key
        # Elsewhere, without the .env: the saved config reaches the same server.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        again = ["run", "--repo", str(repo), "--issue", ISSUE, "--config", str(saved)]
        rerun = pgs(capfd, [*again, "--output-dir", str(tmp_path / "again")], cwd=elsewhere)
        assert rerun.returncode == 0, rerun.stderr
        assert len(server.requests) == 4  # both runs' two calls reached it


# --------------------------------------------------------------------------- every command


VERIFIED = ROOT / "tests" / "data" / "verified-dev.jsonl"


@pytest.mark.parametrize("command", ["batch", "select", "ladder"])
def test_every_command_with_a_model_checks_it_before_any_work(
    command: str, tmp_path: Path, no_docker: dict[str, str], capfd: Capture
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
    done = pgs(capfd, argv, no_docker)
    assert done.returncode == 2, done.stderr
    line = one_line(done)
    assert f"cannot reach the model's server at {url} (connection refused" in line
    assert not out.exists()
