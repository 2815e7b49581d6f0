"""SWE-bench batches and evaluation, end to end: a dataset the tests make (a real repository
with history, a bare OWNER__NAME mirror), instance images built with the host's network and
cached by content (warm runs build nothing), real containers with the network off, the real
``openai`` client talking to the scripted server, and swebench's own parsers and grading.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.run.outputs import output_paths
from agent.swebench import (
    Instance,
    InstanceError,
    InstanceSpec,
    eval_script,
    instance_spec,
    load_instances,
    parse_python_map,
    select,
)
from agent.swebench.resume import finished_status
from envs.docker_util import LABEL, PID_LABEL, list_containers, remove_container
from envs.errors import EnvError, ImageBuildError
from tests.support.processes import Shown
from tests.support.swe_dataset import (
    I1,
    I2,
    Dataset,
    batch_args,
    eval_summary,
    fixing_policy,
    make_dataset,
)

ROOT = Path(__file__).resolve().parents[2]
WRONG = """diff --git a/textkit/core.py b/textkit/core.py
--- a/textkit/core.py
+++ b/textkit/core.py
@@ -9,2 +9,2 @@ def slugify(text):
     \"\"\"Lower-case words joined by dashes.\"\"\"
-    return "-".join(text.split())
+    return "_".join(text.lower().split())
"""
NOT_APPLYING = """diff --git a/textkit/core.py b/textkit/core.py
--- a/textkit/core.py
+++ b/textkit/core.py
@@ -1,2 +1,2 @@
-this line is not in the file
+nor is this one
 def nothing():
"""
MALFORMED = "this is not a diff\n@@ nonsense @@\n+ x\n"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def run_eval(
    dataset: Dataset, preds: dict[str, str | None], out: Path, *extra: str
) -> dict[str, Any]:
    """``pgs eval`` on ``preds``; the summary report it wrote."""
    path = dataset.write_preds(out / "preds.json", preds)
    return eval_summary(
        path, dataset.instances_file, out, "--repos-dir", str(dataset.repos_dir), *extra
    )


def instance_report(out: Path, iid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report" / "m" / iid / "report.json").read_text())
    return data[iid]


# --------------------------------------------------------------------------- records


def test_records_load_from_json_and_jsonl_and_select(dataset: Dataset, tmp_path: Path) -> None:
    jsonl = tmp_path / "instances.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in dataset.records) + "\n")
    for path in (dataset.instances_file, jsonl):
        instances = load_instances(path)
        assert [i.instance_id for i in instances] == [I1, I2]
        assert instances[0].fail_to_pass == ["tests/test_core.py::test_slugify_lowercases"]
    assert [i.instance_id for i in select(instances, pattern="-2$")] == [I2]
    assert [i.instance_id for i in select(instances, slice_="1:")] == [I2]
    shuffled = [select(instances, shuffle=True, seed=s) for s in range(6)]
    assert all(sorted(i.instance_id for i in s) == [I1, I2] for s in shuffled)
    assert select(instances, shuffle=True, seed=3) == select(instances, shuffle=True, seed=3)
    with pytest.raises(InstanceError, match="A:B"):
        select(instances, slice_="x")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"instance_id": "x"}]')
    with pytest.raises(InstanceError, match="missing field"):
        load_instances(bad)


def test_python_versions_without_a_base_image_are_refused_or_mapped(dataset: Dataset) -> None:
    record = {**dataset.record(I1), "python": "3.10"}
    instance = Instance.from_record(record)
    with pytest.raises(EnvError, match=r"Python 3\.10.*3\.9 \(Debian bullseye\).*--python-map"):
        instance_spec(instance)
    spec = instance_spec(instance, parse_python_map(["3.10=3.11"]))
    assert spec.python == "3.11" and spec.deviations == ["Python 3.11 for 3.10"]


def test_unknown_repository_without_spec_fields_names_the_fix(dataset: Dataset) -> None:
    record = {
        k: v
        for k, v in dataset.record(I1).items()
        if k not in ("python", "install", "test_cmd", "log_parser")
    }
    with pytest.raises(EnvError, match=r"no environment spec.*add `python`, `install`"):
        instance_spec(Instance.from_record(record))


def test_eval_script_runs_exactly_the_listed_tests(dataset: Dataset) -> None:
    instance = Instance.from_record(dataset.record(I2))
    script = eval_script(instance, instance_spec(instance))
    line = next(x for x in script.splitlines() if x.startswith("python3 -m pytest"))
    assert line.split()[-4:] == [*instance.fail_to_pass, *instance.pass_to_pass]
    # Ids that are not whole pytest node ids: the test files of test_patch instead.
    odd = InstanceSpec(log_parser="django", test_cmd="./runtests.py")
    assert "./runtests.py tests/test_core.py" in eval_script(instance, odd)


def test_dataset_from_the_hub_fails_clearly_offline(tmp_path: Path) -> None:
    # A process of its own: huggingface_hub reads HF_HUB_OFFLINE when first imported.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "batch", "--dataset", "SWE-bench/nope", "--model", "m"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "pgs: error: cannot load the dataset 'SWE-bench/nope'" in done.stderr
    assert "--instances FILE" in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- evaluation


@pytest.mark.docker
def test_empty_and_wrong_patches_do_not_resolve(
    dataset: Dataset, base_image: str, tmp_path: Path
) -> None:
    summary = run_eval(dataset, {I1: WRONG, I2: ""}, tmp_path)
    assert summary["resolved_ids"] == []
    assert summary["unresolved_ids"] == [I1]
    assert summary["empty_patch_ids"] == [I2]
    report = instance_report(tmp_path, I1)
    assert report["patch_successfully_applied"] and not report["resolved"]
    status = report["tests_status"]
    assert status["FAIL_TO_PASS"]["failure"] == ["tests/test_core.py::test_slugify_lowercases"]
    # The wrong fix broke a test that passed before.
    assert "tests/test_core.py::test_slugify_spaces" in status["PASS_TO_PASS"]["failure"]


@pytest.mark.docker
def test_malformed_and_non_applying_patches_are_reported_as_such(
    dataset: Dataset, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = run_eval(dataset, {I1: MALFORMED, I2: NOT_APPLYING}, tmp_path)
    assert summary["error_ids"] == [I1, I2] and summary["resolved_ids"] == []
    assert summary["errors"][I1].startswith("malformed patch")
    assert summary["errors"][I2].startswith("patch does not apply")
    for iid in (I1, I2):
        report = instance_report(tmp_path, iid)
        assert not report["patch_successfully_applied"] and not report["resolved"]
        # run_instance.log says how each of the harness's commands failed, and why.
        log = (tmp_path / "report" / "m" / iid / "run_instance.log").read_text()
        for command in ("git apply --verbose", "git apply --verbose --reject", "patch --batch"):
            assert f"Failed to apply patch to container: {command}" in log
        assert ">>>>> Patch Apply Failed: no command applied the patch; tests not run" in log
        assert f"Result for {iid}: resolved: False; error ({summary['errors'][iid]})" in log
    out = capsys.readouterr().out
    assert "malformed patch" in out and "patch does not apply" in out


@pytest.mark.docker
def test_failed_image_build_names_the_failing_command(
    dataset: Dataset, base_image: str, tmp_path: Path
) -> None:
    from agent.swebench import build_instance_image, find_mirror

    record = {**dataset.record(I1), "install": ["python3 -m pip install -e .", "no-such-tool --x"]}
    instance = Instance.from_record(record)
    with pytest.raises(ImageBuildError) as caught:
        build_instance_image(
            instance, instance_spec(instance), find_mirror(instance, dataset.repos_dir)
        )
    assert "no-such-tool --x" in caught.value.step
    assert "not found" in str(caught.value)


# --------------------------------------------------------------------------- batches


@pytest.mark.docker
def test_batch_predictions_are_graded_and_resume_skips_finished(
    dataset: Dataset, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A third instance whose base commit the mirror lacks: its repository cannot be prepared
    # here, an infrastructure failure (no result), and the batch goes on.
    broken = {**dataset.record(I1), "instance_id": "acme__textkit-3", "base_commit": "f" * 40}
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps([*dataset.records, broken]))
    out = tmp_path / "run"
    with ScriptedServer(fixing_policy) as server:
        args = batch_args(dataset, server.url, out, instances=instances)
        code = main([*args, "--workers", "2"])
        first_requests = len(server.requests)
        assert code == 1  # one instance failed
        preds = json.loads((out / "preds.json").read_text())
        assert set(preds) == {I1, I2}  # no empty prediction for the one that failed
        for iid in (I1, I2):
            assert preds[iid]["model_name_or_path"] == "scripted"
            traj = json.loads((out / iid / f"{iid}.traj").read_text())
            assert traj["info"]["exit_status"] == "submitted"
        crashed = json.loads((out / "acme__textkit-3" / "acme__textkit-3.traj").read_text())
        assert crashed["info"]["exit_status"] == "exit_error"
        assert crashed["info"]["infrastructure"]
        assert "f" * 12 in crashed["info"]["error"]
        err = capsys.readouterr().err
        assert "exit statuses" in err and "submitted" in err and "exit_error" in err
        assert "acme__textkit-3: exit_error (infrastructure): SetupFailed" in err
        assert "PGS verdicts (none): unchecked 2" in err  # --feedback none checks nothing

        # Resume: the finished two are skipped, the failed one is tried again (and fails).
        assert main(args) == 1
        assert len(server.requests) == first_requests
        err = capsys.readouterr().err
        assert "2 finished instances skipped" in err
        assert "resume: 1 instance retried: it failed for infrastructure" in err
        assert json.loads((out / "preds.json").read_text()) == preds

    report_dir = tmp_path / "graded"
    code = main(
        [
            "eval",
            "--predictions",
            str(out / "preds.json"),
            "--instances",
            str(instances),
            "--repos-dir",
            str(dataset.repos_dir),
            "--report-dir",
            str(report_dir),
            "--run-id",
            "b",
        ]
    )
    assert code == 0
    summary = json.loads((report_dir / "scripted.b.json").read_text())
    assert summary["resolved_ids"] == [I1, I2]
    assert summary["incomplete_ids"] == ["acme__textkit-3"]  # no prediction


@pytest.mark.docker
def test_total_cost_limit_stops_starting_instances(
    dataset: Dataset, base_image: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    with ScriptedServer(fixing_policy) as server:
        args = batch_args(dataset, server.url, out)
        main([*args, "--model.total-cost-limit", "0.000001"])
    preds = json.loads((out / "preds.json").read_text())
    assert list(preds) == [I1]  # the first instance spent the budget; the second never began
    assert not (out / I2).exists()


RELEASE = threading.Event()
#: Set when the second instance's model is asked (and waits for RELEASE).
SECOND_ASKED = threading.Event()


def slow_second_policy(request: dict[str, Any]) -> dict[str, Any]:
    """The fixing policy, but the second instance's model answers only when released."""
    if "count_words" in json.dumps(request["messages"][:2]):
        SECOND_ASKED.set()
        RELEASE.wait(60)
    return fixing_policy(request)


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killing_a_batch_loses_no_finished_prediction(
    dataset: Dataset, base_image: str, docker_client: Any, tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "run"
    RELEASE.clear()
    SECOND_ASKED.clear()
    with ScriptedServer(slow_second_policy) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", *batch_args(dataset, server.url, out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        shown = Shown(proc)
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                preds_path = out / "preds.json"
                if preds_path.exists() and I1 in json.loads(preds_path.read_text()):
                    break
                assert proc.poll() is None, shown.text()
                time.sleep(0.2)
            else:
                pytest.fail("the first instance never finished")
            # The second instance is running: its container is up, its model asked.
            assert SECOND_ASKED.wait(240), shown.text()
            proc.send_signal(sig)
            if sig == signal.SIGINT:  # once: finish the running one; twice: stop now
                shown.wait_for("interrupted: no new instance starts", 120)
                proc.send_signal(sig)
            proc.wait(timeout=120)
            assert proc.returncode == (-9 if sig == signal.SIGKILL else 130)
            if sig == signal.SIGINT:  # the second Ctrl-C removed the running container
                mine = {"label": [f"{LABEL}=1", f"{PID_LABEL}={proc.pid}"]}
                assert not docker_client.containers.list(
                    all=True, filters=mine, ignore_removed=True
                )
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            RELEASE.set()
            # A killed batch's containers go by themselves (Docker may be removing them now);
            # any left carry its pid.
            for container in list_containers(
                docker_client, f"{LABEL}=1", f"{PID_LABEL}={proc.pid}"
            ):
                remove_container(docker_client, container["Id"])
    preds = json.loads((out / "preds.json").read_text())
    assert I1 in preds and preds[I1]["model_patch"].strip()
    assert I2 not in preds
    # The cut instance is not counted as finished: the next run (resume) does it again.
    assert finished_status(output_paths(out, I2).traj) is None
