"""The loaders of ``pgs inspect``: where they are imported from, and a damaged pgs record in a
batch."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_loaders_stay_importable_from_agent_inspect_load() -> None:
    """load.py re-exports what moved to trajectory_view.py and batch_view.py (issues 14, 34)."""
    import agent.inspect
    from agent.inspect import batch_view as batch
    from agent.inspect import lenient as fields
    from agent.inspect import trajectory_view as trajectory

    load = importlib.import_module("agent.inspect.load")  # the package's `load` is the function
    assert load.load_trajectory is trajectory.load_trajectory is agent.inspect.load_trajectory
    assert load.load_batch is batch.load_batch and load.InspectError is fields.InspectError
    assert all(hasattr(load, name) for name in load.__all__)


def test_a_batch_row_with_a_damaged_pgs_record_still_loads(tmp_path: Path) -> None:
    """A hand-edited or truncated record (a round that is not a table) must not stop the batch
    page: the row keeps what the trajectory itself says."""
    from agent.inspect.batch_view import load_batch

    data = json.loads((ROOT / "tests" / "data" / "pgs-demo-bce24f8.traj").read_text())
    data["pgs"]["rounds"] = ["not a round"]
    run = tmp_path / "batch" / "median-1"
    run.mkdir(parents=True)
    (run / "median-1.traj").write_text(json.dumps(data))
    [row] = load_batch(tmp_path / "batch").rows
    assert row.instance_id == "median-1"
    assert row.exit_status == "submitted"
