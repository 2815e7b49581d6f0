"""The files ``pgs batch`` leaves besides the predictions, through the real command: each
instance's ``<id>.log`` (its own steps only, though two run at once) and ``<id>.config.yaml``,
the batch's ``batch.log`` and ``run_batch_exit_statuses.yaml`` (SWE-agent's format), merged
as a resume reruns an instance. A host secret the model repeats is in none of them.

The local sandbox and the scripted model server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.run.outputs import output_paths
from tests.support.swe_dataset import Dataset, batch_args, make_dataset

IDS = [f"acme__textkit-{n}" for n in (1, 2, 3, 4)]
CANARY = "canary-batch-51f0c9e2a7"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


@pytest.fixture
def four(dataset: Dataset, tmp_path: Path) -> Path:
    """Four instances: the dataset's two (slugify, count_words) and a copy of each."""
    first, second = dataset.records
    records = [first, second, {**first, "instance_id": IDS[2]}, {**second, "instance_id": IDS[3]}]
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(records))
    return path


def bash(command: str, thought: str) -> dict[str, Any]:
    return {"content": thought, "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def slugify_only(request: dict[str, Any]) -> dict[str, Any]:
    """The slugify instances: one edit, then submit; the count_words ones: looking around until
    the step limit ends them. Each thought repeats the host's secret."""
    issue = str(request["messages"][1]["content"])
    n = sum(m["role"] == "assistant" for m in request["messages"])
    if "count_words" in issue:
        return bash(f"ls # look {n}", f"Still looking ({CANARY}).")
    if n == 0:
        return bash("echo '# checked' >> textkit/core.py", f"Edit it ({CANARY}).")
    return {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}


def everything_submits(request: dict[str, Any]) -> dict[str, Any]:
    n = sum(m["role"] == "assistant" for m in request["messages"])
    if n == 0:
        return bash("echo '# checked' >> textkit/core.py", "Edit it.")
    return {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}


def test_a_batch_writes_each_instance_s_log_and_config_and_its_exit_statuses(
    dataset: Dataset,
    four: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PGS_BATCH_TEST_TOKEN", CANARY)
    out = tmp_path / "run"
    flags = ("--sandbox", "local", "--workers", "2", "--agent.step-limit", "3")
    with ScriptedServer(slugify_only) as server:
        code = main(batch_args(dataset, server.url, out, *flags, instances=four))
    err = capsys.readouterr().err
    assert code == 0, err  # every instance submitted, two at the step limit
    # The progress display: one line per instance finished, never a step of a worker.
    for iid in IDS:
        assert iid in err
    assert "thought:" not in err and "Still looking" not in err

    statuses = yaml.safe_load((out / "run_batch_exit_statuses.yaml").read_text())
    by_status = statuses["instances_by_exit_status"]
    # (a limit that leaves a diff submits it, as SWE-agent's autosubmission does)
    assert sorted(by_status) == ["submitted", "submitted (exit_step_limit)"]
    assert sorted(by_status["submitted"]) == [IDS[0], IDS[2]]
    assert sorted(by_status["submitted (exit_step_limit)"]) == [IDS[1], IDS[3]]
    assert "total_cost" in statuses

    for iid in IDS:
        paths = output_paths(out, iid)
        log = paths.log.read_text(encoding="utf-8")
        assert f"run of {iid}:" in log
        others = [other for other in IDS if other != iid]
        assert not any(f"run of {other}:" in log for other in others)  # its own lines only
        assert "THOUGHT:" in log and "ACTION:" in log
        config = yaml.safe_load(paths.config.read_text(encoding="utf-8"))
        assert config["agent"]["step_limit"] == 3 and config["sandbox"]["type"] == "local"
    slug = output_paths(out, IDS[0]).log.read_text(encoding="utf-8")
    assert "exit status submitted after 2 steps" in slug and "Still looking" not in slug
    words = output_paths(out, IDS[1]).log.read_text(encoding="utf-8")
    assert "Still looking (***)" in words
    assert "exit status submitted (exit_step_limit) after 3 steps" in words

    batch_log = (out / "batch.log").read_text(encoding="utf-8")
    assert "batch of 4 instances (2 workers)" in batch_log
    for iid in IDS:
        assert f"{iid}: " in batch_log
    assert "THOUGHT:" not in batch_log  # the steps are in each instance's own log
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".yaml", ".traj", ".json"):
            assert CANARY not in path.read_text(encoding="utf-8"), path

    # A resume that reruns one instance moves it to its new status and keeps the others.
    with ScriptedServer(everything_submits) as server:
        rerun = (*flags, "--redo", "--filter", IDS[1])
        assert main(batch_args(dataset, server.url, out, *rerun, instances=four)) == 0
    capsys.readouterr()
    by_status = yaml.safe_load((out / "run_batch_exit_statuses.yaml").read_text())[
        "instances_by_exit_status"
    ]
    assert sorted(by_status["submitted"]) == [IDS[0], IDS[1], IDS[2]]
    assert by_status["submitted (exit_step_limit)"] == [IDS[3]]
    assert (out / "batch.log").read_text(encoding="utf-8").count("batch of ") == 2
