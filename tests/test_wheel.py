"""The built wheel is pgs: every data file of agent/, envs/ and tools/ ships in it (examples,
tool bundles, config, templates, the helper, recipes), and installed into a fresh virtual
environment, with its dependencies from pip's index, it gives a ``pgs`` whose demo runs with no
Docker (the no-daemon default: the local sandbox, with a note) and no activated environment.

A build, a venv, an install: uv (which ``.ci/setup`` installs) does the build and the install
in seconds from its cache where pip takes minutes on a loaded machine, and installs the same
packages from the same index; pip where uv is missing. In the unit run (no ``docker`` marker),
so CI runs it. Where pip's index is not reachable it skips on a
developer's machine and fails in CI, as the Docker tests do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI") == "true"
NO_DOCKER = "unix:///nonexistent/pgs-wheel-test-has-no-docker.sock"


def run(
    argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def source_tree(dest: Path) -> Path:
    """The working tree's files (tracked and new, not ignored), so that a build leaves nothing
    in the checkout and tests what is about to be committed."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def shipped_data(source: Path) -> set[str]:
    """Where each file of agent/, envs/ and tools/ lands in the wheel (tools/ is pgs_tools)."""
    names = set()
    for top, package in (("agent", "agent"), ("envs", "envs"), ("tools", "pgs_tools")):
        for path in (source / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                names.add(f"{package}/{path.relative_to(source / top).as_posix()}")
    return names


def uv() -> list[str] | None:
    """``python -m uv`` of this environment, or None where uv is not installed."""
    found = run([sys.executable, "-m", "uv", "--version"])
    return [sys.executable, "-m", "uv"] if found.returncode == 0 else None


def installed(step: subprocess.CompletedProcess[str], what: str) -> None:
    if step.returncode == 0:
        return
    tail = "\n".join((step.stdout + step.stderr).strip().splitlines()[-15:])
    if not IN_CI and ("Could not find a version" in tail or "connection" in tail.lower()):
        pytest.skip(f"{what}: pip's index is not reachable here:\n{tail}")
    pytest.fail(f"{what} failed:\n{tail}")


@pytest.mark.timeout(900)
def test_the_wheel_installed_in_a_fresh_venv_runs_the_demo_without_docker(
    tmp_path: Path,
) -> None:
    source = source_tree(tmp_path / "src")
    dist = tmp_path / "dist"
    fast = uv()
    # uv leaves a lock file per source folder in the temporary folder (uv-setuptools-*.lock):
    # the test's own, removed with it.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    tools_env = {**os.environ, "TMPDIR": str(scratch)}
    if fast:
        build = [*fast, "build", "--wheel", "-q", "--native-tls", "--out-dir", str(dist), "."]
    else:
        build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), "."]
    built = run(build, cwd=source, env=tools_env)
    installed(built, "building the wheel")
    (wheel,) = dist.glob("pgs_agent-*.whl")
    with zipfile.ZipFile(wheel) as z:
        inside = set(z.namelist())
    missing = shipped_data(source) - inside
    assert not missing, f"not in the wheel: {sorted(missing)[:20]}"
    for needed in (
        "agent/examples/median/replay.yaml",
        "agent/config/default.yaml",
        "envs/helper/pgs_helper.py",
        "pgs_tools/edit/bin/str_replace_editor",
    ):
        assert needed in inside

    venv = tmp_path / "venv"
    installed(run([sys.executable, "-m", "venv", str(venv)]), "making the venv")
    python = str(venv / "bin" / "python")
    if fast:
        install = [*fast, "pip", "install", "-q", "--native-tls", "--python", python, str(wheel)]
    else:
        install = [python, "-m", "pip", "install", "-q", str(wheel)]
    installed(run(install, env=tools_env), "installing the wheel")

    # Not activated: PATH is the user's, without the venv; no checkout on PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
    env["DOCKER_HOST"] = NO_DOCKER
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    done = run([str(venv / "bin" / "pgs"), "demo", "--quiet"], cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert (
        f"pgs: note: cannot reach the Docker daemon at {NO_DOCKER}: the recorded demo runs with "
        "--sandbox local (on this machine, in a temporary copy, with no isolation); pass "
        "--sandbox docker to insist on Docker"
    ) in lines
    assert any(
        line.startswith("hidden tests on the patched repository: PASS (not sealed:")
        for line in lines
    ), done.stderr
    assert (cwd / "trajectories" / "demo" / "stats__issue" / "stats__issue.patch").is_file()
