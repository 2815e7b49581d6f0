"""Evaluation wall time per instance, warm images: ``--workers 1`` against ``--workers 2``.

    .venv/bin/python bench/eval.py [--rounds 3] [--copies 3]

The dataset is the test suite's (``tests/agent/swe_dataset.py``: a real repository with history,
a bare OWNER__NAME mirror, two instances), graded with the gold patches through
:func:`agent.evaluate.evaluate` in one process. Images are built (or found) once before the
timing, so each round measures what a warm ``pgs eval`` does per prediction: a fresh container
of the instance image, the model patch, the evaluation script (test_patch + pytest), swebench's
parser and grading, the report files. ``--copies`` repeats each instance under other ids (same
image) to give the workers something to share. Per worker count: the wall time of a round
divided by its predictions, median over rounds. Last line: eval_s_per_instance=<median, 1 worker>.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.evaluate import evaluate
from agent.swebench import Environments, Instance, load_instances
from tests.agent.swe_dataset import make_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copies", type=int, default=3, help="predictions per instance")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pgs-bench-eval-") as tmp:
        root = Path(tmp)
        dataset = make_dataset(root / "data")
        base = load_instances(dataset.instances_file)
        instances: list[Instance] = []
        for copy in range(args.copies):
            for i in base:
                record = {**i.record, "instance_id": f"{i.instance_id}-c{copy}"}
                instances.append(Instance.from_record(record))
        preds = {
            i.instance_id: {
                "instance_id": i.instance_id,
                "model_name_or_path": "gold",
                "model_patch": i.patch,
            }
            for i in instances
        }
        envs = Environments(dataset.repos_dir, {})
        started = time.monotonic()
        for i in base:  # warm: build or find each image once, outside the timing
            image = envs.image(i)
            for copy in range(args.copies):
                envs._done[f"{i.instance_id}-c{copy}"] = image
        print(f"images ready in {time.monotonic() - started:.1f}s (cached by content)")

        results: dict[int, list[float]] = {1: [], 2: []}
        for round_ in range(args.rounds):
            for workers in (1, 2):
                out = root / f"r{round_}-w{workers}"
                t0 = time.monotonic()
                outcomes, _ = evaluate(preds, instances, envs, out, workers=workers)
                wall = time.monotonic() - t0
                resolved = sum(o.kind == "resolved" for o in outcomes)
                assert resolved == len(instances), [(o.instance_id, o.kind) for o in outcomes]
                per = wall / len(instances)
                results[workers].append(per)
                print(
                    f"round {round_ + 1} workers={workers}: {len(instances)} predictions in "
                    f"{wall:.1f}s ({per:.2f} s/instance), {resolved} resolved"
                )
        w1, w2 = (statistics.median(results[w]) for w in (1, 2))
        print(f"workers=1: {w1:.2f} s/instance (median of {args.rounds})")
        print(f"workers=2: {w2:.2f} s/instance (median of {args.rounds}); speedup {w1 / w2:.2f}x")
        print(f"eval_s_per_instance={w1:.2f}")


if __name__ == "__main__":
    main()
