"""The tokenizer warning (a non-OpenAI model's inputs counted by the simple rule) is one line
per ``pgs`` process (issue 32): not again as a status line, nor once per attempt or per Tester.
``pgs run`` as a user starts it, into a pipe, with two attempts sharing one Tester (before, five
lines), the scripted model over HTTP and the local sandbox (tests/cli/test_live_view.py's)."""

from __future__ import annotations

from pathlib import Path

from agent.models.script_server import ScriptedServer
from tests.cli.test_live_view import in_pipe, policy, run_argv
from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, pgs_env

WARNING = "counting feedback tokens with the simple regex rule, not the model's tokenizer"


def test_the_tokenizer_warning_is_one_line_per_process(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    attempts = ["--attempts", "2", "--attempts-stop-on", "never"]
    with ScriptedServer(policy) as server:
        code, _, stderr = in_pipe(
            run_argv(repo, server.url, tmp_path / "out", *attempts), pgs_env()
        )
    assert code == 0, stderr
    assert "attempt 2/2" in stderr  # both attempts ran, each with its PGS check
    assert stderr.count(WARNING) == 1, stderr
