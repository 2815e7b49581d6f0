"""What a repository needs installed, read from its files at one commit.

Detected, in the order the image installs them (each its own pip call; a later one may override
an earlier one, as in the official SWE-bench harness):

1. requirement files: top-level ``requirements*.txt`` / ``*-requirements.txt`` /
   ``*_requirements.txt`` / ``requirements*.in``, and ``requirements/*.txt`` (not docs). Lines that
   install the project itself (``-e .``, ``.[socks]``) are taken out of them: the project is
   installed once, later, with those extras. ``-r`` and ``-c`` references keep working.
   Every install is constrained to the versions of ``uv.lock`` or ``poetry.lock`` if there is
   one (flask's tests need the pytest its lock pins, not the newest).
2. the project itself, if installable (``setup.py``, or ``pyproject.toml`` with
   ``[build-system]`` or ``[project]``), editable, with its ``test`` / ``tests`` / ``testing`` /
   ``dev`` extras (``[project.optional-dependencies]``, poetry extras, setup.cfg, setup.py),
   and the extras its own test set-up installs (:func:`extras_of_test_setup`: tox's test
   environments, ``noxfile.py``'s ``session.install``, the install lines of CI jobs that run
   the tests), those of them the project declares;
3. the ``test`` / ``tests`` / ``testing`` / ``dev`` dependency groups (PEP 735) and the
   ``deps`` of tox.ini's ``[testenv]``;
4. the user's ``pip_packages``.

Steps 1, 3 and 4 make the environment layer (cached by the files' contents); step 2 runs in the
repository layer, with the repository at its commit in place (setuptools-scm finds its tags).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.errors import EnvError
from envs.images.base import DEFAULT_PYTHON, SUPPORTED_PYTHONS
from envs.images.build import quote_requirement
from envs.images.metadata import (
    canonical_name,
    clean_requirements,
    dependency_groups,
    extras_declared,
    included_files,
    lock_constraints,
    names_project,
    poetry_groups,
    read_requires_python,
    test_names,
)
from envs.images.snapshot import exact_pins
from envs.images.spec import RepoImageSpec
from envs.images.testsetup import extras_of_test_setup, tox_testenv

#: Requirement files of tools that do not run tests; installed only when another file includes them.
_NOT_TEST_FILES = re.compile(r"pre[-_]?commit|lint|typecheck|typing|mypy|docs?\b|release|publish")
#: Where the environment layer puts the dependency files while it installs them.
DEPS_DIR = "/tmp/pgs-deps"
#: The versions a lock file (uv.lock, poetry.lock) pins, as pip constraints for every install.
LOCK_CONSTRAINTS = "/opt/pgs/lock-constraints.txt"


@dataclass(frozen=True)
class DependencyPlan:
    """What the image installs, as shell steps for its two layers."""

    #: path -> contents, with the project's own lines taken out.
    requirement_files: Mapping[str, bytes] = field(default_factory=dict)
    #: None when the repository is not an installable project.
    project_extras: tuple[str, ...] | None = None
    test_requirements: tuple[str, ...] = ()
    build_requires: tuple[str, ...] = ()
    requires_python: str | None = None
    extra_packages: tuple[str, ...] = ()
    #: ``name==version`` lines from the repository's lock file (empty without one).
    constraints: bytes = b""
    #: The project's own requirements as pyproject.toml declares them ([project] dependencies
    #: and those of the chosen extras): what is installed when its install code is not run.
    project_requirements: tuple[str, ...] = ()

    def pins(self) -> dict[str, frozenset[str]]:
        """The exact pins (``==``) of every file and list this plan installs from: kept
        whatever the index moment (:mod:`envs.images.snapshot`)."""
        lines = [
            *(line for text in self.requirement_files.values() for line in _lines(text)),
            *_lines(self.constraints),
            *self.test_requirements,
            *self.extra_packages,
            *self.project_requirements,
            *self.build_requires,
        ]
        return exact_pins(lines)

    @property
    def project_target(self) -> str | None:
        if self.project_extras is None:
            return None
        return f".[{','.join(self.project_extras)}]" if self.project_extras else "."

    def env_steps(self) -> list[str]:
        """Steps of the environment layer, run in :data:`DEPS_DIR` (the files copied there)."""
        pip = f"python -m pip install{self._locked}"
        steps = [
            f"cd {DEPS_DIR} && {pip} -r {shlex.quote(path)}"
            for path in self.requirement_files
            if _top_level(path, self.requirement_files)
        ]
        for group in (self.test_requirements, self.extra_packages):
            if group:
                words = " ".join(quote_requirement(r) for r in group)
                steps.append(f"{pip} {words}")
        return steps

    @property
    def _locked(self) -> str:
        return f" -c {LOCK_CONSTRAINTS}" if self.constraints else ""

    def project_steps(self, run_install: bool = True) -> list[str]:
        """Steps of the repository layer, run in the repository. Without ``run_install`` no code
        of the repository runs: its declared requirements are installed, and the repository
        (and its ``src/``) put on the path by a ``.pth`` file, as an editable install would."""
        if self.project_target is None:
            return []
        if run_install:
            return [f"python -m pip install{self._locked} -e {shlex.quote(self.project_target)}"]
        steps = []
        if self.project_requirements:
            words = " ".join(quote_requirement(r) for r in self.project_requirements)
            steps.append(f"python -m pip install{self._locked} {words}")
        purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        steps.append(
            f'site=$(python -c "{purelib}") && pwd > "$site/pgs-repo.pth"'
            ' && { [ ! -d src ] || echo "$PWD/src" >> "$site/pgs-repo.pth"; }'
        )
        return steps


def _lines(text: bytes) -> list[str]:
    return text.decode(errors="replace").splitlines()


def _top_level(path: str, files: Mapping[str, bytes]) -> bool:
    """False for a file another one includes (``-r``, ``-c``: installed through it already), and
    for files of tools that do not run tests (linters, docs)."""
    for other, text in files.items():
        if other != path and path in (p for _, p in included_files(other, text)):
            return False
    return not _NOT_TEST_FILES.search(path.rsplit("/", 1)[-1].lower())


def detect_dependencies(files: Mapping[str, bytes], spec: RepoImageSpec) -> DependencyPlan:
    """The plan for a repository whose dependency files (path -> contents) are ``files``."""
    pyproject: dict[str, Any] = {}
    if "pyproject.toml" in files:
        try:
            pyproject = tomllib.loads(files["pyproject.toml"].decode(errors="replace"))
        except tomllib.TOMLDecodeError as e:
            raise EnvError(f"pyproject.toml is not valid TOML: {e}") from e
    installable = "setup.py" in files or "build-system" in pyproject or "project" in pyproject
    requirement_files: dict[str, bytes] = {}
    wanted_extras: set[str] = set()
    tox_deps, tox_extras = tox_testenv(files)
    wanted_extras |= tox_extras
    for path in sorted(f for f in files if f.endswith((".txt", ".in"))):
        requirement_files[path], asked = clean_requirements(files[path])
        wanted_extras |= asked
    tests: list[str] = []
    name = canonical_name(str(pyproject.get("project", {}).get("name", "")))
    for requirement in [*dependency_groups(pyproject), *poetry_groups(pyproject), *tox_deps]:
        match = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?\s*(;.*)?$", requirement)
        if installable and name and match and canonical_name(match.group(1)) == name:
            wanted_extras |= {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
        else:  # `pytest[dev]` in pytest's own dev group is the project with its extra
            tests.append(requirement)
    extras: tuple[str, ...] | None = None
    if installable:
        if spec.extras is not None:
            extras = tuple(spec.extras)
        else:
            setup_extras = extras_of_test_setup(files)
            declared_extras = extras_declared(files, pyproject, setup_extras)
            wanted_extras |= set(test_names(declared_extras))
            # Only what the project declares: pip ignores an unknown extra with a warning, and
            # a CI line may install another package's `.[x]` from its own folder.
            known = {canonical_name(e): e for e in declared_extras}
            wanted_extras |= {
                known[canonical_name(e)] for e in setup_extras if canonical_name(e) in known
            }
            extras = tuple(sorted(wanted_extras))
    project = pyproject.get("project", {})
    declared = [str(r) for r in project.get("dependencies", []) or []]
    for extra in extras or ():
        declared += [str(r) for r in project.get("optional-dependencies", {}).get(extra, [])]
    # An extra naming the project itself (`demo[test]` in `all`) is the project: left out.
    declared = [r for r in declared if not name or not names_project(r, name)]
    build_requires = pyproject.get("build-system", {}).get("requires", [])
    if installable and not build_requires:
        build_requires = ["setuptools>=40.8.0", "wheel"]
    return DependencyPlan(
        requirement_files=requirement_files,
        project_extras=extras,
        test_requirements=tuple(dict.fromkeys(tests)),
        build_requires=tuple(str(r) for r in build_requires),
        requires_python=read_requires_python(files, pyproject),
        extra_packages=tuple(spec.pip_packages),
        constraints=lock_constraints(files),
        project_requirements=tuple(dict.fromkeys(declared)),
    )


def choose_python(spec: RepoImageSpec, plan: DependencyPlan) -> str:
    """The user's choice, else 3.11 if requires-python allows it, else the newest it allows."""
    if spec.python:
        return spec.python
    if not plan.requires_python:
        return DEFAULT_PYTHON
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ImportError:  # packaging is almost always there (pip, pytest); if not, the default
        return DEFAULT_PYTHON
    try:
        allowed = SpecifierSet(plan.requires_python)
    except InvalidSpecifier:
        return DEFAULT_PYTHON
    ok = [v for v in SUPPORTED_PYTHONS if allowed.contains(f"{v}.0") or allowed.contains(v)]
    if DEFAULT_PYTHON in ok or not ok:
        return DEFAULT_PYTHON
    return ok[-1]
