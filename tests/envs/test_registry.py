"""The sandbox registry (envs/registry.py): a config's ``type`` names a built-in kind or a user's
own sandbox class by import path; a ``type`` that names neither is one ``pgs: error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.run.config import RunConfig, dump, load_config
from envs.docker_sandbox import DockerSandboxConfig
from envs.local import LocalSandboxConfig
from envs.registry import SandboxTypeError, config_class, sandbox_config
from tests.support.repos import make_repo
from tests.support.sandboxes import PATH, MarkedConfig, MarkedSandbox
from tests.support.textutil import BUGGY, SUBMIT, bash, cli_error, run_argv


def test_built_in_kinds_and_their_configs() -> None:
    assert config_class("docker") is DockerSandboxConfig
    assert config_class("local") is LocalSandboxConfig
    assert DockerSandboxConfig.takes_image and not LocalSandboxConfig.takes_image
    assert LocalSandboxConfig.copies_repo and not DockerSandboxConfig.copies_repo
    local = sandbox_config({"type": "local", "timeout": 5})
    assert isinstance(local, LocalSandboxConfig) and local.timeout == 5
    assert isinstance(sandbox_config({"image": "x"}), DockerSandboxConfig)  # docker by default
    assert DockerSandboxConfig(image="a").updated(image="b").image_tag() == "b"


def test_a_users_class_by_import_path_validates_with_its_own_config() -> None:
    config = load_config(None, {"model": {"name": "m"}, "sandbox": {"type": PATH, "marker": "x"}})
    assert isinstance(config.sandbox, MarkedConfig) and config.sandbox.marker == "x"
    # The replay config keeps the class's own fields, and reads back the same.
    assert dump(config)["sandbox"] == {"type": PATH, "marker": "x"}
    assert RunConfig.model_validate(dump(config)).sandbox == config.sandbox


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("no_such_package.box:Box", "cannot import no_such_package.box"),
        ("tests.support.sandboxes:Missing", "tests.support.sandboxes has no Missing"),
        ("tests.support.sandboxes:NoConfigClass", "NoConfigClass has no config_class"),
        ("kubernetes", "unknown sandbox type 'kubernetes': use docker, local, or an import path"),
    ],
)
def test_a_bad_sandbox_type_is_one_error(kind: str, says: str) -> None:
    with pytest.raises(SandboxTypeError, match=says):
        config_class(kind)


def test_a_bad_import_path_in_a_config_file_is_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "textutil", BUGGY)
    config = tmp_path / "box.yaml"
    config.write_text("sandbox:\n  type: no_such_package.box:Box\n")
    line = cli_error(capsys, *run_argv(repo, "--config", str(config)))
    assert "sandbox.type: sandbox type 'no_such_package.box:Box': cannot import" in line
    config.write_text(f"sandbox:\n  type: {PATH}\n  marker: 1\n  memory: 2g\n")
    line = cli_error(capsys, *run_argv(repo, "--config", str(config)))
    assert line.endswith(
        "box.yaml: sandbox.marker: Input should be a valid string, got 1; "
        "unknown key sandbox.memory"
    )  # the fields of the user's class, not of the Docker sandbox


def test_pgs_run_in_a_users_sandbox_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real ``pgs run`` with the scripted model: the class named in --config opens the
    sandbox with its own config; the run's commands see it, the patch comes out as usual."""
    repo = make_repo(tmp_path / "textutil", BUGGY)
    config = tmp_path / "box.yaml"
    config.write_text(f"sandbox:\n  type: {PATH}\n  marker: from-my-config\n")
    script = [
        bash("echo marker=$PGS_MARKER"),
        bash("sed -i 's/text.lower()/text.upper()/' textutil.py"),
        SUBMIT,
    ]
    out = tmp_path / "out"
    MarkedSandbox.opened.clear()
    with ScriptedServer(script) as server:
        argv = run_argv(repo, "--config", str(config), "--output-dir", str(out), url=server.url)
        code = main(argv)
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert [marker for _, marker in MarkedSandbox.opened] == ["from-my-config"]
    assert "+    return text.upper()" in stdout
    [traj_path] = out.glob("*/*.traj")
    traj = json.loads(traj_path.read_text())
    assert "marker=from-my-config" in traj["trajectory"][0]["observation"]
    assert traj["replay_config"]["sandbox"] == {"type": PATH, "marker": "from-my-config"}
    assert "return text.lower()" in (repo / "textutil.py").read_text()  # the host is untouched


def test_the_sandbox_flag_takes_an_import_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sandbox package.module:Class`` on the command line, its default config: no file."""
    repo = make_repo(tmp_path / "textutil", BUGGY)
    out = tmp_path / "out"
    MarkedSandbox.opened.clear()
    with ScriptedServer([SUBMIT]) as server:
        code = main(run_argv(repo, "--sandbox", PATH, "--output-dir", str(out), url=server.url))
    err = capsys.readouterr().err
    assert code == 0, err
    assert len(MarkedSandbox.opened) == 1
    line = cli_error(capsys, *run_argv(repo, "--sandbox", "no_such_package.box:Box"))
    assert "cannot import" in line
