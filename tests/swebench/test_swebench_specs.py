"""The environment of real SWE-bench Verified instances, translated without Docker: the Python
chosen, the harness's steps in order, the evaluation script's test command. The records are
eight real Verified records (tests/data/verified-dev.jsonl)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.swebench import Instance, InstanceError, eval_script, instance_spec, load_instances
from agent.swebench.specs import conda_to_pip, env_steps, environment_yml, swebench_requirements
from tests.support.repos import git, make_repo

RECORDS = Path(__file__).resolve().parents[1] / "data" / "verified-dev.jsonl"
#: instance -> (Python, how packages come, install, the test command of its eval script)
EXPECTED = {
    "mwaskom__seaborn-3187": (
        "3.9",
        "files",
        "python -m pip install -e .[dev]",
        "pytest --no-header -rA tests/_core/test_plot.py tests/test_relational.py",
    ),
    "pallets__flask-5014": (
        "3.11",
        "swebench-requirements",
        "python -m pip install -e .",
        "pytest -rA tests/test_blueprints.py",
    ),
    "psf__requests-6028": (
        "3.9",
        "conda",
        "python -m pip install .",
        "pytest -rA tests/test_utils.py",
    ),
    "pylint-dev__pylint-6903": (
        "3.9",
        "swebench-requirements",
        "python -m pip install -e .",
        "pytest -rA tests/test_pylint_runners.py",
    ),
    "pytest-dev__pytest-10081": (
        "3.9",
        "files",
        "python -m pip install -e .",
        "pytest -rA testing/test_unittest.py",
    ),
    "pytest-dev__pytest-7432": (
        "3.9",
        "files",
        "python -m pip install -e .",
        "pytest -rA testing/test_skipping.py",
    ),
    "sympy__sympy-20590": (
        "3.9",
        "conda",
        "python -m pip install -e .",
        "bin/test -C --verbose sympy/core/tests/test_basic.py",
    ),
    "sympy__sympy-24562": (
        "3.9",
        "conda",
        "python -m pip install -e .",
        "bin/test -C --verbose sympy/core/tests/test_numbers.py",
    ),
}


def instance_at(mirror: Path, iid: str, repo: str, **fields: str) -> Instance:
    """A record of ``repo`` whose commits are the HEAD of the repository at ``mirror``."""
    sha = git(mirror, "rev-parse", "HEAD").strip()
    return Instance.from_record({"instance_id": iid, "repo": repo, "base_commit": sha, **fields})


@pytest.fixture(scope="module")
def instances() -> dict[str, Instance]:
    return {i.instance_id: i for i in load_instances(RECORDS)}


@pytest.mark.parametrize("iid", sorted(EXPECTED))
def test_real_records_get_the_harness_environment(iid: str, instances: dict[str, Instance]) -> None:
    python, kind, install, test_cmd = EXPECTED[iid]
    instance = instances[iid]
    spec = instance_spec(instance)
    assert (spec.python, spec.packages_kind, spec.install) == (python, kind, [install])
    assert spec.source.startswith("swebench 4.") and spec.deviations == []
    assert spec.log_parser == instance.record["log_parser"]
    script = eval_script(instance, spec)
    assert script == instance.record["eval_script"]  # the record's own script, unchanged
    lines = script.splitlines()
    start = lines.index(": '>>>>> Start Test Output'")
    assert lines[start + 1].endswith(test_cmd)
    assert install in lines[:start]  # the install runs again before the tests, as in the harness


def test_conda_packages_and_pins_become_separate_pip_steps(
    instances: dict[str, Instance],
) -> None:
    sympy = instances["sympy__sympy-20590"]
    steps = env_steps(sympy, instance_spec(sympy), Path("/nonexistent"))
    assert steps[0].startswith("python -m pip install mpmath flake8 || {")
    assert steps[1] == "python -m pip install mpmath==1.3.0 flake8-comprehensions"
    seaborn = instances["mwaskom__seaborn-3187"]
    (only,) = env_steps(seaborn, instance_spec(seaborn), Path("/nonexistent"))
    assert only.startswith("python -m pip install contourpy==1.1.0") and "pandas==2.0.0" in only


def test_a_record_without_a_table_entry_names_the_fix(instances: dict[str, Instance]) -> None:
    record = {**instances["psf__requests-6028"].record, "version": "0.0"}
    with pytest.raises(Exception, match=r"no environment spec.*version '0\.0'"):
        instance_spec(Instance.from_record(record))


def test_requirements_are_prepared_as_the_harness_prepares_them(tmp_path: Path) -> None:
    mirror = make_repo(
        tmp_path / "flask",
        {
            "requirements/dev.txt": "-r tests.txt\n-e .\n# a comment\nblack==22.1\n",
            "requirements/tests.txt": "pytest==7.2\n.[test]\ntypes-pkg_resources==0.1\n",
        },
    )
    flask = instance_at(mirror, "pallets__flask-1", "pallets/flask", version="2.3")
    text = swebench_requirements(flask, mirror)
    lines = [x for x in text.splitlines() if x.strip()]
    # -r inlined first, the project's own lines and comments dropped, yanked names replaced.
    assert lines == ["pytest==7.2", "types-setuptools", "black==22.1"]
    step = env_steps(flask, instance_spec(flask), mirror)
    assert step[0].startswith("cat <<'EOF_59812759871' > /root/pgs-requirements.txt\n")
    assert step[0].endswith(
        "python -m pip install -r /root/pgs-requirements.txt && rm /root/pgs-requirements.txt"
    )


def test_environment_yml_is_split_into_conda_and_pip_parts(tmp_path: Path) -> None:
    yml = """name: mpl
channels: [conda-forge]
dependencies:
  - python=3.11
  - numpy>=1.21
  - cairocffi
  - pyqt
  - pip
  - pip:
    - mpl-sphinx-theme
    - pytest-xdist==3.3
"""
    mirror = make_repo(tmp_path / "mpl", {"environment.yml": yml})
    mpl = instance_at(mirror, "matplotlib__matplotlib-1", "matplotlib/matplotlib", version="3.7")
    conda, pip = environment_yml(mpl, mirror)
    assert conda == ["numpy>=1.21", "cairocffi", "PyQt5"]
    assert pip == ["mpl-sphinx-theme", "pytest-xdist==3.3"]


def test_missing_requirement_file_is_named(tmp_path: Path) -> None:
    mirror = make_repo(tmp_path / "r", {"a.txt": "x\n"})
    instance = instance_at(mirror, "acme__r-1", "acme/r", python="3.9", install="true")
    instance.record["requirements"] = ["requirements.txt"]
    with pytest.raises(InstanceError, match=r"requirements\.txt is not in acme/r"):
        env_steps(instance, instance_spec(instance), mirror)


@given(
    st.from_regex(r"[a-z]([a-z0-9_-]{0,9}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[0-9]{1,2}(\.[0-9]{1,2}){0,2}", fullmatch=True),
)
def test_conda_match_specs_become_pip_requirements(name: str, version: str) -> None:
    from packaging.requirements import Requirement

    if name in ("python", "pip", "make", "cmake", "compilers"):
        return
    exact = Requirement(conda_to_pip(f"{name}=={version}"))
    prefix = Requirement(conda_to_pip(f"{name}={version}"))
    assert exact.specifier.contains(version) and prefix.specifier.contains(version)
    assert prefix.specifier.contains(f"{version}.7")  # conda's `=` matches a prefix
    assert not exact.specifier.contains(f"{version}.7")
    assert conda_to_pip(f"{name}>={version}") == f"{name}>={version}"


def test_submodules_come_from_the_repos_folder_at_the_recorded_commit(tmp_path: Path) -> None:
    from agent.swebench.images import add_submodules
    from envs.images import history_clone

    repos = tmp_path / "repos"
    helpers = make_repo(repos / "astropy__astropy-helpers", {"ah.py": "VERSION = 1\n"})
    pinned = git(helpers, "rev-parse", "HEAD").strip()
    make_repo(helpers, {"ah.py": "VERSION = 2\n"}, "later")
    main = make_repo(repos / "astropy__astropy", {"setup.py": "print('hi')\n"})
    git(main, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(helpers),
        "astropy_helpers")  # fmt: skip
    git(main / "astropy_helpers", "checkout", "-q", pinned)
    url = "https://github.com/astropy/astropy-helpers.git"  # as the real .gitmodules says
    git(main, "config", "-f", ".gitmodules", "submodule.astropy_helpers.url", url)
    git(main, "commit", "-qam", "pin helpers")
    tree = tmp_path / "testbed"
    history_clone(main, git(main, "rev-parse", "HEAD").strip(), tree)
    assert not (tree / "astropy_helpers" / "ah.py").exists()
    assert add_submodules(tree, repos) == []
    assert (tree / "astropy_helpers" / "ah.py").read_text() == "VERSION = 1\n"
    assert git(tree, "status", "--porcelain").strip() == ""
    other = tmp_path / "other"
    history_clone(main, git(main, "rev-parse", "HEAD").strip(), other)
    (missing,) = add_submodules(other, tmp_path / "empty")
    assert "submodule astropy_helpers" in missing and pinned[:12] in missing
