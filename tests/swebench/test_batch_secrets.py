"""A batch writes no secret of the host: ``preds.json``, each ``.pred``, ``.patch`` and
``.traj``, and the terminal hold ``***`` in its place (agent/core/secrets.py)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.swe_dataset import Dataset, batch_args, make_dataset

CANARY = f"pw-canary-{uuid.uuid4().hex[:16]}"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def leaking(request: dict[str, Any]) -> dict[str, Any]:
    """A model that got hold of the secret (the policy knows it) and writes it into the code."""
    if not any(m["role"] == "assistant" for m in request["messages"]):
        command = f"printf 'PASSWORD = \"%s\"\\n' {CANARY} >> textkit/core.py && echo {CANARY}"
        return {"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}
    return {"content": "", "tool_calls": [{"name": "submit", "arguments": {}}]}


def test_a_batch_writes_no_secret(
    dataset: Dataset,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", CANARY)
    out = tmp_path / "run"
    with ScriptedServer(leaking) as server:
        code = main([*batch_args(dataset, server.url, out), "--sandbox", "local"])
    terminal = capsys.readouterr()

    assert code == 0, terminal.err
    preds = json.loads((out / "preds.json").read_text())
    assert len(preds) == 2
    for pred in preds.values():
        assert '+PASSWORD = "***"' in pred["model_patch"]
    files = [p for p in out.rglob("*") if p.is_file()]
    # The output folder's .gitignore (``*``, pgs made the folder) is checked for the canary too.
    assert out / ".gitignore" in files
    suffixes = {p.suffix for p in files if p.name != ".gitignore"}
    assert suffixes == {".json", ".traj", ".patch", ".pred", ".log", ".yaml"}
    for path in files:
        assert CANARY not in path.read_text(), path
    assert CANARY not in terminal.out + terminal.err
