"""``pgs batch`` and ``pgs eval`` on a real Ray cluster: a head and one more node, each started
by the test with the ``ray`` CLI on this machine (its own temporary folder, one CPU, one
``docker`` slot), the example repositories and the scripted model server.

The same batch and evaluation as with the local executor give the same patches and the same
report; killing the second node mid-batch reruns its task on the head, with every prediction
once and no container of the dead node left; the total cost limit holds across the cluster;
without Ray the flag is one line naming the extra.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.run.outputs import output_paths
from envs.docker_util import LABEL, PID_LABEL, list_containers
from tests.support.swe_dataset import I1, I2, Dataset, batch_args, fixing_policy, make_dataset
from tests.support.textutil import closed_port

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
IN_CI = os.environ.get("CI") == "true"
#: Node death noticed in about 1.5 s (Ray's default is 15 s or more).
FAST_HEALTH = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "0",
    # The test's own cluster: a token in ~/.ray/auth_token (which any earlier local Ray
    # leaves) must not switch its nodes or its drivers to token authentication.
    "RAY_AUTH_MODE": "disabled",
}


@dataclass
class Cluster:
    address: str
    temp: Path
    head: subprocess.Popen[bytes]
    node: subprocess.Popen[bytes]


def _start(temp: Path, log: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            str(RAY),
            "start",
            "--block",
            "--num-cpus",
            "1",
            "--disable-usage-stats",
            "--temp-dir",
            str(temp),
            "--node-ip-address",
            "127.0.0.1",
            "--resources",
            '{"docker": 1}',
            *args,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **FAST_HEALTH},
        stdout=open(temp.parent / log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a group of its own: the test ends exactly these processes
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (Ray's workers are the raylet's children but lead
    process groups of their own)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, changed = {pid}, True
    while changed:
        more = {p for p, parent in parents.items() if parent in found} - found
        changed = bool(more)
        found |= more
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if shutil.which(str(RAY)) is None:
        message = "Ray is missing: run .ci/setup (pip install -e '.[ray]')"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    import ray

    saved = {k: os.environ.get(k) for k in FAST_HEALTH}
    os.environ.update(FAST_HEALTH)  # for the drivers: this process and the pgs it starts
    # A short path: Ray's socket paths must stay under the kernel's 107 characters.
    root = Path(tempfile.mkdtemp(prefix="pgsray-"))
    temp = root / "t"
    temp.mkdir()
    head = _start(temp, "head.log", "--head", "--port", "0", "--include-dashboard=false")
    node = None
    try:
        deadline = time.monotonic() + 90
        address = ""
        while not address:
            assert head.poll() is None, (root / "head.log").read_text()
            assert time.monotonic() < deadline, "the Ray head did not start"
            found = re.search(r"ray start --address='([^']+)'", (root / "head.log").read_text())
            address = found[1] if found else ""
            time.sleep(0.2)
        node = _start(temp, "node.log", "--address", address)
        ray.init(address=address, log_to_driver=False, logging_level="warning")
        while ray.cluster_resources().get("docker", 0) < 2:
            assert node.poll() is None, (root / "node.log").read_text()
            assert time.monotonic() < deadline, "the second Ray node did not join"
            time.sleep(0.2)
        yield Cluster(address, temp, head, node)
    finally:
        ray.shutdown()
        if node is not None:
            _stop(node)
        _stop(head)
        shutil.rmtree(root, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)


def eval_args(dataset: Dataset, preds: Path, report: Path) -> list[str]:
    return [
        "eval",
        "--predictions",
        str(preds),
        "--instances",
        str(dataset.instances_file),
        "--repos-dir",
        str(dataset.repos_dir),
        "--report-dir",
        str(report),
        "--run-id",
        "t",
        "--workers",
        "2",
    ]


def check_consistent(out: Path, ids: set[str]) -> dict[str, Any]:
    """preds.json holds each instance once, and each one's files agree with it."""
    preds: dict[str, Any] = json.loads((out / "preds.json").read_text())
    assert set(preds) == ids
    for iid in ids:
        paths = output_paths(out, iid)
        traj = json.loads(paths.traj.read_text())
        assert traj["info"]["exit_status"] == "submitted"
        assert traj["info"]["submission"] == preds[iid]["model_patch"]
        assert paths.patch.read_text() == preds[iid]["model_patch"]
        assert json.loads(paths.pred.read_text()) == preds[iid]
        assert not [p.name for p in paths.traj.parent.iterdir() if p.name.endswith(".tmp")]
    return preds


@pytest.mark.docker
def test_batch_and_eval_on_ray_match_the_local_executor(
    cluster: Cluster, dataset: Dataset, base_image: str, tmp_path: Path
) -> None:
    ray_flags = ["--executor", "ray", "--ray-address", cluster.address]
    with ScriptedServer(fixing_policy) as server:
        local_args = batch_args(dataset, server.url, tmp_path / "local")
        assert main([*local_args, "--workers", "2"]) == 0
        ray_args = batch_args(dataset, server.url, tmp_path / "ray")
        assert main([*ray_args, "--workers", "2", *ray_flags]) == 0
        requests = len(server.requests)
        # Resume through the cluster: the finished instances are skipped, nothing runs.
        assert main([*ray_args, "--workers", "2", *ray_flags]) == 0
        assert len(server.requests) == requests
    local = check_consistent(tmp_path / "local", {I1, I2})
    on_ray = check_consistent(tmp_path / "ray", {I1, I2})
    assert {i: p["model_patch"] for i, p in on_ray.items()} == {
        i: p["model_patch"] for i, p in local.items()
    }
    assert all(p["model_patch"].strip() for p in on_ray.values())

    preds = tmp_path / "local" / "preds.json"
    assert main(eval_args(dataset, preds, tmp_path / "ev-local")) == 0
    assert main([*eval_args(dataset, preds, tmp_path / "ev-ray"), *ray_flags]) == 0
    summaries = [
        json.loads((tmp_path / d / "scripted.t.json").read_text()) for d in ("ev-local", "ev-ray")
    ]
    assert summaries[0] == summaries[1]
    assert summaries[1]["resolved_ids"] == [I1, I2]
    for iid in (I1, I2):
        reports = [
            json.loads((tmp_path / d / "scripted" / iid / "report.json").read_text())
            for d in ("ev-local", "ev-ray")
        ]
        assert reports[0] == reports[1]
        names = {p.name for p in (tmp_path / "ev-ray" / "scripted" / iid).iterdir()}
        assert names == {
            "report.json",
            "test_output.txt",
            "patch.diff",
            "eval.sh",
            "run_instance.log",
        }


@pytest.mark.docker
def test_total_cost_limit_holds_across_the_cluster(
    cluster: Cluster, dataset: Dataset, base_image: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    with ScriptedServer(fixing_policy) as server:
        args = batch_args(dataset, server.url, out)
        ray_flags = ["--executor", "ray", "--ray-address", cluster.address]
        assert main([*args, *ray_flags, "--model.total-cost-limit", "0.000001"]) == 0
    preds = json.loads((out / "preds.json").read_text())
    assert list(preds) == [I1]  # the first task spent the budget; the second was not submitted
    assert not (out / I2).exists()


@pytest.mark.docker
def test_an_outage_on_the_cluster_is_retried_on_resume(
    cluster: Cluster,
    dataset: Dataset,
    base_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "run"
    ray_flags = ["--executor", "ray", "--ray-address", cluster.address, "--stop-after", "1"]
    down = f"http://127.0.0.1:{closed_port()}/v1"  # lost after the batch started: no check
    assert main([*batch_args(dataset, down, out), *ray_flags, "--no-model.check-endpoint"]) == 3
    err = capsys.readouterr().err
    assert "pgs: error: stopped early: 1 instance in a row failed for infrastructure" in err
    assert "Unreachable" in err
    assert not (out / I2).exists()  # never submitted
    assert json.loads((out / I1 / f"{I1}.traj").read_text())["info"]["infrastructure"]
    assert not output_paths(out, I1).pred.exists()
    with ScriptedServer(fixing_policy) as server:
        assert main([*batch_args(dataset, server.url, out), *ray_flags]) == 0
    assert "resume: 1 instance retried: it failed for infrastructure" in capsys.readouterr().err
    check_consistent(out, {I1, I2})


def test_ray_executor_without_ray_is_one_line(dataset: Dataset, tmp_path: Path) -> None:
    fake = tmp_path / "noray" / "ray"  # an installation where `import ray` fails
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    preds = dataset.write_preds(tmp_path / "preds.json", {I1: ""})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "eval",
            "--predictions",
            str(preds),
            "--instances",
            str(dataset.instances_file),
            "--executor",
            "ray",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{fake.parent}:{ROOT}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "pip install" in done.stderr and "[ray]" in done.stderr


# -- a node dies mid-batch: the last test, it leaves the cluster with the head alone ----------


@pytest.mark.docker
def test_a_killed_node_s_task_reruns_on_the_head(
    cluster: Cluster, dataset: Dataset, base_image: str, docker_client: Any, tmp_path: Path
) -> None:
    release = threading.Event()
    asked: set[str] = set()
    starts: Counter[str] = Counter()  # first requests of a conversation, per instance
    lock = threading.Lock()

    def held_policy(request: dict[str, Any]) -> dict[str, Any]:
        """The fixing policy; each instance's first answer waits until the test releases it."""
        iid = I2 if "count_words" in json.dumps(request["messages"][:2]) else I1
        with lock:
            asked.add(iid)
            starts[iid] += not any(m["role"] == "assistant" for m in request["messages"])
        release.wait(120)
        return fixing_policy(request)

    doomed: set[int] = set()
    containers: list[str] = []

    def kill_the_node() -> None:
        try:
            deadline = time.monotonic() + 180
            while len(asked) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            doomed.update(descendants(cluster.node.pid))
            for c in list_containers(docker_client, f"{LABEL}=1"):
                # Another test's container may carry its image's empty owner label.
                if int(c["Labels"].get(PID_LABEL) or 0) in doomed:
                    containers.append(c["Id"])
            os.killpg(cluster.node.pid, signal.SIGKILL)
            for pid in doomed:  # the machine is gone: every process of the node with it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            cluster.node.wait(timeout=30)
        finally:
            release.set()

    out = tmp_path / "run"
    killer = threading.Thread(target=kill_the_node, daemon=True)
    with ScriptedServer(held_policy) as server:
        args = batch_args(dataset, server.url, out)
        killer.start()
        code = main(
            [*args, "--workers", "2", "--executor", "ray", "--ray-address", cluster.address]
        )
        killer.join(timeout=60)
    assert code == 0
    assert containers, "no container of the second node was running when it was killed"
    check_consistent(out, {I1, I2})
    # One instance started twice: on the dead node, then again on the head.
    assert sorted(starts.values()) == [1, 2], starts
    # The dead node's worker owned its container: the helper saw its stdin close and left.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [c for c in list_containers(docker_client, f"{LABEL}=1") if c["Id"] in containers]
        if not left:
            break
        time.sleep(0.5)
    assert not left, f"containers of the killed node are left: {left}"
