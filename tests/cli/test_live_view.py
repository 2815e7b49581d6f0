"""What a user watching ``pgs run`` sees, and the files a run leaves beside its ``.traj``.

``pgs`` runs as a user starts it, in a subprocess: under a pseudo-terminal (the live view:
each step's thought, action and folded observation, the PGS round with its counterexample and
verdict, in colour), into a pipe (the same lines, no control code), with ``--quiet`` (one
spinner line, then the report). The model is the scripted server over HTTP, the sandbox the
local one, the check real pytest and Hypothesis. A secret of the host's environment that the
model repeats never reaches the screen, the ``.log`` or the ``.config.yaml``; the resolved
config, passed back to ``--config``, reproduces the run's configuration.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.run.config import load_config
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, ISSUE, MODEL, bash, call, pgs_env

#: A host secret (its name ends with TOKEN) that the model repeats in a thought and an output.
CANARY = "canary-7d1e5a90b2c4f3e8"
SECRET_ENV = {"PGS_VIEW_TEST_TOKEN": CANARY}
TESTER_PROMPT = "You are a test engineer"
PROPERTY = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from textutil import shout

pytestmark = pytest.mark.pgs_issue("shout upper-cases the text and adds one '!'")


@given(st.text(alphabet="ab", max_size=4))
def test_shout_upper_cases(s):
    assert shout(s) == s.upper() + "!"
"""
#: The Generator: look (a long output, folded), a wrong fix (capitalize), submit.
GENERATOR = [
    bash(f"echo {CANARY}; cat textutil.py; seq 1 40", f"Look at the code; my note: {CANARY}."),
    bash(
        "sed -i 's/text.lower()/text.capitalize()/' textutil.py",
        "It lower-cases; capitalising should do.",
    ),
    call("submit", "Fixed."),
]
#: The Tester: one issue property, then submit.
TESTER = [
    bash(
        f"mkdir -p .pgs/properties && cat > .pgs/properties/test_shout.py <<'EOF'\n{PROPERTY}EOF",
        "The rule: the whole text upper-cased.",
    ),
    call("submit", "Properties written."),
]
ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>])")


def policy(request: dict[str, Any]) -> Any:
    tester = str(request["messages"][0]["content"]).startswith(TESTER_PROMPT)
    steps = TESTER if tester else GENERATOR
    n = sum(m["role"] == "assistant" for m in request["messages"])
    return steps[n] if n < len(steps) else None


def run_argv(repo: Path, url: str, out: Path, *extra: str) -> list[str]:
    """``pgs run`` with PGS on (one candidate checked, no feedback round), the local sandbox."""
    check = {"python": sys.executable, "max_examples": 30, "test_timeout": 20}
    return [
        "run",
        "--repo",
        str(repo),
        "--issue",
        ISSUE,
        "--model",
        MODEL,
        "--base-url",
        url,
        "--model.prices",
        json.dumps({MODEL: [0, 0]}),
        "--model.retries",
        json.dumps({"attempts": 1}),
        "--sandbox",
        "local",
        "--rounds",
        "0",
        "--pgs.fresh-probes",
        "0",
        "--pgs.check",
        json.dumps(check),
        "--pgs.seed",
        "1",
        "--output-dir",
        str(out),
        *extra,
    ]


def in_terminal(
    argv: list[str], env: Mapping[str, str], timeout: float = 600, columns: int = 120
) -> tuple[int, str]:
    """``python -m agent.cli ARGV`` with a pseudo-terminal (120 columns) as its stdin, stdout
    and stderr, as a user's shell starts it; its exit code and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=dict(env),
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def in_pipe(argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", *argv],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout, done.stderr


CSI = re.compile(r"\x1b\[([0-9;?]*)([ -/]*[@-~])")


def plain(screen: str) -> str:
    """The lines a terminal shows (and keeps in its scrollback) after ``screen`` was written
    to it: carriage returns, erased lines and cursor moves up applied, colours dropped."""
    lines: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(screen):
        match = CSI.match(screen, i)
        if match is not None:
            arg, kind = match.groups()
            if kind == "K" and arg == "2":
                lines[row] = []
            elif kind == "A":
                row = max(0, row - int(arg or 1))
            i = match.end()
            continue
        if screen[i] == "\x1b":  # another escape (a charset, an OSC): skip it
            other = ANSI.match(screen, i)
            i = other.end() if other else i + 1
            continue
        char = screen[i]
        i += 1
        if char == "\r":
            col = 0
        elif char == "\n":
            row, col = row + 1, 0
            while len(lines) <= row:
                lines.append([])
        else:
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
    return "\n".join("".join(line).rstrip() for line in lines)


@pytest.fixture
def env() -> dict[str, str]:
    # A colour terminal; nothing in the environment that turns colour or the view off.
    extra = {"TERM": "xterm-256color", **SECRET_ENV}
    base = pgs_env(**extra)
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "CI", "TTY_COMPATIBLE"):
        base.pop(name, None)
    return base


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "textutil", BUGGY)


def run_folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def test_the_live_view_shows_each_step_and_the_pgs_round_in_a_terminal(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    with ScriptedServer(policy) as server:
        code, screen = in_terminal(run_argv(repo, server.url, out), env)
    text = plain(screen)
    assert code == 0, text
    assert "\x1b[" in screen  # a terminal: colours and the spinner
    # Each step as it happened: the thought, the action, the head of the observation, folded.
    assert "thought: It lower-cases; capitalising should do." in text
    assert "action: sed -i 's/text.lower()/text.capitalize()/' textutil.py" in text
    assert "  | def shout(text):" in text
    assert "… 39 more lines" in text  # 1 echo + 3 file lines + 40 numbers, 5 shown
    assert "\n  | 40\n" not in text
    # The PGS round: the property, the counterexample, the verdict, why no feedback went.
    assert "PGS: the Tester is writing properties" in text
    assert "PGS round 1: verdict failed, 1 failing" in text
    assert ".pgs/properties/test_shout.py::test_shout_upper_cases" in text
    assert re.search(r"input: .*s='\w+'", text), text
    assert "no feedback: all 0 rounds used" in text
    # Then the report.
    assert "exit status: submitted" in text and "verdict: failed" in text
    # The secret the model repeated: never on the screen, nor in any file of the run.
    assert CANARY not in screen
    assert "my note: ***." in text and "  | ***" in text
    folder = run_folder(out)
    name = folder.name
    files = {p.name for p in folder.iterdir()}
    assert {f"{name}.log", f"{name}.config.yaml", f"{name}.traj"} <= files
    for path in folder.iterdir():
        assert CANARY not in path.read_text(encoding="utf-8"), path.name
    # The log: timestamped, the same steps and round, pgs's own lines.
    log = (folder / f"{name}.log").read_text(encoding="utf-8")
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO ", log)
    assert "THOUGHT:\n  It lower-cases; capitalising should do." in log
    assert "… 39 more lines" in log
    assert "PGS round 1: verdict failed" in log and "input: " in log
    assert "exit status submitted after 3 steps" in log
    assert "httpcore" not in log and "DEBUG" not in log
    # The resolved config: every section, the key's variable named, no key.
    config = yaml.safe_load((folder / f"{name}.config.yaml").read_text(encoding="utf-8"))
    assert set(config) == {"model", "agent", "sandbox", "tools", "pgs"}
    assert config["model"]["api_key_env"] == "OPENAI_API_KEY"
    assert config["pgs"]["rounds"] == 0 and config["sandbox"]["type"] == "local"


def test_quiet_shows_one_line_and_the_report(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    with ScriptedServer(policy) as server:
        argv = run_argv(repo, server.url, out, "--quiet", "--feedback", "none")
        code, screen = in_terminal(argv, env)
    text = plain(screen)
    assert code == 0, text
    assert "exit status: submitted" in text
    for shown in ("thought:", "action:", "  | ", "more lines", "Look at the code", "PGS round"):
        assert shown not in text, shown
    # The files are the same as without --quiet.
    folder = run_folder(out)
    assert (folder / f"{folder.name}.log").is_file()
    assert (folder / f"{folder.name}.config.yaml").is_file()


def test_a_pipe_gets_the_same_lines_without_control_codes(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    with ScriptedServer(policy) as server:
        code, stdout, stderr = in_pipe(run_argv(repo, server.url, out, "--feedback", "none"), env)
    assert code == 0, stderr
    assert "\x1b" not in stderr and "\x1b" not in stdout and "\r" not in stderr
    assert "thought: It lower-cases; capitalising should do." in stderr
    assert "action: sed -i" in stderr and "… 39 more lines" in stderr
    assert "exit status: submitted" in stderr
    assert "+    return text.capitalize()" in stdout  # the patch, alone on stdout
    assert CANARY not in stderr + stdout


def test_verbose_shows_pgs_debug_not_the_libraries(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    with ScriptedServer(policy) as server:
        argv = run_argv(repo, server.url, tmp_path / "v", "--feedback", "none")
        _, _, verbose = in_pipe(["-v", *argv], env)
    with ScriptedServer(policy) as server:
        argv = run_argv(repo, server.url, tmp_path / "vv", "--feedback", "none")
        _, _, very = in_pipe(["-vv", *argv], env)
    debug = [line for line in verbose.splitlines() if line.startswith("pgs: DEBUG:")]
    assert debug, verbose  # pgs's own
    libraries = ("httpcore", "httpx", "urllib3", "docker", "openai._base_client")
    assert not any(name in verbose for name in ("httpcore", "connect_tcp")), verbose
    # The steps are shown once: the live view's lines, not again as log records.
    assert verbose.count("thought: It lower-cases") == 1 and "THOUGHT:" not in verbose
    # -vv: the libraries' debug too (the openai client's HTTP requests).
    assert len(very.splitlines()) > len(verbose.splitlines())
    assert any(name in very for name in libraries)
    assert CANARY not in verbose + very


def test_the_resolved_config_runs_again_with_the_same_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    repo = make_repo(tmp_path / "textutil", BUGGY)
    steps = [bash("sed -i 's/lower/upper/' textutil.py", "Fix it."), call("submit", "Done.")]
    with ScriptedServer(steps * 2) as server:
        first = run_argv(repo, server.url, tmp_path / "one", "--feedback", "none")
        first += ["--agent.step-limit", "7", "--model.temperature", "0.3"]
        first += ["--sandbox.env", json.dumps({"GREETING": "hello"})]
        assert main(first) == 0
        written = run_folder(tmp_path / "one") / f"{run_folder(tmp_path / 'one').name}.config.yaml"
        again = ["run", "--repo", str(repo), "--issue", ISSUE, "--config", str(written)]
        assert main([*again, "--output-dir", str(tmp_path / "two")]) == 0
    capsys.readouterr()
    second = run_folder(tmp_path / "two") / written.name
    assert second.read_text() == written.read_text()
    config = load_config([written], {})
    assert config.agent.step_limit == 7 and config.model.temperature == 0.3
    assert config.pgs.feedback == "none" and config.pgs.rounds == 0
    assert config.sandbox.type == "local" and config.sandbox.env == {"GREETING": "hello"}
