"""Whole runs with SWE-agent-style bundles (tests/tools/compat, described in
tests/tools/test_compat.py): the scripted model over HTTP, a real Docker sandbox, in function
calling and in text mode. What a user sees: the patch fixes the bug, the exit status, the
observations the model received (SWE-agent's template variables filled in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.repos import make_repo
from tests.support.textutil import BUGGY, call, hidden_tests_pass, last_message, run_agent

pytestmark = pytest.mark.docker

COMPAT = Path(__file__).resolve().parents[1] / "tools" / "compat"
FIXED_LINE = '    return text.upper() + "!"'
OFFLINE_CHECK = (
    "python3 -c 'import socket; socket.create_connection((\"pypi.org\", 443), 3)' "
    "2>/dev/null || echo offline"
)
#: SWE-agent's own observation template (config/default.yaml of its 0.7 configs).
OBSERVATION = "{{observation}}\n(Open file: {{open_file}})\n(Current directory: {{working_dir}})"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):  # the scripted model, never a real one
        monkeypatch.delenv(var, raising=False)
    return make_repo(tmp_path / "textutil", BUGGY)


def overrides(*bundles: str, text_mode: bool = False, **registry: Any) -> dict[str, Any]:
    return {
        "tools": {
            "bundles": [str(COMPAT / b) for b in bundles],
            "registry_variables": registry,
        },
        "agent": {"observation_template": OBSERVATION},
        "model": {"function_calling": not text_mode},
    }


def block(command: str) -> dict[str, Any]:
    return {"content": f"THOUGHT: next.\n\n```bash\n{command}\n```"}


@pytest.mark.parametrize("text_mode", [False, True], ids=["function-calling", "text"])
def test_windowed_edit_and_marker_submit_fix_the_bug(
    text_mode: bool, repo: Path, base_image: str, tmp_path: Path
) -> None:
    if text_mode:
        script = [
            block("peek textutil.py"),
            block(f"replace 3:3\n{FIXED_LINE}\nend_of_replace"),
            block("submit"),
        ]
    else:
        script = [
            call("peek", path="textutil.py"),
            call("replace", start=3, end=3, text=FIXED_LINE),
            call("submit"),
        ]
    bundles = ("kv", "pager", "marksubmit", "giveup")
    run = run_agent(
        repo,
        script,
        base_image,
        tmp_path / "out",
        overrides(*bundles, text_mode=text_mode, WINDOW=2),
    )

    assert run.result.exit_status == "submitted"
    patch = run.paths.patch.read_text()
    assert f"+{FIXED_LINE}" in patch
    assert hidden_tests_pass(repo, patch, tmp_path / "after")
    # The registry's WINDOW shows two lines; the state command's open file reaches the template.
    seen = last_message(run.requests[1])["content"]
    assert [line for line in seen.splitlines() if line][1:] == [
        "1:def shout(text):",
        '2:    """``text`` upper-cased, with one "!" after it."""',
        "(Open file: /repo/textutil.py)",
        "(Current directory: /repo)",
    ]
    system = run.requests[0]["messages"][0]["content"]
    if text_mode:  # the multi-line usage as SWE-agent documents it, and the window substituted
        assert "replace <start>:<end>\n<text>\nend_of_replace" in system
        assert "shows 2 lines" in system
    else:
        tools = {t["function"]["name"]: t["function"] for t in run.requests[0]["tools"]}
        assert tools["peek"]["description"].startswith("opens <path> and shows 2 lines")


def test_forfeit_ends_the_run(repo: Path, base_image: str, tmp_path: Path) -> None:
    run = run_agent(repo, [call("exit_forfeit")], base_image, tmp_path / "out", overrides("giveup"))
    assert run.result.exit_status == "exit_forfeit"
    assert run.paths.patch.read_text() == ""


def test_a_bundle_that_pip_installs_works_in_a_sandbox_without_network(
    repo: Path, base_image: str, tmp_path: Path
) -> None:
    script = [
        call("six_version"),
        call("bash", command=OFFLINE_CHECK),
        call("exit_forfeit"),
    ]
    run = run_agent(repo, script, base_image, tmp_path / "out", overrides("pipdep", "giveup"))
    assert last_message(run.requests[1])["content"].startswith("six 1.16.0")
    assert "offline" in last_message(run.requests[2])["content"]
    assert run.result.exit_status == "exit_forfeit"
