"""How pytest is started (agent/pgs/pgs_pytest_plugin_start.py, runner.pytest_command): only pgs
decides what loads. Each vector is planted the way a Generator's shell command would plant it,
after the entry points were pinned, and must not change the plugin's report: a repository test
that fails (``test_probe.py::test_bug``) still fails and nothing else appears. Every planted
plugin flips failing reports to passed (:data:`FLIP`). On the host (a local sandbox: folders on
the environment's ``PYTHONPATH`` stand in for site-packages, the host's own venv is never
written) and in Docker (Python 3.9, pytest 7: the real site-packages and ``/``).

What must still work: the repository's own conftest.py and pytest.ini, an entry-point plugin
installed before the pin, pytester runs that inherit it, the rerun command of the feedback.

On the old start (``PYTHONPATH=<plugin folder> python -m pytest -p pgs_pytest_plugin``) every
vector test fails: the planted plugin, conftest.py or ``sitecustomize`` flips ``test_bug`` to
passed, the repository's ``pgs_pytest_plugin.py`` or ``pytest.py`` replaces pgs's plugin or
pytest (no report, or a forged one), the repository's ``hypothesis/`` makes the property pass,
and ``pytest.toml`` was not among the files restored to the base commit. The tests of what
must still work fail there too: ``pin_entry_points`` and ``pytest_command`` did not exist.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.pgs.check import original_tests
from agent.pgs.runner import (
    CheckSettings,
    pin_entry_points,
    pinned,
    plugin_dir,
    pytest_command,
    run_pytest,
)
from agent.record.check import CheckReport, TestResult
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.local import LocalSandbox, LocalSandboxConfig
from envs.sandbox import Sandbox
from tests.support.repos import make_repo

#: A plugin (or conftest.py) that makes every failing test pass.
FLIP = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""
#: A plugin installed with the image: a fixture the repository's tests use.
ANSWER = """\
import pytest


@pytest.fixture
def pinned_answer():
    return 42
"""
PROBE = {"test_probe.py": "def test_bug():\n    assert 1 == 2\n"}
PROPERTY = {
    "test_prop.py": (
        "from hypothesis import given, strategies as st\n\n\n"
        "@given(st.integers())\n"
        "def test_prop(n):\n"
        "    assert n != n\n"
    )
}
BUG = "test_probe.py::test_bug"


def outcomes(report: CheckReport) -> dict[str, str]:
    assert not report.errors, report.errors
    return {r.nodeid: r.outcome for r in report.results}


def check(box: Sandbox, settings: CheckSettings, targets: list[str] | None = None) -> CheckReport:
    return run_pytest(box, targets or ["test_probe.py"], settings=settings, timeout=180)


def plant(box: Sandbox, files: dict[str, str]) -> None:
    """Files written as a shell command of the Generator writes them (absolute or from the
    repository's root)."""
    for path, text in files.items():
        done = box.run(
            f'mkdir -p -- "$(dirname -- {shlex.quote(path)})" && '
            f"printf %s {shlex.quote(text)} > {shlex.quote(path)}"
        )
        assert done.ok, done.output


def distribution(folder: str, name: str, source: str, entry: str | None = None) -> dict[str, str]:
    """An installed distribution ``name`` in ``folder``: its module and a dist-info whose
    entry_points.txt registers it as the pytest plugin ``entry``."""
    info = f"{folder}/{name}-1.0.dist-info"
    return {
        f"{folder}/{name}.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/entry_points.txt": f"[pytest11]\n{entry or name} = {name}\n",
    }


# -- on the host: a local sandbox ------------------------------------------------------------


class Host:
    """Local sandboxes of a repository (each works in a copy of its own) whose environment's
    PYTHONPATH holds ``tmp/site`` (the host's venv is shared: nothing is installed there)."""

    def __init__(self, tmp: Path, files: dict[str, str]) -> None:
        self.repo = make_repo(tmp / "repo", {**PROBE, **PROPERTY, **files})
        self.site = tmp / "site"
        self.site.mkdir()

    def sandbox(self, **env: str) -> LocalSandbox:
        return LocalSandbox(
            self.repo, LocalSandboxConfig(env={"PYTHONPATH": str(self.site), **env})
        )


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Host, LocalSandbox, CheckSettings]]:
    place = Host(tmp_path, {})
    plant_files = distribution(str(place.site), "pgs_answer", ANSWER)
    with place.sandbox() as box:
        plant(box, plant_files)
        settings = pinned(box, CheckSettings(python=sys.executable))
        yield place, box, settings


def test_the_pin_lists_the_entry_points_of_the_original_environment(
    host: tuple[Host, LocalSandbox, CheckSettings],
) -> None:
    _, box, settings = host
    assert settings.entry_points is not None
    names = {(e.name, e.value, e.dist) for e in settings.entry_points}
    assert ("pgs_answer", "pgs_answer", "pgs_answer") in names
    assert any(e.dist == "hypothesis" for e in settings.entry_points)
    assert pin_entry_points(box, python=sys.executable) == settings.entry_points


HOST_VECTORS: dict[str, Callable[[Host], dict[str, str]]] = {
    "a pytest11 entry point added after the pin": lambda h: distribution(
        str(h.site), "pgs_flip", FLIP
    ),
    "an entry point of the repository's own folder": lambda h: distribution(".", "pgs_flip", FLIP),
    "a new entry point in a pinned distribution": lambda h: {
        f"{h.site}/pgs_flip.py": FLIP,
        f"{h.site}/pgs_answer-1.0.dist-info/entry_points.txt": (
            "[pytest11]\npgs_answer = pgs_answer\nflip = pgs_flip\n"
        ),
    },
    "pgs_pytest_plugin.py in the repository's root": lambda h: {"pgs_pytest_plugin.py": FLIP},
    "pytest.py in the repository's root": lambda h: {
        "pytest.py": (
            "import json, os\n"
            "json.dump({'results': [], 'errors': [], 'exit_code': 0, 'duration': 0}, "
            "open(os.environ['PGS_REPORT'], 'w'))\n"
        )
    },
    # The sandbox's copy of the repository is in a folder of its own.
    "pytest.ini and conftest.py above the repository": lambda h: {
        "../pytest.ini": "[pytest]\n",
        "../conftest.py": FLIP,
    },
}


@pytest.mark.parametrize("vector", list(HOST_VECTORS))
def test_a_vector_planted_after_the_pin_does_not_change_the_report_on_the_host(
    host: tuple[Host, LocalSandbox, CheckSettings], vector: str
) -> None:
    place, box, settings = host
    before = outcomes(check(box, settings))
    assert before == {BUG: "failed"}
    plant(box, HOST_VECTORS[vector](place))
    assert outcomes(check(box, settings)) == before


def test_a_hypothesis_package_in_the_repository_does_not_stand_in_for_hypothesis(
    host: tuple[Host, LocalSandbox, CheckSettings],
) -> None:
    _, box, settings = host
    before = outcomes(check(box, settings, ["test_prop.py"]))
    assert before == {"test_prop.py::test_prop": "failed"}
    plant(
        box,
        {
            "hypothesis/__init__.py": "def given(*a, **k):\n    return lambda f: lambda: None\n",
            "hypothesis/strategies.py": "def integers():\n    return None\n",
        },
    )
    assert outcomes(check(box, settings, ["test_prop.py"])) == before


def test_pythonpath_and_pythonstartup_of_the_environment_load_nothing(tmp_path: Path) -> None:
    place = Host(tmp_path, {})
    evil = tmp_path / "evil"
    files = {
        # Run at start-up from PYTHONPATH by every interpreter that reads it.
        f"{evil}/sitecustomize.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'pgs_flip'\n",
        f"{evil}/pgs_flip.py": FLIP,
        f"{evil}/startup.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'pgs_flip'\n",
    }
    settings = CheckSettings(python=sys.executable)
    with place.sandbox() as box:
        plant(box, files)
        settings = pinned(box, settings)
        assert outcomes(check(box, settings)) == {BUG: "failed"}
    env = {"PYTHONPATH": f"{evil}:{place.site}", "PYTHONSTARTUP": f"{evil}/startup.py"}
    with place.sandbox(**env) as box:
        assert outcomes(check(box, settings)) == {BUG: "failed"}


def test_the_repositorys_own_conftest_and_pytest_ini_and_a_pinned_plugin_still_load(
    host: tuple[Host, LocalSandbox, CheckSettings],
) -> None:
    _, box, settings = host
    plant(
        box,
        {
            "pytest.ini": "[pytest]\npython_functions = should_*\n",
            "conftest.py": "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 41\n",
            "test_legit.py": (
                "def should_use_both(answer, pinned_answer):\n"
                "    assert answer + 1 == pinned_answer\n\n\n"
                "def test_not_collected():\n"
                "    assert False\n"
            ),
        },
    )
    report = check(box, settings, ["test_legit.py"])
    assert outcomes(report) == {"test_legit.py::should_use_both": "passed"}


def test_a_nested_pytest_ini_is_the_configuration_of_the_tests_below_it(
    host: tuple[Host, LocalSandbox, CheckSettings],
) -> None:
    _, box, settings = host
    plant(
        box,
        {
            "sub/pytest.ini": "[pytest]\npython_functions = should_*\n",
            "sub/test_nested.py": "def should_run():\n    pass\n\n\ndef test_skipped():\n"
            "    assert False\n",
        },
    )
    # pytest's own rule: the rootdir is the configuration file's folder (inside the repository).
    assert outcomes(check(box, settings, ["sub/test_nested.py"])) == {
        "test_nested.py::should_run": "passed"
    }


def test_pytester_runs_inherit_the_pinned_plugins_and_not_the_others(
    host: tuple[Host, LocalSandbox, CheckSettings],
) -> None:
    place, box, settings = host
    plant(box, distribution(str(place.site), "pgs_flip", FLIP))  # after the pin
    plant(
        box,
        {
            "conftest.py": 'pytest_plugins = ["pytester"]\n',
            "test_inner.py": (
                "def test_inner(pytester):\n"
                "    pytester.makepyfile(\n"
                "        test_x='def test_x(pinned_answer):\\n    assert pinned_answer == 41\\n'\n"
                "    )\n"
                "    pytester.runpytest_inprocess().assert_outcomes(failed=1)\n"
            ),
        },
    )
    assert outcomes(check(box, settings, ["test_inner.py"])) == {
        "test_inner.py::test_inner": "passed"
    }


def test_the_rerun_command_is_the_checks_own_pin_included(
    host: tuple[Host, LocalSandbox, CheckSettings], tmp_path: Path
) -> None:
    from agent.core.trajectory_file import Trajectory
    from agent.pgs.config import PGSConfig
    from agent.pgs.reviewer import PGS
    from agent.pgs.tokens import SimpleCounter

    place, box, settings = host
    pgs = PGS(
        PGSConfig(check=settings),
        sandbox=box,
        toolset=None,  # type: ignore[arg-type]  # no Tester runs
        tester_model=None,  # type: ignore[arg-type]
        counter=SimpleCounter(),
        trajectory=Trajectory(tmp_path / "t.traj", replay_config={}),
        problem_statement="",
    )
    failing = TestResult(nodeid=BUG, outcome="failed", category="wrong_answer")
    command = pgs.rerun_command(failing)
    assert command is not None
    assert command.endswith(pytest_command(plugin_dir(box), [BUG], settings=settings))
    assert "PGS_ENTRY_POINTS=" in command and " -I -B " in command
    plant(box, distribution(str(place.site), "pgs_flip", FLIP))
    done = box.run(command)
    assert done.exit_code == 1 and "1 failed" in done.output, done.output


def test_pytest_toml_is_restored_to_the_base_commit_and_flagged(small_repo: Path) -> None:
    with LocalSandbox(small_repo) as box:
        base = box.run("git rev-parse HEAD").output.strip()
        plant(box, {"pytest.toml": '[pytest]\naddopts = ["-p", "pgs_flip"]\n', ".pytest.toml": ""})
        with original_tests(box, base, ["test_calc.py"]) as changed:
            assert box.run("ls -a").output.split().count("pytest.toml") == 0
            assert ".pytest.toml" not in box.run("ls -a").output.split()
        assert {(c.path, c.change) for c in changed} == {
            ("pytest.toml", "added"),
            (".pytest.toml", "added"),
        }
        assert "pytest.toml" in box.run("ls").output.split()  # the candidate's, put back


# -- in Docker: Python 3.9, pytest 7, the real site-packages and / ------------------------------


def in_site(box: Sandbox, files: dict[str, str]) -> None:
    """``files`` (paths under ``SITE``) written into the container's site-packages."""
    site = box.run("python3 -c 'import site; print(site.getsitepackages()[0])'").output.strip()
    plant(box, {path.replace("SITE", site): text for path, text in files.items()})


def in_user_site(box: Sandbox, files: dict[str, str]) -> None:
    """``files`` written into the user's site-packages (``~/.local``), which the image's venv
    is made to read at every start-up of an interpreter not isolated."""
    site = box.run("python3 -m site --user-site").output.strip()
    plant(box, {f"{site}/{name}": text for name, text in files.items()})
    flip = box.run(
        'cfg="$(python3 -c "import sys; print(sys.prefix)")/pyvenv.cfg" && '
        'sed -i "s/include-system-site-packages = false/include-system-site-packages = true/" '
        '"$cfg" && python3 -c "import site; assert site.ENABLE_USER_SITE"'
    )
    assert flip.ok, flip.output


DOCKER_VECTORS: dict[str, Callable[[Sandbox], None]] = {
    "a pytest11 entry point in site-packages": lambda b: in_site(
        b, distribution("SITE", "pgs_flip", FLIP)
    ),
    "pgs_pytest_plugin.py in the repository's root": lambda b: plant(
        b, {"pgs_pytest_plugin.py": FLIP}
    ),
    "pytest.ini and conftest.py in /": lambda b: plant(
        b, {"/pytest.ini": "[pytest]\n", "/conftest.py": FLIP}
    ),
    "pytest.py in the repository's root": lambda b: plant(
        b, {"pytest.py": "raise SystemExit(0)\n"}
    ),
    "usercustomize.py in the user's site-packages": lambda b: in_user_site(
        b,
        {
            "usercustomize.py": "import os\nos.environ['PYTEST_PLUGINS'] = 'pgs_flip'\n",
            "pgs_flip.py": FLIP,
        },
    ),
}


@pytest.fixture
def container(dedupe_image: str) -> Iterator[tuple[DockerSandbox, CheckSettings]]:
    with DockerSandbox(DockerSandboxConfig(image=dedupe_image)) as box:
        in_site(box, distribution("SITE", "pgs_answer", ANSWER))  # with the image
        plant(box, {**PROBE, **PROPERTY})
        yield box, pinned(box, CheckSettings())


@pytest.mark.docker
@pytest.mark.parametrize("vector", list(DOCKER_VECTORS))
def test_a_vector_planted_after_the_pin_does_not_change_the_report_in_docker(
    container: tuple[DockerSandbox, CheckSettings], vector: str
) -> None:
    box, settings = container
    before = outcomes(check(box, settings))
    assert before == {BUG: "failed"}
    DOCKER_VECTORS[vector](box)
    assert outcomes(check(box, settings)) == before


@pytest.mark.docker
def test_in_docker_a_plugin_of_the_image_loads_and_a_hypothesis_shadow_does_not(
    container: tuple[DockerSandbox, CheckSettings],
) -> None:
    box, settings = container
    assert settings.entry_points is not None
    assert {e.name for e in settings.entry_points} >= {"pgs_answer", "hypothesispytest"}
    plant(
        box,
        {
            "hypothesis/__init__.py": "def given(*a, **k):\n    return lambda f: lambda: None\n",
            "hypothesis/strategies.py": "def integers():\n    return None\n",
            "test_legit.py": "def test_uses(pinned_answer):\n    assert pinned_answer == 42\n",
        },
    )
    report = check(box, settings, ["test_prop.py", "test_legit.py"])
    assert outcomes(report) == {
        "test_prop.py::test_prop": "failed",
        "test_legit.py::test_uses": "passed",
    }
