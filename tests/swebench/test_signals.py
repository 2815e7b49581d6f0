"""``pgs eval`` and ``pgs select`` stopped by SIGTERM or SIGHUP, as ``pgs run`` is: through the
real command in a process of its own, real Docker containers, the tests' own tiny SWE-bench
dataset (:mod:`tests.support.swe_dataset`).

``pgs eval``: the second instance's tests sleep, so the signal comes while its container runs
them; the first was graded before it. The command ends at once (before that sleep would) with
exit code 130 and one line saying what was kept; no container of it is left, nor a temporary
tree; the instance graded before the signal keeps its report (the summary lists it, and the one
stopped under ``interrupted_ids``); a rerun with the same run id grades only the one that was
stopped.

``pgs select --workers 2``: a candidate's added test sleeps in a worker thread's container; the
signal ends it at once too, with no container left and nothing half-checked kept."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envs.docker_util import LABEL, PID_LABEL
from envs.scratch import cache_dir
from tests.support.swe_dataset import I1, I2, Dataset, make_dataset
from tests.support.textutil import ROOT, pgs_env

INTERRUPTED = 130
#: How long the stopped work sleeps in its container: a command that waited for it, instead of
#: stopping it, would take this long (whatever the machine's speed, stopping takes far less).
SLEEP = 300


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def containers_of(client: Any, pid: int) -> list[Any]:
    mine = {"label": [f"{LABEL}=1", f"{PID_LABEL}={pid}"]}
    return list(client.containers.list(all=True, filters=mine, ignore_removed=True))


def trees_of(folder: Path, pid: int) -> list[Path]:
    """The temporary trees (:mod:`envs.scratch`) in ``folder`` that process ``pid`` owns."""
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if f"-{pid}-" in p.name.rpartition(".owner-")[2]]


def eval_argv(dataset: Dataset, instances: Path, preds: Path, report: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "agent.cli", "eval"),
        *("--predictions", str(preds), "--instances", str(instances)),
        *("--repos-dir", str(dataset.repos_dir), "--report-dir", str(report), "--run-id", "t"),
    ]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_an_evaluation_at_once_and_keeps_what_was_graded(
    dataset: Dataset,
    base_image: str,
    docker_client: Any,
    tmp_path: Path,
    sig: signal.Signals,
) -> None:
    gold = {r["instance_id"]: r["patch"] for r in dataset.records}
    preds = dataset.write_preds(tmp_path / "preds.json", gold)
    first, second = dataset.records
    slow = {**second, "test_cmd": f"sleep {SLEEP}; " + second["test_cmd"]}
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps([first, slow]))
    report = tmp_path / "report"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        eval_argv(dataset, instances, preds, report),
        cwd=ROOT,
        env=pgs_env(TMPDIR=str(tmp)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = report / "m" / I2 / "run_instance.log"
    try:
        deadline = time.monotonic() + 600  # a cold image cache builds both images first
        while "running /bin/bash /eval.sh" not in (running.read_text() if running.exists() else ""):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the second instance's tests never started"
            time.sleep(0.2)
        assert containers_of(docker_client, proc.pid)  # its tests are running in it
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=SLEEP)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == INTERRUPTED, err
    assert took < SLEEP, f"took {took:.1f} s to stop: it waited for the tests"
    assert f"pgs: error: interrupted by {sig.name}" in err
    assert "stopped: 1 graded, their reports kept in" in err and "1 not graded" in err
    assert "--run-id t" in err and "Traceback" not in err
    assert not containers_of(docker_client, proc.pid)
    assert not trees_of(tmp, proc.pid) and not trees_of(cache_dir() / "build", proc.pid)

    # The instance graded before the signal is kept; the one stopped is no error.
    summary = json.loads((report / "m.t.json").read_text())
    assert summary["resolved_ids"] == [I1]
    assert summary["interrupted_ids"] == [I2]
    assert summary["error_ids"] == []
    assert json.loads((report / "m" / I1 / "report.json").read_text())[I1]["resolved"]
    assert not (report / "m" / I2 / "report.json").exists()
    assert not (report / "m" / I2 / "error.txt").exists()
    assert "interrupted: the evaluation was stopped" in running.read_text()

    if sig != signal.SIGTERM:
        return
    # A rerun grades only what was stopped (its tests no longer sleep).
    rerun = subprocess.run(
        eval_argv(dataset, dataset.instances_file, preds, report),
        cwd=ROOT,
        env=pgs_env(TMPDIR=str(tmp)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert "1 graded instances skipped: graded before" in rerun.stderr
    summary = json.loads((report / "m.t.json").read_text())
    assert summary["resolved_ids"] == [I1, I2]
    assert "interrupted_ids" not in summary


#: A test a candidate adds that runs for minutes: ``sleep 300`` in the container.
SLOW_TEST = """diff --git a/tests/test_slow.py b/tests/test_slow.py
new file mode 100644
--- /dev/null
+++ b/tests/test_slow.py
@@ -0,0 +1,5 @@
+import subprocess
+
+
+def test_slow():
+    subprocess.run(["sleep", "300"])
"""


def test_a_signal_stops_a_selection_with_several_workers_at_once(
    dataset: Dataset, base_image: str, docker_client: Any, tmp_path: Path
) -> None:
    gold = dataset.record(I1)["patch"]
    files = [
        dataset.write_preds(tmp_path / "right.json", {I1: gold}, "right"),
        dataset.write_preds(tmp_path / "slow.json", {I1: gold + SLOW_TEST}, "slow"),
    ]
    out = tmp_path / "out"
    argv = [
        *(sys.executable, "-m", "agent.cli", "select", "--predictions", *map(str, files)),
        *("--instances", str(dataset.instances_file), "--instance-ids", I1),
        *("--repos-dir", str(dataset.repos_dir), "--output-dir", str(out)),
        *("--workers", "2", "--test-timeout", "600"),
    ]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=pgs_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 600
        while not any(
            "sleep 300" in " ".join(p[-1] for p in (c.top().get("Processes") or []))
            for c in containers_of(docker_client, proc.pid)
            if c.status == "running"
        ):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the slow test never started"
            time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=SLEEP)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == INTERRUPTED, err
    assert took < SLEEP, f"took {took:.1f} s to stop: it waited for the test"
    assert "pgs: error: interrupted by SIGTERM" in err and "Traceback" not in err
    assert not containers_of(docker_client, proc.pid)
    # Nothing half-checked is kept as the instance's selection: a rerun checks it again.
    assert not (out / "instances" / f"{I1}.json").exists()
