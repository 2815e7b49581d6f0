"""Where a run's files go: one typed record (:class:`agent.run.outputs.RunPaths`) that hooks,
``pgs run``, ``pgs batch`` and the attempts share."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent.run.outputs import output_paths
from agent.run.run_attempts import attempt_paths


def test_a_runs_files_are_named_after_its_instance_in_its_folder(tmp_path: Path) -> None:
    paths = output_paths(tmp_path, "repo__1")
    assert paths.folder == tmp_path / "repo__1"
    assert {name: path.name for name, path in paths.files().items()} == {
        "traj": "repo__1.traj",
        "patch": "repo__1.patch",
        "pred": "repo__1.pred",
        "properties": "repo__1.properties.patch",
        "log": "repo__1.log",
        "config": "repo__1.config.yaml",
    }
    assert paths.results() == (paths.traj, paths.patch, paths.pred, paths.properties)
    with pytest.raises(dataclasses.FrozenInstanceError):
        paths.traj = tmp_path  # type: ignore[misc]


def test_an_attempts_files_have_the_same_names_in_its_folder(tmp_path: Path) -> None:
    main, second = output_paths(tmp_path, "i"), attempt_paths(tmp_path, "i", 2)
    assert second.folder == tmp_path / "i" / "attempt-2"
    assert [p.name for p in second.files().values()] == [p.name for p in main.files().values()]
