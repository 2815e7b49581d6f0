"""Batches that lose nothing, through the real ``pgs batch``: an instance the model endpoint
(or Docker) failed is not finished and a resume runs it again; a batch stops after several
instances in a row failed the same way (the endpoint, or a tool bundle that fails to install
in every instance); two batches writing into one folder at once (real
processes) keep every prediction; a resume with another model or feedback mode is refused.

The local sandbox and the scripted model server on 127.0.0.1: Docker is not the point here;
"the endpoint is down" is a closed port."""

from __future__ import annotations

import json
import shutil
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
from agent.swebench.resume import finished_status
from tests.support.swe_dataset import Dataset, batch_args, make_dataset
from tests.support.textutil import ROOT, closed_port, pgs_env

IDS = [f"acme__textkit-{n}" for n in (1, 2, 3, 4)]
#: The longest one batch waits for the other (a hang's limit, not an expected time), and the
#: model's time limit of a batch whose answer waits on the other's: a retried request would
#: meet itself at the barrier.
WAIT = 600
PATIENT = ("--model.timeout", str(WAIT))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


@pytest.fixture
def four(dataset: Dataset, tmp_path: Path) -> Path:
    """Four instances: the dataset's two and a copy of each under another id."""
    first, second = dataset.records
    records = [first, second, {**first, "instance_id": IDS[2]}, {**second, "instance_id": IDS[3]}]
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(records))
    return path


def editing(request: dict[str, Any]) -> dict[str, Any]:
    """One edit, then submit: every instance ends ``submitted`` with a patch."""
    if not any(m["role"] == "assistant" for m in request["messages"]):
        command = "echo '# checked' >> textkit/core.py"
        return {"content": "", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}
    return {"content": "", "tool_calls": [{"name": "submit", "arguments": {}}]}


def local(dataset: Dataset, url: str, out: Path, *extra: str, **kwargs: Any) -> list[str]:
    return batch_args(dataset, url, out, "--sandbox", "local", *extra, **kwargs)


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("pgs: error:")]


def test_endpoint_down_stops_the_batch_and_resume_retries_what_failed(
    dataset: Dataset, four: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    down = f"http://127.0.0.1:{closed_port()}/v1"
    # Down before the batch starts: one line, before any instance (the check of issue 32).
    code = main([*local(dataset, down, out, "--stop-after", "2", instances=four)])
    err = capsys.readouterr().err
    assert code == 2, err
    [line] = error_lines(err)
    assert f"cannot reach the model's server at {down} (connection refused)" in line
    assert not out.exists()

    # Down once the batch runs (the check off stands for an endpoint lost after it).
    late = ["--stop-after", "2", "--no-model.check-endpoint"]
    code = main([*local(dataset, down, out, *late, instances=four)])
    err = capsys.readouterr().err

    assert code == 3, err  # the infrastructure failed, not the agent
    [line] = error_lines(err)
    assert "stopped early: 2 instances in a row failed for infrastructure" in line
    assert "Unreachable: cannot reach http://127.0.0.1" in line and "--output-dir" in line
    # The two that failed are not results; the two never started are not marked at all.
    preds = json.loads((out / "preds.json").read_text()) if (out / "preds.json").exists() else {}
    assert preds == {}
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == IDS[:2]
    for iid in IDS[:2]:
        assert finished_status(output_paths(out, iid).traj) is None
        assert not output_paths(out, iid).pred.exists()

    # The endpoint is back: the resume runs the two that failed and the two not started.
    with ScriptedServer(editing) as server:
        code = main(local(dataset, server.url, out, instances=four))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "resume: 2 instances retried: they failed for infrastructure" in err
    assert "finished instances skipped" not in err
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == IDS
    assert all("# checked" in p["model_patch"] for p in preds.values())


def test_a_mistake_every_instance_makes_stops_the_batch_and_resume_retries_them(
    dataset: Dataset, four: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A tool bundle whose install.sh fails: the command's mistake, the same in every instance.
    bundle = tmp_path / "broken"
    (bundle / "bin").mkdir(parents=True)
    (bundle / "config.yaml").write_text("tools: {}\n")
    (bundle / "install.sh").write_text("false\n")
    out = tmp_path / "run"
    broken = ["--tools.bundles", json.dumps([str(bundle)])]
    with ScriptedServer(editing) as server:
        code = main([*local(dataset, server.url, out, *broken, instances=four)])
        err = capsys.readouterr().err
        assert code == 2, err  # a mistake in the command, not the machine
        [line] = error_lines(err)
        assert "stopped early: 3 instances in a row failed on a mistake in the command" in line
        assert "ToolInstallError: installing tool bundle 'broken' failed" in line
        assert (
            not (out / "preds.json").exists() or json.loads((out / "preds.json").read_text()) == {}
        )
        assert not (out / IDS[3]).exists()  # never started

        # The bundle left out: the three that failed run again, and the one not started.
        code = main(local(dataset, server.url, out, instances=four))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "resume: 3 instances retried: they failed on a mistake in the command" in err
    assert "finished instances skipped" not in err
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == IDS


def test_stop_after_zero_runs_every_instance(
    dataset: Dataset, four: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    down = f"http://127.0.0.1:{closed_port()}/v1"
    late = ["--stop-after", "0", "--no-model.check-endpoint"]  # lost after the batch started
    code = main([*local(dataset, down, out, *late, instances=four)])
    err = capsys.readouterr().err
    assert code == 1, err  # every instance failed; no early stop was asked for
    assert error_lines(err) == []
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == IDS


def test_two_batches_into_one_folder_at_once_keep_every_prediction(
    dataset: Dataset, four: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    # Each batch's instance waits at the model until the other batch's is there too: both
    # processes hold what they read of preds.json before either writes it. However long the
    # other takes to get there (a loaded machine): the model's answer may wait as long.
    meet = threading.Barrier(2, timeout=WAIT)

    def together(request: dict[str, Any]) -> dict[str, Any]:
        if not any(m["role"] == "assistant" for m in request["messages"]):
            meet.wait()
        return editing(request)

    with ScriptedServer(together) as server:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agent.cli",
                    *local(dataset, server.url, out, "--slice", part, *PATIENT, instances=four),
                ],
                cwd=ROOT,
                env=pgs_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for part in ("0:2", "2:4")
        ]
        outputs = [proc.communicate(timeout=2 * WAIT) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == IDS
    assert all("# checked" in p["model_patch"] for p in preds.values())


def test_two_batches_of_the_same_instance_at_once_run_it_once(
    dataset: Dataset, four: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    release = threading.Event()

    def held(request: dict[str, Any]) -> dict[str, Any]:
        release.wait(WAIT)  # until the other batch has decided what to do with the instance
        return editing(request)

    with ScriptedServer(held) as server:
        argv = local(dataset, server.url, out, "--slice", "0:1", *PATIENT, instances=four)
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "agent.cli", *argv],
                cwd=ROOT,
                env=pgs_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            deadline = time.monotonic() + WAIT
            while len(server.requests) < 2 and all(p.poll() is None for p in procs):
                assert time.monotonic() < deadline, "neither batch reached the model"
                time.sleep(0.05)
        finally:
            release.set()
        outputs = [proc.communicate(timeout=2 * WAIT) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    skipped = [err for _, err in outputs if "another pgs process is running it" in err]
    assert len(skipped) == 1, outputs
    assert len(server.requests) == 2  # one run of the instance: the edit, then submit
    assert list(json.loads((out / "preds.json").read_text())) == IDS[:1]


def test_resume_with_another_model_or_feedback_mode_is_refused(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with ScriptedServer(editing) as server:
        assert main(local(dataset, server.url, out)) == 0
        capsys.readouterr()
        before = (out / "preds.json").read_text()
        asked = len(server.requests)

        code = main(local(dataset, server.url, out, model="other-model"))
        err = capsys.readouterr().err
        assert code == 2, err
        [line] = error_lines(err)
        assert "made with model 'scripted'" in line and "this batch has model 'other-model'" in line
        assert "another --output-dir" in line and "--redo" in line

        code = main(local(dataset, server.url, out, feedback="io"))
        [line] = error_lines(capsys.readouterr().err)
        assert code == 2
        assert "made with mode 'none'" in line and "this batch has mode 'io'" in line

        assert len(server.requests) == asked  # nothing ran
        assert (out / "preds.json").read_text() == before
        # The same setting resumes as before: everything finished is skipped.
        assert main(local(dataset, server.url, out)) == 0
        assert "2 finished instances skipped" in capsys.readouterr().err
        # --redo runs them again with the new model.
        assert main(local(dataset, server.url, out, "--redo", model="other-model")) == 0
    preds = json.loads((out / "preds.json").read_text())
    assert {p["model_name_or_path"] for p in preds.values()} == {"other-model"}


@pytest.mark.parametrize("broken", ["missing repository", "outdated mirror"])
def test_an_instance_whose_repository_cannot_be_prepared_is_retried_on_resume(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    repos = tmp_path / "repos"
    shutil.copytree(dataset.repos_dir, repos)
    first, second = dataset.records
    if broken == "missing repository":  # acme/gone is not in --repos-dir
        other = {**second, "instance_id": "acme__gone-2", "repo": "acme/gone"}
        fix = [
            "git",
            "clone",
            "-q",
            "--bare",
            str(dataset.source),
            str(repos / "acme__gone"),
        ]
        reason = "no repository acme__gone (or acme__gone.git) in --repos-dir"
    else:  # its base commit was made after the mirror was cloned
        clone = tmp_path / "later"
        subprocess.run(["git", "clone", "-q", str(dataset.source), str(clone)], check=True)
        (clone / "NEWS").write_text("later\n")
        subprocess.run(["git", "-C", str(clone), "add", "NEWS"], check=True)
        commit = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*commit, "commit", "-q", "-m", "later"], check=True)
        head = subprocess.run(
            ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        other = {**second, "instance_id": "acme__textkit-9", "base_commit": head}
        mirror = str(repos / "acme__textkit")
        fix = ["git", "-C", str(clone), "push", "-q", mirror, "HEAD:refs/heads/later"]
        reason = f"base_commit {head[:12]} is not in"
    iid = other["instance_id"]
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps([first, other]))
    out = tmp_path / "run"
    with ScriptedServer(editing) as server:
        code = main(local(dataset, server.url, out, "--repos-dir", str(repos), instances=instances))
        err = capsys.readouterr().err
        assert code == 1, err  # one instance did not finish; the batch was not stopped
        # The reason is on the instance's line, on the terminal and in batch.log.
        [line] = [x for x in err.splitlines() if x.startswith(f"{iid}:")]
        assert "exit_error (infrastructure): SetupFailed: the repository could not be" in line
        assert reason in line
        log = (out / "batch.log").read_text()
        assert f"{iid}: exit_error (infrastructure): SetupFailed" in log and reason in log
        # Not a result: no prediction, not finished; the other instance's prediction is there.
        preds = json.loads((out / "preds.json").read_text())
        assert list(preds) == [first["instance_id"]] and preds[first["instance_id"]]["model_patch"]
        assert not output_paths(out, iid).pred.exists()
        assert finished_status(output_paths(out, iid).traj) is None

        # The repository is fixed: the resume runs it again, and skips the finished one.
        subprocess.run(fix, check=True, capture_output=True)
        code = main(local(dataset, server.url, out, "--repos-dir", str(repos), instances=instances))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "resume: 1 instance retried: it failed for infrastructure" in err
    assert "resume: 1 finished instances skipped" in err
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == sorted([first["instance_id"], iid])
    assert "# checked" in preds[iid]["model_patch"]
