"""``--image-source official``: swebench's published images, pulled from a registry, graded.

A real registry (the ``docker-registry`` binary, on 127.0.0.1, storage in a temporary folder)
holds an image in the official layout, built here for a self-made instance: the repository in
``/testbed``, a conda environment ``testbed`` under ``/opt/miniconda3/envs`` (a venv with
pytest) activated by ``source /opt/miniconda3/bin/activate; conda activate testbed``, and the
system ``python3``. ``pgs eval --image-source official --registry 127.0.0.1:PORT`` pulls it
(the local tags are removed first) and grades with the record's own conda evaluation script.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.swebench import END_TEST_OUTPUT, START_TEST_OUTPUT, Environments, Instance
from agent.swebench.official import official_name, official_reference, registry_arg
from envs import images
from envs.docker_util import labels
from tests.support.swe_dataset import Dataset, eval_summary, git, make_dataset

IN_CI = os.environ.get("CI") == "true"
IID = "acme__textkit-1"
#: The harness's name of the instance's image (no ``image`` field in the record).
SCHEME_NAME = "swebench/sweb.eval.x86_64.acme_1776_textkit-1:latest"
#: A record's own ``image`` field, a name the scheme would not give.
RECORD_IMAGE = "pgs-test/official-textkit:v1"
ACTIVATE = b"""# pgs test: a stand-in for conda's activate script; `conda activate NAME` puts
# /opt/miniconda3/envs/NAME/bin first on PATH, as conda does.
conda() {
    if [ "${1:-}" = activate ] && [ -n "${2:-}" ]; then
        export CONDA_DEFAULT_ENV="$2"
        export PATH="/opt/miniconda3/envs/$2/bin:$PATH"
    fi
}
export PATH="/opt/miniconda3/bin:$PATH"
"""
NO_EFFECT = """diff --git a/NOTES.md b/NOTES.md
new file mode 100644
--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1 @@
+nothing is fixed here
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on 127.0.0.1:<free port>, its storage in a temporary folder."""
    binary = shutil.which("docker-registry")
    if binary is None:
        message = "docker-registry is missing: run .ci/setup (apt-get install docker-registry)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (root / "registry.log").open("wb")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the registry did not start: {(root / 'registry.log').read_text()[-2000:]}"
                )
            time.sleep(0.2)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("official"))


def conda_eval_script(record: dict[str, Any]) -> str:
    """An evaluation script in the harness's shape for its conda images."""
    base = record["base_commit"]
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "source /opt/miniconda3/bin/activate",
            "conda activate testbed",
            "cd /testbed",
            "git status",
            "python -c \"import sys; print('TESTBED-PREFIX', sys.prefix)\"",
            f"git checkout {base} tests/test_core.py",
            "git apply -v - <<'EOF_114329324912'",
            record["test_patch"].rstrip("\n"),
            "EOF_114329324912",
            f"echo '{START_TEST_OUTPUT}'",
            "pytest -rA -p no:cacheprovider tests/test_core.py",
            f"echo '{END_TEST_OUTPUT}'",
            f"git checkout {base} tests/test_core.py",
        ]
    )


def official_record(dataset: Dataset, image: str | None) -> dict[str, Any]:
    """The instance as an official record: its own conda script, no pgs build fields. Its
    Python (3.6) has no base image here: an official image brings its own."""
    record = dict(dataset.record(IID))
    for key in ("install", "test_cmd"):
        record.pop(key)
    record["python"] = "3.6"
    record["eval_script"] = conda_eval_script(record)
    if image:
        record["image"] = image
    return record


@pytest.fixture(scope="module")
def pushed(
    registry: str, dataset: Dataset, base_image: str, docker_client: Any
) -> Iterator[list[str]]:
    """The instance's image in the official layout, pushed to ``registry`` under the scheme's
    name and under RECORD_IMAGE, with no local tag left; every image made is removed after."""
    record = dataset.record(IID)
    work = images.cache_dir() / "build"
    work.mkdir(parents=True, exist_ok=True)
    testbed = work / f"official-testbed-{os.getpid()}"
    shutil.rmtree(testbed, ignore_errors=True)
    git(dataset.root, "clone", "-q", str(dataset.source), str(testbed))
    git(testbed, "checkout", "-q", record["base_commit"])
    env = "/opt/miniconda3/envs/testbed"
    layer = images.Layer(
        base=base_image,
        steps=[
            f"python3 -m venv {env}",
            f"{env}/bin/pip install -q pytest",
            f"cd /testbed && {env}/bin/pip install -q -e .",
            "git config --system --add safe.directory '*'",
            "cd /testbed && git status --porcelain | sed -n 's|^?? |/|p' >> .git/info/exclude",
        ],
        # This suite's own run label: two suites on one daemon build the same content, and one
        # removing the image by its id would take the other's with it.
        labels=labels(f"test-official-{uuid.uuid4().hex[:8]}", kind="test-official"),
        workdir="/testbed",
        files={"/opt/miniconda3/bin/activate": ACTIVATE},
        folders={"/testbed": testbed},
    )
    refs = [f"{registry}/{SCHEME_NAME}", f"{registry}/{RECORD_IMAGE}"]
    image_id = ""
    try:
        image_id = layer.build(docker_client, refs[0])
        built = docker_client.images.get(image_id)
        built.tag(refs[1])
        for ref in refs:
            repository, tag = ref.rsplit(":", 1)
            for chunk in docker_client.api.push(repository, tag=tag, stream=True, decode=True):
                assert "error" not in chunk, chunk
        for ref in refs:
            docker_client.images.remove(ref)
        yield refs
    finally:
        for ref in refs:
            with contextlib.suppress(Exception):
                docker_client.images.remove(ref, force=True)
        if image_id:
            with contextlib.suppress(Exception):
                docker_client.images.remove(image_id, force=True)
        shutil.rmtree(testbed, ignore_errors=True)


def run_eval(
    dataset: Dataset, record: dict[str, Any], patch: str, out: Path, registry: str
) -> dict[str, Any]:
    out.mkdir(parents=True)
    instances = out / "instances.json"
    instances.write_text(json.dumps([record]))
    preds = dataset.write_preds(out / "preds.json", {IID: patch})
    extra = ["--image-source", "official", "--registry", registry]
    return eval_summary(preds, instances, out, *extra)


# ------------------------------------------------------------------------------ names
def test_the_record_image_wins_else_the_harness_scheme_in_lower_case(dataset: Dataset) -> None:
    record = dict(dataset.record(IID))
    assert official_name(Instance.from_record(record)) == SCHEME_NAME
    upper = {**record, "instance_id": "Acme__TextKit-1"}
    assert official_name(Instance.from_record(upper)) == SCHEME_NAME
    verified = {**record, "image": "swebench/sweb.eval.x86_64.psf_1776_requests-6028:latest"}
    assert official_name(Instance.from_record(verified)) == verified["image"]
    untagged = {**record, "image": "mirror/textkit"}
    assert official_reference(Instance.from_record(untagged), "127.0.0.1:5000") == (
        "127.0.0.1:5000/mirror/textkit:latest"
    )
    assert registry_arg("http://127.0.0.1:5000/") == "127.0.0.1:5000"
    with pytest.raises(Exception, match="HOST:PORT"):
        registry_arg("not a registry")


def test_an_official_image_brings_its_own_python(dataset: Dataset) -> None:
    """Python 3.6 has no base image here: built images refuse it, official ones need none."""
    instance = Instance.from_record(official_record(dataset, None))
    spec = Environments(None, {}, "official").spec(instance)
    assert spec.python == "3.6" and spec.deviations == []
    with pytest.raises(Exception, match=r"Python 3\.6"):
        Environments(None, {}, "build").spec(instance)


# ------------------------------------------------------------------------------ registry
@pytest.mark.docker
def test_official_images_from_a_mirror_are_pulled_and_graded(
    dataset: Dataset, pushed: list[str], registry: str, docker_client: Any, tmp_path: Path
) -> None:
    import docker.errors

    for ref in pushed:  # nothing local: pgs eval must pull
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(ref)
    # The record's own `image`, the gold patch: resolved.
    gold = official_record(dataset, RECORD_IMAGE)
    summary = run_eval(dataset, gold, gold["patch"], tmp_path / "gold", registry)
    assert summary["resolved_ids"] == [IID], summary["errors"]
    assert summary["deviations"] == {}
    log = (tmp_path / "gold" / "report" / "m" / IID / "test_output.txt").read_text()
    assert "TESTBED-PREFIX /opt/miniconda3/envs/testbed" in log
    assert "PASSED tests/test_core.py::test_slugify_lowercases" in log
    assert docker_client.images.get(pushed[1]).labels.get("pgs-agent") == "1"
    # No `image` field: the harness's name; a patch that changes nothing: not resolved.
    plain = official_record(dataset, None)
    summary = run_eval(dataset, plain, NO_EFFECT, tmp_path / "none", registry)
    assert summary["unresolved_ids"] == [IID], summary["errors"]
    assert summary["error_ids"] == []
    report = json.loads((tmp_path / "none" / "report" / "m" / IID / "report.json").read_text())
    assert report[IID]["patch_successfully_applied"]
    assert report[IID]["tests_status"]["FAIL_TO_PASS"]["failure"] == [
        "tests/test_core.py::test_slugify_lowercases"
    ]
    docker_client.images.get(pushed[0])  # pulled


@pytest.mark.docker
def test_an_unreachable_registry_is_one_clear_error_line(
    dataset: Dataset, registry: str, docker_client: Any, tmp_path: Path
) -> None:
    record = official_record(dataset, "pgs-test/absent:v1")
    closed = f"127.0.0.1:{free_port()}"
    summary = run_eval(dataset, record, record["patch"], tmp_path / "closed", closed)
    assert summary["error_ids"] == [IID]
    error = summary["errors"][IID]
    assert "\n" not in error and "Traceback" not in error
    assert error.startswith(f"cannot pull the official image {closed}/pgs-test/absent:v1: ")
    assert "unreachable" in error and "--image-source build" in error
    written = (tmp_path / "closed" / "report" / "m" / IID / "error.txt").read_text()
    assert written == error + "\n"
    # A registry that answers but lacks the image says so.
    summary = run_eval(dataset, record, record["patch"], tmp_path / "absent", registry)
    error = summary["errors"][IID]
    assert "\n" not in error and "no such image" in error and "--image-source build" in error
