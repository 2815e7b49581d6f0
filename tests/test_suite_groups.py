"""The suite's own scheduling: a costly module fixture in SHARED_FIXTURES (tests/conftest.py) is
made once, on one pytest-xdist worker, as `.ci/test` runs the suite (``-n N --dist
loadgroup``). When a pytest or pytest-xdist release stops honouring the groups (pytest 9.2
did), every worker that gets one of the tests makes the fixture again: the suite still passes,
only minutes slower, so it is checked here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MODULE = """
import os
import time

import pytest


@pytest.fixture(scope="module")
def costly():
    with open(os.environ["MADE"], "a") as made:
        made.write("made\\n")
    return 1


@pytest.mark.parametrize("n", range(8))
def test_uses_it(costly, n):
    time.sleep(0.2)  # long enough that both workers ask for work
    assert costly == 1
"""

CONFTEST = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # What tests/conftest.py does for the tests of SHARED_FIXTURES.
    for item in items:
        if "costly" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("test_grouped.costly"))
"""


def test_a_grouped_module_fixture_is_made_once_across_workers(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    made = tmp_path / "made.txt"
    command = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    done = subprocess.run(
        [sys.executable, *command, "test_grouped.py"],
        cwd=tmp_path,
        env={**os.environ, "MADE": str(made)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed" in done.stdout
    assert made.read_text().splitlines() == ["made"], "the group was split across workers"


class Item:
    """What the suite's hook reads of a collected test, and the markers it adds."""

    def __init__(self, nodeid: str, *fixtures: str) -> None:
        self.nodeid, self.fixturenames, self.markers = nodeid, list(fixtures), []

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker)

    def group(self) -> str | None:
        found = [m.args[0] for m in self.markers if m.name == "xdist_group"]
        return found[0] if found else None


def test_the_suite_groups_a_module_fixture_by_module_and_the_shared_demo_across_modules() -> None:
    from tests.conftest import pytest_collection_modifyitems

    items = [
        Item("tests/inspect/test_inspect.py::test_page", "demo", "demo_run", "docker_client"),
        Item("tests/inspect/test_inspect_tui.py::test_keys", "demo_traj", "demo_run"),
        Item("tests/pgs/test_records.py::test_keys", "demo_run", "tmp_path"),
        Item("tests/pgs/test_pgs.py::test_one", "main_run"),
        Item("tests/pgs/test_other.py::test_two", "main_run"),  # another module's fixture
        Item("tests/pgs/test_pgs.py::test_alone", "tmp_path"),
    ]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]  # what the hook reads
    assert [i.group() for i in items] == [
        "demo_run",
        "demo_run",
        "demo_run",
        "test_pgs.main_run",
        None,
        None,
    ]
    docker = [any(m.name == "docker" for m in i.markers) for i in items]
    assert docker == [True, False, False, False, False, False]  # by its fixtures, as before
