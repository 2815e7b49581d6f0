"""``pgs select`` on pgs's own ``--attempts`` output: a ``pgs batch --attempts 2`` folder is a
predictions source whose every attempt is a candidate (source ``<id>.traj#attempt-<k>``).

Through the real CLI, the scripted model server and Docker, on the dataset of
:mod:`tests.support.swe_dataset`: the scripted Generator's first attempt on ``acme__textkit-1``
joins the words with underscores (a related repository test breaks), its second makes the right
fix; the selection over the batch folder has both attempts as candidates and chooses the second
by the repository tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.swe_dataset import I1, Dataset, batch_args, make_dataset

pytestmark = pytest.mark.docker
BUGGY = '"-".join(text.split())'
EDITS = ['"_".join(text.lower().split())', '"-".join(text.lower().split())']


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("select-attempts"))


def two_attempts() -> Any:
    """A Generator whose first attempt breaks a repository test and whose second fixes it."""
    started = 0

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        nonlocal started
        system = str(request["messages"][0].get("content", ""))
        if "You are a test engineer" in system:  # the Tester writes nothing: tests only
            return {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}
        if not any(m["role"] == "assistant" for m in request["messages"]):
            started += 1
            new = EDITS[min(started, len(EDITS)) - 1]
            return {
                "content": "Edit it.",
                "tool_calls": [
                    {
                        "name": "str_replace_editor",
                        "arguments": {
                            "command": "str_replace",
                            "path": "/testbed/textkit/core.py",
                            "old_str": BUGGY,
                            "new_str": new,
                        },
                    }
                ],
            }
        return {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}

    return policy


def test_the_attempts_of_a_pgs_batch_are_the_candidates(dataset: Dataset, tmp_path: Path) -> None:
    records = tmp_path / "one.json"
    every = json.loads(dataset.instances_file.read_text())
    records.write_text(json.dumps([r for r in every if r["instance_id"] == I1]))
    runs, chosen = tmp_path / "runs", tmp_path / "select"
    with ScriptedServer(two_attempts()) as server:
        argv = batch_args(
            dataset, server.url, runs, "--attempts", "2", instances=records, feedback="io"
        )
        assert main(argv) == 0
    argv = ["select", "--predictions", str(runs), "--instances", str(records)]
    assert main([*argv, "--repos-dir", str(dataset.repos_dir), "--output-dir", str(chosen)]) == 0

    selection = json.loads((chosen / "selection.json").read_text())["instances"][I1]
    by_index = {c["index"]: c for c in selection["candidates"]}
    assert len(by_index) == 2
    sources = sorted(s["file"].rsplit("#", 1)[-1] for c in by_index.values() for s in c["sources"])
    assert sources == ["attempt-1", "attempt-2"]
    best = by_index[selection["chosen"]]
    other = next(c for c in by_index.values() if c is not best)
    assert EDITS[1] in best["patch"] and EDITS[0] in other["patch"]
    assert other["evidence"]["broken"] == ["tests/test_core.py::test_slugify_spaces"]
    assert "repository tests broken" in selection["reason"]
    preds = json.loads((chosen / "preds.json").read_text())
    assert preds[I1]["model_patch"] == best["patch"]
