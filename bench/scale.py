"""The cost of running a batch through Ray: the same batch with the local executor and with
``--executor ray`` on a one-node cluster on this machine, per instance.

    .venv/bin/python bench/scale.py [--rounds 3] [--workers 1]

The batch is the test suite's two example instances (``tests/support/swe_dataset.py``) with the
fixing script of ``agent/models/script_server.py``, images warm (a first local round builds them,
not timed). Each round runs the batch once with each executor (``--redo``, the same output folder),
and the overhead of a round is (Ray's wall time - local wall time) / instances: task shipping, the
scratch folder, the files sent back and written by the driver (the driver connects once, before the
rounds, as a long batch does). The cluster (``ray start --head`` with a ``docker`` resource, its own
temporary folder) is started once, outside the timing, and stopped at the end. Needs pgs-agent[ray].
Last line: ray_overhead_s_per_instance=<median over rounds>."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The repository, not bench/ (whose inspect.py would shadow the standard library's).
sys.path[0] = str(Path(__file__).resolve().parents[1])

from agent.cli import main  # noqa: E402
from agent.models.script_server import ScriptedServer  # noqa: E402
from tests.support.swe_dataset import Dataset, batch_args, fixing_policy, make_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def start_head(root: Path, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    log = root / "head.log"
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            "--port",
            "0",
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            "--temp-dir",
            str(root / "t"),
            "--resources",
            f'{{"docker": {workers}}}',
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = re.search(r"ray start --address='([^']+)'", log.read_text())
        if found:
            return proc, found[1]
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    stop(proc)
    raise SystemExit(f"the Ray head did not start:\n{log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def batch(dataset: Dataset, url: str, out: Path, workers: int, *extra: str) -> float:
    """One ``pgs batch`` (``--redo``); its wall time in seconds."""
    args = batch_args(dataset, url, out, "--workers", str(workers), "--redo", *extra, price=0.0)
    started = time.monotonic()
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    seconds = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"pgs batch {' '.join(extra)} failed with exit code {code}")
    return seconds


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    options = parser.parse_args()
    if options.quick:
        options.rounds = 1
    root = Path(tempfile.mkdtemp(prefix="pgsscale-"))  # short: Ray's socket paths
    head = None
    try:
        dataset = make_dataset(root / "data")
        n = len(dataset.records)
        with ScriptedServer(fixing_policy) as server:
            batch(dataset, server.url, root / "warm", options.workers)  # builds the images
            head, address = start_head(root, options.workers)
            ray_flags = ("--executor", "ray", "--ray-address", address)
            batch(dataset, server.url, root / "ray", options.workers, *ray_flags)  # connects
            overheads = []
            print(f"{n} instances, {options.workers} workers; wall time per batch:")
            for r in range(options.rounds):
                local = batch(dataset, server.url, root / "local", options.workers)
                on_ray = batch(dataset, server.url, root / "ray", options.workers, *ray_flags)
                overheads.append((on_ray - local) / n)
                print(
                    f"round {r + 1}: local {local:.2f}s, ray {on_ray:.2f}s, "
                    f"overhead {overheads[-1]:+.2f}s per instance"
                )
    finally:
        with contextlib.suppress(Exception):
            import ray

            ray.shutdown()
        if head is not None:
            stop(head)
        shutil.rmtree(root, ignore_errors=True)
    print(f"ray_overhead_s_per_instance={statistics.median(overheads):.2f}")


if __name__ == "__main__":
    run()
