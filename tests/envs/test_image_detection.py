"""Repository images without Docker: what pip installs, detected from the repository at its
commit (pyproject.toml, requirement files, dependency groups, Poetry groups, the extras tox, nox
and CI workflows install for the tests). The images themselves: test_images.py."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from envs import images
from envs.images import RepoImageSpec, detect_dependencies
from tests.support.repos import git, make_repo


def test_detection_installs_the_project_with_its_test_extras_and_build_requires() -> None:
    pyproject = b"""
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
[project]
name = "demo"
requires-python = ">=3.12"
[project.optional-dependencies]
test = ["pytest-cov"]
dev = ["ruff"]
docs = ["sphinx"]
"""
    files = {
        "pyproject.toml": pyproject,
        "requirements-dev.txt": b"attrs\n",
        "requirements/docs.txt": b"sphinx\n",
    }
    spec = RepoImageSpec(pip_packages=["six"])
    plan = detect_dependencies(
        {p: c for p, c in files.items() if images.is_dependency_file(p)}, spec
    )
    assert plan.build_requires == ("hatchling",)
    assert plan.env_steps() == [
        "cd /tmp/pgs-deps && python -m pip install -r requirements-dev.txt",
        "python -m pip install six",
    ]
    # the test extra, not dev (linters) when a test one exists
    assert plan.project_steps() == ["python -m pip install -e '.[test]'"]
    assert images.choose_python(spec, plan) == "3.13"  # 3.11 is excluded by requires-python


def test_detection_without_a_project_installs_requirements_only() -> None:
    setup_cfg = b"[flake8]\nmax-line-length = 100\n"
    plan = detect_dependencies(
        {"requirements.txt": b"six\n", "setup.cfg": setup_cfg}, RepoImageSpec()
    )
    assert plan.project_target is None and plan.build_requires == ()
    assert plan.env_steps() == ["cd /tmp/pgs-deps && python -m pip install -r requirements.txt"]
    assert plan.project_steps() == []
    assert images.choose_python(RepoImageSpec(), plan) == images.DEFAULT_PYTHON


def test_a_requirement_file_installing_the_project_gives_its_extras() -> None:
    files = {
        "setup.py": b"from setuptools import setup\nsetup(name='requests')\n",
        "requirements-dev.txt": b"-e .[socks]\npytest>=2.8.0,<10\n-e ./plugins/x\n",
        "tox.ini": b"[testenv]\ndeps = -rrequirements-dev.txt\n  py39: pytest<8\n"
        b"  trustme\nextras =\n  security\n",
    }
    plan = detect_dependencies(files, RepoImageSpec())
    assert plan.requirement_files["requirements-dev.txt"] == b"pytest>=2.8.0,<10\n"
    assert plan.test_requirements == ("trustme",)
    assert plan.project_steps() == ["python -m pip install -e '.[security,socks]'"]


def test_included_requirement_files_are_followed_and_not_installed_twice() -> None:
    files = {
        "requirements/dev.txt": b"--requirement test.txt\n-r ../docs/requirements.txt\n",
        "requirements/test.txt": b"-c constraints.txt\npytest\n",
        "requirements/lint.txt": b"ruff\n",
    }
    assert images.included_files("requirements/dev.txt", files["requirements/dev.txt"]) == [
        ("--requirement", "requirements/test.txt"),
        ("-r", "docs/requirements.txt"),
    ]
    plan = detect_dependencies(files, RepoImageSpec())
    assert plan.env_steps() == ["cd /tmp/pgs-deps && python -m pip install -r requirements/dev.txt"]


def test_dependency_groups_prefer_tests_and_name_the_project_as_extras() -> None:
    pyproject = b"""
[build-system]
requires = ["setuptools"]
[project]
name = "My_Tool"
[project.optional-dependencies]
dev = ["numpy"]
[dependency-groups]
base = ["iniconfig"]
tests = [{include-group = "base"}, "pytest>9", 'cloudpickle; python_version >= "3.10"']
dev = ["my-tool[dev]", "ruff"]
"""
    plan = detect_dependencies({"pyproject.toml": pyproject}, RepoImageSpec())
    assert plan.test_requirements == (
        "iniconfig",
        "pytest>9",
        'cloudpickle; python_version >= "3.10"',
    )
    assert plan.env_steps() == [
        "python -m pip install iniconfig 'pytest>9' 'cloudpickle; python_version >= \"3.10\"'"
    ]
    # no test extra: dev is the test one; a group naming the project itself adds its extras
    only_dev = pyproject.replace(b"tests = [", b"other = [")
    plan = detect_dependencies({"pyproject.toml": only_dev}, RepoImageSpec())
    assert plan.test_requirements == ("ruff",)
    assert plan.project_steps() == ["python -m pip install -e '.[dev]'"]


#: black's own test set-up (tox.ini, pyproject.toml at 8947c48e, trimmed): blackd's tests need
#: the `d` extra, which only `commands` installs.
BLACK_TOX = b"""[tox]
envlist = {,ci-}py{310,311,312,313,314,315,py3},fuzz,run_self,generate_schema

[testenv]
setenv =
    PYTHONPATH = {toxinidir}/src
skip_install = True
dependency_groups = cov-tests
commands =
    pip install -e .[d]
    coverage erase
    pytest tests --run-optional no_jupyter \
        --numprocesses auto \
        --cov {posargs}
    pip install -e .[jupyter]
    pytest tests --run-optional jupyter -m jupyter

[testenv:run_self]
commands =
    pip install -e .[uvloop]
    black --check {toxinidir}

[testenv:docs]
extras = colorama
"""
BLACK_PYPROJECT = b"""
[build-system]
requires = ["hatchling>=1.27.0", "hatch-vcs"]
build-backend = "hatchling.build"
[project]
name = "black"
dynamic = ["version"]
[project.optional-dependencies]
colorama = ["colorama>=0.4.3"]
uvloop = ["uvloop>=0.15.2; sys_platform != 'win32'"]
d = ["aiohttp>=3.10"]
jupyter = ["ipython>=7.8.0", "tokenize-rt>=3.2.0"]
[dependency-groups]
tests = ["pytest>=7", "pytest-xdist>=3.0.2"]
"""
CI = b"""name: Test
on: [push, pull_request]
jobs:
  main:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Install
        run: |
          python -m pip install --upgrade pip
          python -m pip install -e ".[server,test]" 'pytest-randomly'
      - run: python -m pytest -q
  lint:
    runs-on: ubuntu-latest
    steps:
      - run: pip install -e '.[lint]'
      - run: pre-commit run --all-files
  selfcheck:
    runs-on: ubuntu-latest
    steps:
      - run: pip install .[speedups] && python -m black --check .
"""
NOXFILE = b"""import nox

@nox.session(python=["3.10", "3.12"])
def tests(session: nox.Session) -> None:
    session.install("-e", ".[cli, yaml]")
    session.install("-e.[nope]")
    session.run("pytest", *session.posargs)
"""


def test_extras_the_test_set_up_installs_are_installed_when_declared() -> None:
    # black: tox's test environment installs d and jupyter (run_self formats black with
    # itself, docs builds the docs: neither runs the tests).
    plan = detect_dependencies(
        {"pyproject.toml": BLACK_PYPROJECT, "tox.ini": BLACK_TOX}, RepoImageSpec()
    )
    assert plan.project_steps() == ["python -m pip install -e '.[d,jupyter]'"]
    assert plan.env_steps() == ["python -m pip install 'pytest>=7' 'pytest-xdist>=3.0.2'"]
    assert images.extras_of_test_setup({"tox.ini": BLACK_TOX}) == {"d", "jupyter"}

    # A CI job that runs pytest, and a noxfile; the lint and selfcheck jobs run no tests.
    assert images.extras_of_test_setup({".github/workflows/test.yml": CI}) == {"server", "test"}
    assert images.extras_of_test_setup({"noxfile.py": NOXFILE}) == {"cli", "yaml", "nope"}
    # A docs workflow does not count, whatever its jobs run.
    assert images.extras_of_test_setup({".github/workflows/docs.yml": CI}) == set()
    setup_cfg = b"[options.extras_require]\nserver = flask\ncli = click\nyaml = pyyaml\n"
    files = {
        "setup.cfg": setup_cfg,
        "setup.py": b"from setuptools import setup\nsetup()\n",
        "noxfile.py": NOXFILE,
        ".github/workflows/test.yml": CI,
    }
    # Only the declared ones: `test` and `nope` are not extras of this project.
    plan = detect_dependencies(files, RepoImageSpec())
    assert plan.project_steps() == ["python -m pip install -e '.[cli,server,yaml]'"]
    # setup.py's extras_require, read as text; the user's own extras still win.
    setup_py = b"setup(name='x', extras_require={'server': ['flask'], \"test\": ['pytest']})\n"
    plan = detect_dependencies({**files, "setup.py": setup_py}, RepoImageSpec())
    assert plan.project_steps() == ["python -m pip install -e '.[cli,server,test,yaml]'"]
    plan = detect_dependencies(files, RepoImageSpec(extras=["cli"]))
    assert plan.project_steps() == ["python -m pip install -e '.[cli]'"]


@given(st.text(max_size=300), st.sampled_from(["tox.ini", "noxfile.py", ".github/workflows/t.yml"]))
def test_reading_the_test_set_up_never_fails_and_gives_only_extra_names(
    text: str, path: str
) -> None:
    found = images.extras_of_test_setup({path: text.encode(errors="replace")})
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) for name in found)


def test_detection_reads_the_noxfile_and_ci_workflows_at_the_commit(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "noxfile.py": NOXFILE.decode(),
            ".github/workflows/test.yml": CI.decode(),
            ".github/workflows/sub/other.yml": "jobs: {}\n",
            ".github/dependabot.yml": "version: 2\n",
            "pyproject.toml": BLACK_PYPROJECT.decode(),
        },
    )
    files = images.dependency_files(repo, git(repo, "rev-parse", "HEAD").strip())
    assert sorted(files) == [".github/workflows/test.yml", "noxfile.py", "pyproject.toml"]


def test_poetry_groups_become_pep_508_requirements() -> None:
    pyproject = b"""
[build-system]
requires = ["poetry-core"]
[tool.poetry.dependencies]
python = ">=3.9"
[tool.poetry.group.dev.dependencies]
pytest = "^7.2.0"
zerover = "^0.2.3"
tilde = "~1.4"
star = "*"
exact = "1.19.1"
extra = {version = ">=2", extras = ["toml"]}
local = {path = "../x"}
"""
    plan = detect_dependencies({"pyproject.toml": pyproject}, RepoImageSpec())
    assert plan.test_requirements == (
        "pytest>=7.2.0,<8",
        "zerover>=0.2.3,<0.3",
        "tilde>=1.4,<1.5",
        "star",
        "exact==1.19.1",
        "extra[toml]>=2",
    )


def test_quoted_requirements_keep_their_markers() -> None:
    assert images.quote_requirement("setuptools;python_version>='3.12'") == (
        "'setuptools;python_version>='\"'\"'3.12'\"'\"''"
    )
    assert images.quote_requirement("'numpy<2'") == "'numpy<2'"
    assert images.quote_requirement("six") == "six"
