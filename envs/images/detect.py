"""What a repository needs installed, read from its files at one commit.

Detected, in the order the image installs them (each its own pip call; a later one may override
an earlier one, as in the official SWE-bench harness):

1. requirement files: top-level ``requirements*.txt`` / ``*-requirements.txt`` /
   ``*_requirements.txt`` / ``requirements*.in``, and ``requirements/*.txt`` (not docs). Lines that
   install the project itself (``-e .``, ``.[socks]``) are taken out of them: the project is
   installed once, later, with those extras. ``-r`` and ``-c`` references keep working.
2. the project itself, if installable (``setup.py``, or ``pyproject.toml`` with
   ``[build-system]`` or ``[project]``), editable, with its ``test`` / ``tests`` / ``testing`` /
   ``dev`` extras (``[project.optional-dependencies]``, poetry extras, setup.cfg, setup.py);
3. the ``test`` / ``tests`` / ``testing`` / ``dev`` dependency groups (PEP 735) and the
   ``deps`` of tox.ini's ``[testenv]``;
4. the user's ``pip_packages``.

Steps 1, 3 and 4 make the environment layer (cached by the files' contents); step 2 runs in the
repository layer, with the repository at its commit in place (setuptools-scm finds its tags).
"""

from __future__ import annotations

import configparser
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envs.errors import EnvError
from envs.images.base import DEFAULT_PYTHON, SUPPORTED_PYTHONS, check_python
from envs.images.common import quote_requirement

#: Extras and dependency groups of the project installed when it declares them.
TEST_EXTRAS: tuple[str, ...] = ("test", "tests", "testing", "dev")
#: Where the environment layer puts the dependency files while it installs them.
DEPS_DIR = "/tmp/pgs-deps"
#: A requirement line that installs the project itself: `-e .`, `.`, `-e .[socks]`, `file:.`.
_SELF = re.compile(r"^\s*(?:-e\s+|--editable[\s=]+)?(?:file:)?\.(?:/)?(\[[^\]]*\])?\s*(?:#.*)?$")


class RepoImageSpec(BaseModel):
    """What a user may override about a repository image (``.pgs.yaml`` key ``image``)."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(
        default=None, description="3.9, 3.11 or 3.13; default: from requires-python, else 3.11"
    )
    pip_packages: list[str] = Field(
        default_factory=list, description="extra requirements, resolved with the detected ones"
    )
    extras: list[str] | None = Field(
        default=None, description="extras of the project to install; default: the test/dev extras"
    )
    install: list[str] | None = Field(
        default=None,
        description="shell commands run in /repo (network on) instead of the detected install",
    )

    @field_validator("python")
    @classmethod
    def _supported(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_python(value)
        except EnvError as e:
            raise ValueError(str(e)) from e

    @field_validator("install")
    @classmethod
    def _one_line_each(cls, value: list[str] | None) -> list[str] | None:
        if value and any("\n" in command for command in value):
            raise ValueError("give one single-line shell command per entry of install")
        return value

    @classmethod
    def from_yaml(cls, text: str, *, source: str = ".pgs.yaml") -> RepoImageSpec:
        """The ``image`` section of a ``.pgs.yaml`` (an empty spec when there is none)."""
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise EnvError(f"{source} is not valid YAML: {e}") from e
        section = data.get("image") if isinstance(data, dict) else None
        if section is None:
            return cls()
        return cls.checked(section, source=f"{source}, section image")

    @classmethod
    def checked(cls, data: object, *, source: str = "image options") -> RepoImageSpec:
        """Validate ``data``; a problem is one EnvError sentence, not pydantic's report."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'image'}: "
                f"{err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()
            )
            raise EnvError(f"{source}: {problems}") from e

    def overridden_by(self, other: RepoImageSpec) -> RepoImageSpec:
        """This spec with every field ``other`` sets explicitly replaced (CLI flags over file)."""
        return self.model_copy(update=other.model_dump(exclude_unset=True))


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

    @property
    def project_target(self) -> str | None:
        if self.project_extras is None:
            return None
        return f".[{','.join(self.project_extras)}]" if self.project_extras else "."

    def env_steps(self) -> list[str]:
        """Steps of the environment layer, run in :data:`DEPS_DIR` (the files copied there)."""
        steps = [
            f"cd {DEPS_DIR} && python -m pip install -r {shlex.quote(path)}"
            for path in self.requirement_files
            if _top_level(path, self.requirement_files)
        ]
        for group in (self.test_requirements, self.extra_packages):
            if group:
                words = " ".join(quote_requirement(r) for r in group)
                steps.append(f"python -m pip install {words}")
        return steps

    def project_steps(self) -> list[str]:
        """Steps of the repository layer, run in the repository."""
        if self.project_target is None:
            return []
        return [f"python -m pip install -e {shlex.quote(self.project_target)}"]


def _top_level(path: str, files: Mapping[str, bytes]) -> bool:
    """False for a file another one includes with ``-r`` (installed through it already)."""
    name = path.rsplit("/", 1)[-1]
    for other, text in files.items():
        if other == path:
            continue
        for line in text.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in ("-r", "--requirement") and parts[1].endswith(name):
                return False
    return True


def clean_requirements(text: bytes) -> tuple[bytes, set[str]]:
    """The file without the lines that install the project; the extras those lines asked for."""
    extras: set[str] = set()
    kept = []
    for line in text.decode(errors="replace").splitlines():
        match = _SELF.match(line)
        if match:
            extras |= {e.strip() for e in (match.group(1) or "").strip("[]").split(",") if e}
            continue
        kept.append(line)
    return ("\n".join(kept) + "\n").encode(), extras


def _dependency_groups(pyproject: dict[str, Any]) -> list[str]:
    groups = pyproject.get("dependency-groups") or {}
    out: list[str] = []

    def expand(name: str, seen: set[str]) -> None:
        if name in seen or name not in groups:
            return
        seen.add(name)
        for item in groups[name]:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and "include-group" in item:
                expand(str(item["include-group"]), seen)

    for name in TEST_EXTRAS:
        expand(name, set())
    return list(dict.fromkeys(out))


def _tox_deps(files: Mapping[str, bytes]) -> list[str]:
    """``[testenv] deps`` of tox.ini: plain requirements only (no factors, files or paths)."""
    if "tox.ini" not in files:
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(files["tox.ini"].decode(errors="replace"))
    except configparser.Error:
        return []
    if not parser.has_option("testenv", "deps"):
        return []
    out = []
    for line in parser.get("testenv", "deps").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith(("-", ".", "/")) or "{" in line:
            continue
        if re.match(r"^[\w,!-]+:\s", line):  # `py39: pytest<8` holds for some envs only
            continue
        out.append(line)
    return out


def _declared_extras(files: Mapping[str, bytes], pyproject: dict[str, Any]) -> set[str]:
    declared: set[str] = set(pyproject.get("project", {}).get("optional-dependencies", {}))
    declared |= set(pyproject.get("tool", {}).get("poetry", {}).get("extras", {}))
    if "setup.cfg" in files:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(files["setup.cfg"].decode(errors="replace"))
            if parser.has_section("options.extras_require"):
                declared |= set(parser.options("options.extras_require"))
        except configparser.Error:
            pass
    setup_py = files.get("setup.py", b"").decode(errors="replace")
    if "extras_require" in setup_py:
        for extra in TEST_EXTRAS:
            if re.search(rf"""["']{extra}["']\s*:|\b{extra}\s*=\s*[\[(]""", setup_py):
                declared.add(extra)
    return declared


def _requires_python(files: Mapping[str, bytes], pyproject: dict[str, Any]) -> str | None:
    value = pyproject.get("project", {}).get("requires-python")
    if isinstance(value, str):
        return value
    if "setup.cfg" in files:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(files["setup.cfg"].decode(errors="replace"))
            if parser.has_option("options", "python_requires"):
                return parser.get("options", "python_requires").strip()
        except configparser.Error:
            pass
    match = re.search(
        r"""python_requires\s*=\s*["']([^"']+)["']""",
        files.get("setup.py", b"").decode(errors="replace"),
    )
    return match.group(1) if match else None


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
    for path in sorted(f for f in files if f.endswith((".txt", ".in"))):
        requirement_files[path], asked = clean_requirements(files[path])
        wanted_extras |= asked
    extras: tuple[str, ...] | None = None
    if installable:
        if spec.extras is not None:
            extras = tuple(spec.extras)
        else:
            declared = _declared_extras(files, pyproject)
            wanted_extras |= {e for e in TEST_EXTRAS if e in declared}
            extras = tuple(sorted(wanted_extras))
    build_requires = pyproject.get("build-system", {}).get("requires", [])
    if installable and not build_requires:
        build_requires = ["setuptools>=40.8.0", "wheel"]
    return DependencyPlan(
        requirement_files=requirement_files,
        project_extras=extras,
        test_requirements=tuple(dict.fromkeys([*_dependency_groups(pyproject), *_tox_deps(files)])),
        build_requires=tuple(str(r) for r in build_requires),
        requires_python=_requires_python(files, pyproject),
        extra_packages=tuple(spec.pip_packages),
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
