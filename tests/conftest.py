"""Fixtures shared by the whole suite: real git repositories, a real Docker daemon, base images.

Tests that need Docker skip on a developer machine without it, and FAIL when CI=true: CI
must never go green by skipping the sandbox.

Every test that starts Docker carries the ``docker`` marker (a test using the Docker fixtures
gets it here), so ``pytest -m "not docker"`` is the fast unit run. That run points DOCKER_HOST
at nothing: an unmarked test that reaches for Docker fails there instead of passing slowly, so
the marker stays true (.ci/test runs the unit run first).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from envs.docker_util import LABEL, PID_LABEL
from envs.errors import DockerUnavailable
from tests.support.repos import make_repo

IN_CI = os.environ.get("CI") == "true"
#: Fixtures that need the daemon; a test using any of them (directly or through another
#: fixture) is a Docker test.
DOCKER_FIXTURES = {"docker_client", "base_image"}
NO_DOCKER = "unix:///nonexistent/pgs-unit-run-has-no-docker.sock"


def pytest_configure(config: pytest.Config) -> None:
    # A developer's ./.env (their keys) is not read by the pgs commands tests run in this
    # process or start (tests/cli/test_flags.py starts them without it).
    os.environ.setdefault("PYTHON_DOTENV_DISABLED", "1")
    if "PYTEST_XDIST_WORKER" in os.environ:
        # pytest-xdist gives its workers COLUMNS=80: the terminal is then "80 columns wide" for
        # every command a test runs here, where a run without workers has no width set.
        os.environ.pop("COLUMNS", None)
    if config.getoption("markexpr", "").replace(" ", "") == "notdocker":
        os.environ["DOCKER_HOST"] = NO_DOCKER
    # A shell without job control starts a background job (`pytest ... &` in a script) with
    # SIGINT ignored, and `nohup` starts it with SIGHUP ignored; every process a test starts
    # inherits that: a pgs, a scripted server or a sandbox command the test stops by Ctrl-C or
    # a hang-up would never stop (pgs keeps an ignored signal ignored, as nohup asks). Handled
    # here, a child starts with the default again.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


#: Module fixtures that each cost a whole run, a cluster or a build (test module, fixture): the
#: tests using one are kept on one pytest-xdist worker (``--dist loadgroup``, .ci/test), so it
#: is made once, not once per worker that gets one of them. Module ``*``: a session fixture of
#: this file, whatever module uses it.
SHARED_FIXTURES = {
    ("*", "demo_run"),
    ("test_pgs", "main_run"),
    ("test_ray", "cluster"),
    ("test_select", "selected"),
    ("test_official_images", "pushed"),
    ("test_official_images", "registry"),
    ("test_inspect", "demo"),
    ("test_inspect", "batch_run"),
    ("test_inspect_tui", "demo_traj"),
    ("test_images", "six_image"),
    ("test_buildnet", "probe_repo"),
    ("test_index_date", "pages"),
    ("test_prompts_from_config", "run"),
    ("test_prompts_from_config", "text_run"),
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if DOCKER_FIXTURES & used:
            item.add_marker(pytest.mark.docker)
        module = item.nodeid.split("::")[0].rpartition("/")[2].removesuffix(".py")
        shared = sorted(
            f"{module}.{name}" if mod == module else name
            for mod, name in SHARED_FIXTURES
            if mod in (module, "*") and name in used
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(shared[0]))


# Hypothesis runs without its 200 ms deadline per example: on a loaded machine a slow example
# is the machine's, not the code's (a test that checks a deadline sets its own). In CI it also
# runs derandomised: a red build is reproducible, never a lucky draw.
settings.register_profile("pgs", deadline=None)
settings.register_profile("ci", parent=settings.get_profile("pgs"), derandomize=True, database=None)
settings.load_profile("ci" if IN_CI else "pgs")


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a hosted model: a key or base URL in the developer's shell is dropped."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "README.md": "a tiny repository\n",
        },
    )


def _need_docker() -> Any:
    from envs.docker_util import docker_client

    if os.environ.get("DOCKER_HOST") == NO_DOCKER:
        pytest.fail("this test uses Docker: mark it @pytest.mark.docker (pytest -m 'not docker')")
    try:
        return docker_client()
    except DockerUnavailable as e:
        if IN_CI:
            pytest.fail(f"Docker is required in CI: {e}")
        pytest.skip(f"no Docker daemon: {e}")


@pytest.fixture(scope="session")
def docker_client() -> Any:
    return _need_docker()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    """``pgs-base:py3.9``, built once (debootstrap + import here) and reused afterwards."""
    override = os.environ.get("PGS_TEST_BASE_IMAGE")
    if override:  # an image of your own with python3 and git, to skip the build
        return override
    from envs.images import ensure_base_image

    return ensure_base_image("3.9")


@pytest.fixture(scope="session")
def demo_run(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder a real ``pgs demo`` writes (the recorded model, Docker, the Tester's
    properties), made once for the tests of every module that reads one: a module that writes
    into it copies it first."""
    from agent.cli import main

    out = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPENAI_API_KEY", raising=False)
        mp.delenv("OPENAI_BASE_URL", raising=False)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["demo", "--output-dir", str(out)])
    assert code == 0, stderr.getvalue()
    (run,) = out.iterdir()  # the demo's one instance
    return run


def _our_containers(client: Any) -> list[Any]:
    """Containers this test process started (other sessions may share the daemon)."""
    mine = [f"{LABEL}=1", f"{PID_LABEL}={os.getpid()}"]
    # ignore_removed: a container Docker removes by itself (auto_remove) may go while listed.
    return list(client.containers.list(all=True, filters={"label": mine}, ignore_removed=True))


@pytest.fixture(scope="session", autouse=True)
def no_container_left_behind() -> Iterator[None]:
    """Every container a test starts is removed by the code under test, not by the suite."""
    try:
        from envs.docker_util import docker_client

        client = docker_client()
    except DockerUnavailable:
        yield
        return
    before = {c.id for c in _our_containers(client)}
    yield
    leaked = [c for c in _our_containers(client) if c.id not in before]
    assert not leaked, f"tests left containers behind: {[c.name for c in leaked]}"
