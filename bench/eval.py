"""Real SWE-bench Verified records, gold patches: image build time (cold, and a second instance
of an environment already built) and evaluation time per instance, and how many resolve.

    .venv/bin/python bench/eval.py --repos-dir DIR [--instances FILE] [--fresh] [--python-map A=B]

DIR holds the repositories as ``OWNER__NAME`` clones (``../shared/swebench/prepare.sh
SNAPSHOTS DIR`` lays them out from fetched snapshots, in ``DIR/repos``). FILE defaults to the
eight records in ``tests/data/verified-dev.jsonl``. ``--fresh`` removes every pgs SWE-bench image
first, so the first instance of each repository and version pays for its environment layer.
Per instance, in the order of FILE: the image time (``cold-env`` when its environment layer was
built, ``cold`` when only the instance layer was, ``warm`` for a cache hit), then the evaluation
of the gold patch in a fresh container with the network off (apply, test_patch, tests, grading).
Last line: verified_gold_resolved=K/N.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.swebench import Environments, load_instances, parse_python_map
from agent.swebench.images import env_name
from agent.swebench.run_instance import evaluate_one
from envs.docker_util import docker_client
from envs.images import list_pgs

RECORDS = Path(__file__).resolve().parents[1] / "tests" / "data" / "verified-dev.jsonl"


def tags(client: Any) -> set[str]:
    """Every image tag (one API call: images other processes remove meanwhile do not matter)."""
    return {t for image in client.api.images() for t in image.get("RepoTags") or []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos-dir", type=Path)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    parser.add_argument("--instances", type=Path, default=RECORDS)
    parser.add_argument("--fresh", action="store_true", help="remove pgs SWE-bench images first")
    parser.add_argument("--python-map", action="append", default=[], metavar="WANTED=USED")
    args = parser.parse_args()
    if args.repos_dir is None or not args.repos_dir.is_dir():
        if not args.quick:
            parser.error("--repos-dir: a folder of fetched repositories is needed")
        # Quick mode without the fetched repositories: nothing to measure, and it says so.
        print(f"no repositories at --repos-dir {args.repos_dir}: skipped")
        print("verified_gold_resolved=skipped")
        return
    client = docker_client()
    if args.fresh:
        for image in list_pgs(client).images:  # leaves out what another pgs removes meanwhile
            if (image.labels or {}).get("pgs-agent.kind", "").startswith("swebench"):
                client.images.remove(image.id, force=True)
    instances = load_instances(args.instances)
    envs = Environments(args.repos_dir, parse_python_map(args.python_map))
    times: dict[str, list[float]] = {"cold-env": [], "cold": [], "warm": [], "eval": []}
    resolved = 0
    with tempfile.TemporaryDirectory(prefix="pgs-bench-eval-") as tmp:
        for instance in instances:
            envs_before = tags(client)
            started = time.monotonic()
            try:
                image = envs.image(instance)
            except Exception as e:  # a data problem is reported, the others still run
                print(f"{instance.instance_id}: image failed: {str(e)[:300]}")
                continue
            built = time.monotonic() - started
            new = tags(client) - envs_before
            kind = (
                "warm"
                if image.cache_hit
                else (
                    "cold-env"
                    if any(t.startswith(env_name(instance) + ":") for t in new)
                    else "cold"
                )
            )
            times[kind].append(built)
            prediction = {
                "instance_id": instance.instance_id,
                "model_name_or_path": "gold",
                "model_patch": instance.patch,
            }
            started = time.monotonic()
            outcome = evaluate_one(instance, prediction, envs, Path(tmp))
            took = time.monotonic() - started
            times["eval"].append(took)
            resolved += outcome.kind == "resolved"
            print(
                f"{instance.instance_id}: image {kind} {built:.1f}s, eval {took:.1f}s, "
                f"{outcome.kind} {outcome.error[:200]}"
            )
    for kind, values in times.items():
        if values:
            print(f"{kind}: median {statistics.median(values):.1f}s over {len(values)}")
    print(f"verified_gold_resolved={resolved}/{len(instances)}")


if __name__ == "__main__":
    main()
