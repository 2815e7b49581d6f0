"""How long ``pgs inspect`` takes on a large run, and how big its page is.

    .venv/bin/python bench/inspector.py [--steps 300] [--observation-mb 1] [--repeat 3]

A synthetic trajectory in pgs's layout: ``--steps`` steps, each with an observation of
``--observation-mb`` MB (distinct log-like lines), a thought and an action, plus a PGS record
with two rounds (candidate diffs, a failing property with its counterexample, the feedback
message). It is written as a real ``.traj`` and inspected the way ``pgs inspect PATH`` does it,
in one process, ``--repeat`` times (the median is printed):

- load: read and parse the ``.traj`` into the inspector's records (``load_trajectory``);
- render: the page as a string (``render_trajectory``);
- write: the page and the full texts of its cut outputs beside it (``Page.write``).

Side by side, in the same process and on the same data:

- ``json.dumps`` of the whole trajectory (what merely serialising the data costs);
- the page rendered without cutting anything (every limit set past the longest text): the
  folding and cutting's effect on time and size.

Printed: ``inspect_total_s=<load + render + write, median>`` (what ``pgs inspect`` takes), then,
last line, ``inspect_render_s=<render, median>`` (the page from the loaded records).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, where this file would stand in
# for the standard library's inspect module: the folder goes, the repository comes.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import shutil
import statistics
import tempfile
import time
from typing import Any

from agent.inspect.html import Page, render_trajectory
from agent.inspect.load import load_trajectory

PATCH_1 = """diff --git a/stats.py b/stats.py
--- a/stats.py
+++ b/stats.py
@@ -13,4 +13,7 @@ def median(values):
     if not values:
         raise ValueError("median of an empty list")
     ordered = sorted(values)
-    return ordered[len(ordered) // 2]
+    middle = len(ordered) // 2
+    if len(ordered) % 2:
+        return ordered[middle]
+    return (values[middle - 1] + values[middle]) / 2
"""
PATCH_2 = PATCH_1.replace(
    "(values[middle - 1] + values[middle])", "(ordered[middle - 1] + ordered[middle])"
)


def observation(step: int, size: int) -> str:
    lines = []
    total = 0
    i = 0
    while total < size:
        line = f"step {step:03d} line {i:06d}: collected item {i * 7919 % 100003} ok\n"
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)[:size]


def make_trajectory(steps: int, size: int) -> dict[str, Any]:
    trajectory = [
        {
            "action": f"python -m pytest -q tests/test_{i}.py",
            "observation": observation(i, size),
            "response": f"Step {i}: run the tests of module {i} and read the failures.",
            "thought": f"Step {i}: run the tests of module {i} and read the failures.",
            "execution_time": 0.5,
            "state": {"working_dir": "/repo"},
            "query": [],
            "tool": "bash",
            "exit_code": 1,
        }
        for i in range(1, steps + 1)
    ]
    failing = {
        "nodeid": ".pgs/properties/test_median.py::test_even",
        "kind": "issue",
        "rule": "for an even count the median is the mean of the two middle values",
        "outcome": "failed",
        "category": "property_violation",
        "example": "test_even(values=[0, 0, 1, 0])",
        "returned": "assert 0.5 == 0.0",
        "examples": [],
    }
    return {
        "trajectory": trajectory,
        "history": [{"role": "user", "content": "<issue>\nmedian() is wrong\n</issue>"}],
        "info": {
            "exit_status": "submitted",
            "submission": PATCH_2,
            "model_stats": {"instance_cost": 1.5, "tokens_sent": 10**6, "tokens_received": 10**4},
            "duration": 1234.5,
        },
        "replay_config": {"model": {"name": "bench"}, "sandbox": {}, "tools": {}},
        "pgs": {
            "mode": "property-min",
            "verdict": "passed",
            "verdict_reason": "1 issue property that failed on the original code passes",
            "properties": {".pgs/properties/test_median.py": "def test_even(): ...\n"},
            "validation": {"kept": [failing["nodeid"]], "dropped": []},
            "tester_turns": [],
            "rounds": [
                {
                    "round": 1,
                    "patch": PATCH_1,
                    "report": {"results": [failing]},
                    "verdict": "failed",
                    "selection": {
                        "result": failing,
                        "chosen": {"example": failing["example"]},
                        "input": "values=[0, 0, 1, 0]",
                        "tokens": 11,
                        "counter": "simple",
                        "candidates": 1,
                        "why": "1 property violation; chose the one whose input has 11 tokens",
                    },
                    "feedback": "Round 1 of 5. Property violated: ...",
                },
                {"round": 2, "patch": PATCH_2, "report": {"results": []}, "verdict": "passed"},
            ],
        },
    }


def inspect_once(traj_path: Path, out: Path) -> tuple[float, float, float, int, int, int]:
    start = time.perf_counter()
    traj = load_trajectory(traj_path)
    loaded = time.perf_counter()
    page = Page(out)
    html = render_trajectory(traj, page)
    rendered = time.perf_counter()
    written = page.write(html)
    done = time.perf_counter()
    return (
        loaded - start,
        rendered - loaded,
        done - rendered,
        written.size,
        written.sidecars,
        written.sidecar_bytes,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--observation-mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.steps, args.observation_mb, args.repeat = 10, 0.01, 1
    size = int(args.observation_mb * 1_000_000)
    tmp = Path(tempfile.mkdtemp(prefix="pgs-bench-inspect-"))
    try:
        data = make_trajectory(args.steps, size)
        traj_path = tmp / "bench.traj"
        traj_path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        print(
            f"trajectory: {args.steps} steps, {size:,} characters of output each, "
            f"{traj_path.stat().st_size / 1e6:.0f} MB on disk"
        )

        runs = [inspect_once(traj_path, tmp / f"page-{i}.html") for i in range(args.repeat)]
        load_s = statistics.median(r[0] for r in runs)
        render_s = statistics.median(r[1] for r in runs)
        write_s = statistics.median(r[2] for r in runs)
        total = statistics.median(r[0] + r[1] + r[2] for r in runs)
        _, _, _, page_bytes, sidecars, sidecar_bytes = runs[-1]
        print(f"load (read + parse + records): {load_s:.2f} s")
        print(f"render (the page as a string): {render_s:.3f} s")
        print(
            f"write (page + {sidecars} full texts, {sidecar_bytes / 1e6:.0f} MB): {write_s:.2f} s"
        )
        print(f"pgs inspect in all: {total:.2f} s (median of {args.repeat})")
        print(f"page: {page_bytes / 1e6:.2f} MB (limit 5 MB)")

        start = time.perf_counter()
        dumped = json.dumps(data)
        dump_s = time.perf_counter() - start
        print(
            f"json.dumps of the whole trajectory: {dump_s:.2f} s, {len(dumped) / 1e6:.0f} MB; "
            f"ratio render / json.dumps: {render_s / dump_s:.2f}"
        )
        del dumped

        traj = load_trajectory(traj_path)
        uncut = Page(tmp / "uncut.html")
        for limit in ("observation", "text", "issue", "feedback", "source"):
            setattr(uncut, f"{limit}_limit", size * 2 + 1)
        uncut.diff_lines = 10**9
        start = time.perf_counter()
        html = render_trajectory(traj, uncut)
        uncut_s = time.perf_counter() - start
        print(
            f"render without cutting: {uncut_s:.2f} s, {len(html.encode()) / 1e6:.0f} MB; "
            f"ratio uncut / ours: time {uncut_s / render_s:.1f}, "
            f"size {len(html.encode()) / page_bytes:.0f}"
        )
        print(f"inspect_total_s={total:.2f}")
        print(f"inspect_render_s={render_s:.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
