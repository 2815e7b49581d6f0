"""Unknown repositories as of their commit: what they leave unpinned resolves against the package
index as it was on their commit's day, exact pins are kept, ``--index-date`` overrides, and the
day is in the images' labels and the run's trajectory.

The expected versions are never written here: they are computed from the index's own upload
times (PEP 700), read through the same build proxy the builds use.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from envs.errors import EnvError
from envs.images import RepoImageSpec, build_repo_image, detect_dependencies
from envs.images.build import image_labels
from envs.images.buildnet import SOCKET_NAME, build_network
from envs.images.snapshot import JSON_TYPE, exact_pins, file_version
from tests.support.containers import one_off
from tests.support.textutil import SUBMIT, bash, cli_error, run_argv

#: The commit's date: iniconfig has releases on both sides of it (2.0.0 in 2023, 2.1.0 in 2025)
#: and six 1.17.0 (pinned below) came out after it (2024-12).
COMMIT_DATE = "2024-06-15T12:00:00Z"
DAY = COMMIT_DATE[:10]
MOMENT = f"{DAY}T00:00:00Z"
FILES = {"requirements.txt": "iniconfig\nsix==1.17.0\n", "README.md": "as of its commit\n"}
VERSIONS = (
    "import importlib.metadata as m; "
    "print(m.version('iniconfig'), m.version('six'), m.version('pip'))"
)


def commit(repo: Path, files: dict[str, str], date: str, message: str = "initial") -> Path:
    """A real commit of ``files`` made at ``date`` (author and committer)."""
    repo.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=pgs@example.com", "-c", "user.name=pgs", *args],
            cwd=repo,
            env=env,
            check=True,
            capture_output=True,
        )

    if not (repo / ".git").exists():
        git("init", "-q", "-b", "main")
    for name, text in files.items():
        (repo / name).write_text(text)
    git("add", "-A")
    git("commit", "-q", "-m", message)
    return repo


def index_page(tmp: Path, project: str) -> dict[str, Any]:
    """The index's page of ``project`` as the build proxy relays it (no moment: every file)."""
    tmp.mkdir(parents=True, exist_ok=True)
    with build_network(tmp, network=True) as _, socket.socket(socket.AF_UNIX) as client:
        client.connect(str(tmp / SOCKET_NAME))
        client.sendall(
            f"GET /i/0/simple/{project}/ HTTP/1.1\r\nAccept: {JSON_TYPE}\r\n\r\n".encode()
        )
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0], head
    page: dict[str, Any] = json.loads(body)
    return page


def newest(page: dict[str, Any], before: str | None = None) -> str:
    """The newest final release with a file uploaded before ``before`` (None: ever), as pip
    chooses it."""
    from packaging.version import Version

    versions = {
        Version(v)
        for f in page["files"]
        if (before is None or f["upload-time"] < before)
        and not f.get("yanked")
        and (v := file_version(f["filename"]))
    }
    return str(max(v for v in versions if not v.is_prerelease))


def uploaded(page: dict[str, Any], version: str) -> str:
    return min(f["upload-time"] for f in page["files"] if file_version(f["filename"]) == version)


def installed(client: Any, tag: str) -> list[str]:
    with one_off(client, tag, ["python", "-c", VERSIONS], network_mode="none") as container:
        assert container.wait(timeout=120)["StatusCode"] == 0, container.logs().decode()
        return str(container.logs(stderr=False).decode()).split()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("index")
    return {p: index_page(tmp / p, p) for p in ("iniconfig", "six", "pip")}


@pytest.fixture
def old_repo(tmp_path: Path) -> Path:
    return commit(tmp_path / "asof-demo", FILES, COMMIT_DATE)


# -- no Docker needed ---------------------------------------------------------------------------


def test_index_date_is_a_day_now_or_commit_from_yaml_or_flags() -> None:
    # YAML reads an unquoted day as a date: it is the same day.
    assert RepoImageSpec.from_yaml("image:\n  index_date: 2024-06-15\n").index_date == DAY
    assert RepoImageSpec.checked({"index_date": "NOW"}).index_date == "now"
    assert RepoImageSpec().index_date is None  # the default: the commit's day
    with pytest.raises(EnvError, match=r"index_date: 'last week' is not a day: give YYYY-MM-DD"):
        RepoImageSpec.from_yaml("image:\n  index_date: last week\n")


def test_exact_pins_are_read_from_every_source_a_plan_installs() -> None:
    files = {
        "requirements.txt": b"six==1.17.0 --hash=sha256:abc  # pinned\niniconfig\nattrs>=23\n"
        b"numpy==1.26.*\n-r other.txt\n",
        "uv.lock": b'[[package]]\nname = "Pluggy"\nversion = "1.5.0"\n'
        b'source = { registry = "x" }\n',
        "pyproject.toml": b'[project]\nname = "demo"\ndependencies = ["click===8.1.7"]\n',
    }
    plan = detect_dependencies(files, RepoImageSpec(pip_packages=["packaging==24.0"]))
    assert plan.pins() == {
        "six": frozenset({"1.17.0"}),
        "pluggy": frozenset({"1.5.0"}),
        "click": frozenset({"8.1.7"}),
        "packaging": frozenset({"24.0"}),
    }
    assert exact_pins(["pip==24.2", "Foo_Bar == 1.0"]) == {
        "pip": frozenset({"24.2"}),
        "foo-bar": frozenset({"1.0"}),
    }


def test_a_wrong_index_date_is_one_error_line(
    old_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(capsys, "env", "build", str(old_repo), "--index-date", "2024-13-01", code=2)
    assert line.endswith("'2024-13-01' is not a day: give YYYY-MM-DD, `now` or `commit`")
    line = cli_error(capsys, *run_argv(old_repo, "--index-date", "yesterday"))
    assert line.startswith("pgs: error: --index-date: index_date: 'yesterday' is not a day")


def test_a_commit_date_python_cannot_read_is_one_error_line_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = commit(tmp_path / "far", FILES, "@999999999999 +0000")  # git takes year 33658
    line = cli_error(capsys, "env", "build", str(repo), code=2)
    assert "('999999999999') is not a day pgs can read" in line
    assert "--index-date YYYY-MM-DD" in line


# -- real Docker, real PyPI through the build proxy ---------------------------------------------


def test_an_old_commit_gets_what_the_index_had_on_its_day_and_keeps_its_pins(
    old_repo: Path, pages: dict[str, dict[str, Any]], docker_client: Any, tmp_path: Path
) -> None:
    expected = newest(pages["iniconfig"], MOMENT)
    assert expected != newest(pages["iniconfig"])  # releases on both sides of the day
    assert uploaded(pages["six"], "1.17.0") > MOMENT  # the pin is newer than the day
    assert uploaded(pages["pip"], "24.2") > MOMENT  # and so is pgs's own pip

    run_id = uuid.uuid4().hex[:12]
    built = build_repo_image(old_repo, run_id=run_id)
    assert built.index_date == DAY
    assert installed(docker_client, built.tag) == [expected, "1.17.0", "24.2"]
    assert image_labels(docker_client, built.tag)["pgs-agent.index_date"] == DAY
    envs = docker_client.images.list(
        filters={"label": ["pgs-agent.kind=env", "pgs-agent.repo=asof-demo"]}
    )
    assert DAY in {i.labels.get("pgs-agent.index_date") for i in envs}

    # Another commit of the same day with the same dependencies reuses the environment layer.
    seen: list[str] = []
    text = f"later that day ({uuid.uuid4().hex})\n"  # a new commit each run: its own layer
    later = commit(old_repo, {"README.md": text}, "2024-06-15T20:00:00Z", "later")
    again = build_repo_image(later, run_id=run_id, status=seen.append)
    assert not again.cache_hit and again.index_date == DAY
    assert any("pgs-repo-asof-demo" in s for s in seen)
    assert not any("pgs-env-" in s for s in seen), seen


def test_index_date_now_gets_todays_newest_and_the_run_records_it(
    old_repo: Path,
    pages: dict[str, dict[str, Any]],
    docker_client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    today = newest(pages["iniconfig"])
    script = [bash(f'python -c "{VERSIONS}"', "Which versions?"), SUBMIT]
    out = tmp_path / "out"
    with ScriptedServer(script) as server:
        code = main(
            run_argv(old_repo, "--index-date", "now", "--output-dir", str(out), url=server.url)
        )
    assert code == 0, capsys.readouterr().err
    traj = json.loads(next(out.glob("*/*.traj")).read_text())
    task = traj["replay_config"]["task"]
    assert task["index_date"] == "now"
    observation = json.dumps(traj["trajectory"][0]["observation"])
    assert f"{today} 1.17.0 24.2" in observation
    assert image_labels(docker_client, task["image"])["pgs-agent.index_date"] == "now"
    # Two days, two environment layers: the commit's own day's image is another one.
    day = build_repo_image(old_repo)
    assert day.tag != task["image"] and day.index_date == DAY
