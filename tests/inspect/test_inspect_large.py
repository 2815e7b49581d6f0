"""``pgs inspect`` on a large run: 300 steps with 1 MB outputs. The page stays under 5 MB, outputs
are folded and cut, and each cut links to a file holding the whole output (the time is measured
in bench/inspector.py, not here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from agent.inspect.html import OBSERVATION_LIMIT
from tests.support.inspect_pages import inspect_cli, parse


def test_a_300_step_run_with_1_mb_outputs_stays_small_and_links_every_full_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def output(i: int) -> str:
        line = f"step {i:03d}: " + "x" * 50 + "\n"
        return (line * (1_000_000 // len(line) + 1))[:1_000_000]

    steps = 300
    data = {
        "trajectory": [
            {
                "action": f"cat big_{i}.log",
                "observation": output(i),
                "thought": f"Read log {i}.",
                "response": f"Read log {i}.",
                "execution_time": 0.1,
                "state": {},
            }
            for i in range(1, steps + 1)
        ],
        "history": [{"role": "user", "content": "<issue>\nlogs are long\n</issue>"}],
        "info": {
            "exit_status": "submitted",
            "submission": "",
            "model_stats": {"instance_cost": 1.0},
        },
        "replay_config": {},
    }
    traj = tmp_path / "big" / "big.traj"
    traj.parent.mkdir()
    traj.write_text(json.dumps(data))
    del data
    try:
        page = inspect_cli(capsys, str(traj))
        html = page.read_text()
        assert len(html.encode()) < 5_000_000
        dom = parse(html)
        sections = dom.one(id="step-list").all("section", class_="step")
        assert len(sections) == steps
        for i, section in enumerate(sections, start=1):
            details = section.one("details")
            assert "open" not in details.attrs  # folded
            head, tail = (p.text() for p in details.all("pre"))  # the start and the end
            whole = output(i)
            assert whole.startswith(head) and whole.endswith(tail) and head and tail
            assert len(head) + len(tail) <= OBSERVATION_LIMIT
            cut = details.one("p", class_="cut")
            assert "not shown here" in cut.text()
            link = cut.one("a").attrs["href"]
            full = Path(unquote(urlparse(urljoin(page.as_uri(), link)).path))
            assert full.parent == page.with_name("big.files")
            if i in (1, 150, steps):  # read whole: the full text, as the run recorded it
                assert full.read_text(encoding="utf-8-sig") == output(i)
            else:
                assert full.stat().st_size == 1_000_000 + 3  # and its BOM
    finally:
        shutil.rmtree(tmp_path / "big", ignore_errors=True)
