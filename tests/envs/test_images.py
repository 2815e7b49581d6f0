"""Base and repository images: built for real (debootstrap, pip, docker build), cached by hash.
What pip installs in them, detected from the repository, is in test_image_detection.py."""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import cli
from envs import images
from envs.docker_util import LABEL, RUN_LABEL, labels
from envs.errors import DockerUnavailable, EnvError, ImageBuildError, NotAGitRepository
from envs.images import RepoImageSpec, build_repo_image
from tests.support.containers import one_off
from tests.support.repos import git, make_repo

# -- no Docker needed ---------------------------------------------------------------------------


@given(st.text())
def test_repo_image_name_is_always_a_valid_docker_repository(folder: str) -> None:
    name = images.repo_image_name(Path("/x") / folder.replace("/", "_").replace("\0", ""))
    assert re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", name)
    assert name.startswith("pgs-repo-") and len(name) <= 80


def test_unsupported_python_names_the_supported_ones() -> None:
    with pytest.raises(EnvError, match=r"3\.9 \(bullseye\), 3\.11 \(bookworm\), 3\.13"):
        images.base_tag("3.10")
    assert images.base_tag("py3.13") == "pgs-base:py3.13"


def test_spec_from_pgs_yaml_rejects_unknown_fields() -> None:
    spec = RepoImageSpec.from_yaml("image:\n  python: '3.9'\n  pip_packages: [six]\n")
    assert spec == RepoImageSpec(python="3.9", pip_packages=["six"])
    assert RepoImageSpec.from_yaml("other: 1\n") == RepoImageSpec()
    with pytest.raises(EnvError, match=r"\.pgs\.yaml, section image: pip: Extra inputs"):
        RepoImageSpec.from_yaml("image:\n  pip: [six]\n")
    flags = RepoImageSpec(pip_packages=["attrs"])
    assert spec.overridden_by(flags) == RepoImageSpec(python="3.9", pip_packages=["attrs"])


def test_not_a_git_repository_or_bad_commit(tmp_path: Path) -> None:
    with pytest.raises(NotAGitRepository, match="not the top folder of a git repository"):
        build_repo_image(tmp_path)
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    with pytest.raises(NotAGitRepository, match="'nope' is not a commit"):
        build_repo_image(repo, "nope")


def test_docker_unreachable_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/nobody.sock")
    with pytest.raises(DockerUnavailable, match=r"nobody\.sock: start Docker"):
        build_repo_image(repo)


def test_cli_prints_one_error_line_and_returns_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["env", "build", str(tmp_path)]) == cli.USER_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pgs: error: ") and str(tmp_path) in err[0]


# -- real Docker ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_id(docker_client: Any) -> Iterator[str]:
    """Every image these tests build carries this run label; all of them go at the end.

    Images are named by content, so a repository two test runs build alike (two suites on one
    daemon) would share its environment image, and one run's prune would remove the other's
    parent. Each repository here is the run's own: its folder name or a requirements comment
    holds the run id."""
    rid = f"test-images-{uuid.uuid4().hex[:8]}"
    yield rid
    images.prune(docker_client, run_id=rid)


def _six_repo(path: Path, requirements: str = "six\n") -> Path:
    # A unique file: two test runs in the same second must not share a commit (and a tag).
    return make_repo(
        path,
        {
            "requirements.txt": requirements,
            "mod.py": "import six\n\nVALUE = six.text_type('x')\n",
            "marker.txt": uuid.uuid4().hex,
        },
    )


@pytest.fixture(scope="module")
def six_repo(tmp_path_factory: pytest.TempPathFactory, run_id: str) -> Path:
    return _six_repo(tmp_path_factory.mktemp("six") / "Six Repo", f"six\n# {run_id}\n")


@pytest.fixture(scope="module")
def six_image(base_image: str, six_repo: Path, run_id: str) -> images.RepoImage:
    return build_repo_image(six_repo, spec=RepoImageSpec(python="3.9"), run_id=run_id)


def _run(client: Any, image: str, script: str, run_id: str) -> tuple[int, str]:
    with one_off(
        client, image, ["bash", "-c", script], network_mode="none", labels=labels(run_id)
    ) as container:
        code = container.wait(timeout=120)["StatusCode"]
        return code, container.logs().decode()


def test_repo_image_holds_the_repo_at_its_commit_with_deps(
    docker_client: Any, six_image: images.RepoImage, six_repo: Path, run_id: str
) -> None:
    assert re.fullmatch(r"pgs-repo-six-repo:[0-9a-f]{12}", six_image.tag)
    assert not six_image.cache_hit and six_image.python == "3.9"
    head = git(six_repo, "rev-parse", "HEAD").strip()
    script = (
        "python3 -c 'import six, pytest, hypothesis, mod' && git -C /repo rev-parse HEAD && "
        "python3 -c 'import mod' && env -u PYTHONDONTWRITEBYTECODE python3 -m pytest -q --co "
        ">/dev/null; "
        "git -C /repo status --porcelain && echo clean"
    )
    code, output = _run(docker_client, six_image.tag, script, run_id)
    assert code == 0, output
    assert output.split() == [head, "clean"]
    found = docker_client.images.get(six_image.tag)
    assert found.labels[LABEL] == "1" and found.labels[RUN_LABEL] == run_id
    assert found.labels[f"{LABEL}.kind"] == "repo"


def test_unchanged_repo_is_a_cache_hit(
    docker_client: Any, six_image: images.RepoImage, six_repo: Path, run_id: str
) -> None:
    def ours() -> set[str]:  # other processes may build other images on the same daemon
        found = docker_client.images.list(filters={"label": f"{LABEL}.repo={six_repo.name}"})
        return {i.id for i in found}

    before = ours()
    again = build_repo_image(six_repo, spec=RepoImageSpec(python="3.9"), run_id=run_id)
    assert again.cache_hit
    assert (again.tag, again.image_id) == (six_image.tag, six_image.image_id)
    assert ours() == before and six_image.image_id in before


def test_cli_build_reports_the_cache_hit(
    six_image: images.RepoImage, six_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["env", "build", str(six_repo), "--python", "3.9"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == six_image.tag
    assert "cache hit" in err


def test_changed_requirements_give_a_new_image(
    docker_client: Any, six_image: images.RepoImage, six_repo: Path, run_id: str, tmp_path: Path
) -> None:
    subprocess.run(["git", "clone", "-q", str(six_repo), str(tmp_path / "Six Repo")], check=True)
    changed = make_repo(
        tmp_path / "Six Repo", {"requirements.txt": f"six\niniconfig\n# {run_id}\n"}
    )
    built = build_repo_image(changed, spec=RepoImageSpec(python="3.9"), run_id=run_id)
    assert not built.cache_hit and built.tag != six_image.tag
    assert built.tag.split(":")[0] == six_image.tag.split(":")[0]
    code, output = _run(docker_client, built.tag, "python3 -c 'import iniconfig, six'", run_id)
    assert code == 0, output


def test_bad_requirement_fails_with_pips_error(
    base_image: str, tmp_path: Path, run_id: str
) -> None:
    repo = _six_repo(tmp_path / f"bad-{run_id}", requirements="pgs-no-such-package-xyz\n")
    with pytest.raises(ImageBuildError) as caught:
        build_repo_image(repo, spec=RepoImageSpec(python="3.9"), run_id=run_id)
    assert caught.value.step.endswith("python -m pip install -r requirements.txt")
    assert "--install CMD" in str(caught.value) and "--setup CMD" in str(caught.value)
    assert re.search(
        r"ERROR: No matching distribution found for pgs-no-such-package-xyz", str(caught.value)
    )


def _import_scratch_image(client: Any, tag: str, image_labels: dict[str, str]) -> str:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    changes = [f"LABEL {k}={v}" for k, v in image_labels.items()] or None
    repository, version = tag.split(":")
    client.api.import_image(
        src=data.getvalue(), repository=repository, tag=version, changes=changes
    )
    return str(client.images.get(tag).id)


def test_prune_removes_labelled_and_keeps_the_rest(docker_client: Any) -> None:
    rid = f"test-prune-{uuid.uuid4().hex[:8]}"
    name = f"pgs-test-prune-{rid}"
    ours = _import_scratch_image(docker_client, f"{name}:labelled", labels(rid))
    theirs = _import_scratch_image(docker_client, f"{name}:unlabelled", {})
    ours_box = docker_client.containers.create(ours, ["/nothing"], labels=labels(rid))
    theirs_box = docker_client.containers.create(theirs, ["/nothing"])
    try:
        assert images.prune(docker_client, run_id=rid) == (1, 1)
        remaining = {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}
        assert theirs_box.id in remaining and ours_box.id not in remaining
        tags = {t for i in docker_client.images.list(name) for t in i.tags}
        assert tags == {f"{name}:unlabelled"}
    finally:
        theirs_box.remove(force=True)
        docker_client.images.remove(theirs, force=True)


def test_pyproject_project_is_installed_editable_with_its_test_extra(
    docker_client: Any, base_image: str, tmp_path: Path, run_id: str
) -> None:
    pyproject = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "hp"
version = "0.1"
dependencies = ["six"]

[project.optional-dependencies]
test = ["iniconfig"]
"""
    repo = make_repo(
        tmp_path / f"hp-{run_id}",
        {"pyproject.toml": pyproject, "src/hp/__init__.py": f"MARK = {uuid.uuid4().hex!r}\n"},
    )
    built = build_repo_image(repo, spec=RepoImageSpec(python="3.9"), run_id=run_id)
    script = "python3 -c 'import hp, six, iniconfig; print(hp.__file__)' && git status --porcelain"
    code, output = _run(docker_client, built.tag, script, run_id)
    assert (code, output.strip()) == (0, "/repo/src/hp/__init__.py"), output


def test_install_commands_run_offline_and_a_failure_names_the_command(
    base_image: str, tmp_path: Path, run_id: str
) -> None:
    repo = _six_repo(tmp_path / f"offline-{run_id}")
    command = "python3 -m pip install pgs-no-such-package-xyz"
    spec = RepoImageSpec(python="3.9", install=["python3 -m pip install six", command])
    with pytest.raises(ImageBuildError) as caught:
        build_repo_image(repo, spec=spec, run_id=run_id)
    assert caught.value.step.endswith(command)
    assert "No matching distribution found for pgs-no-such-package-xyz" in str(caught.value)


def test_an_extra_only_the_tox_commands_install_is_in_the_image_and_its_tests_collect(
    docker_client: Any, base_image: str, tmp_path: Path, run_id: str
) -> None:
    # As black's blackd tests: a test file imports what only the `d` extra brings, and only
    # tox's `commands` install it (six: pure Python, not in the image otherwise; iniconfig
    # would be, with pytest). Collected offline with no error, the extra's package there.
    pyproject = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "dx"
version = "0.1"

[project.optional-dependencies]
d = ["six"]
docs = ["pgs-no-such-package-xyz"]  # not asked for by the test set-up: never installed
"""
    tox = "[testenv]\nskip_install = true\ncommands =\n    pip install -e .[d]\n    pytest tests\n"
    repo = make_repo(
        tmp_path / f"dx-{run_id}",
        {
            "pyproject.toml": pyproject,
            "tox.ini": tox,
            "src/dx/__init__.py": f"MARK = {uuid.uuid4().hex!r}\n",
            "tests/test_server.py": "import six\n\n\ndef test_it():\n    assert six\n",
        },
    )
    built = build_repo_image(repo, spec=RepoImageSpec(python="3.9"), run_id=run_id)
    script = "python3 -m pytest --collect-only -q -p no:cacheprovider tests"
    code, output = _run(docker_client, built.tag, script, run_id)
    assert code == 0, output  # without the extra: "1 error during collection", exit 2
    assert output.strip().splitlines()[-1].startswith("1 test collected"), output
