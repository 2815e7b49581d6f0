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

import configparser
import datetime
import posixpath
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envs.errors import EnvError
from envs.images.base import DEFAULT_PYTHON, SUPPORTED_PYTHONS, check_python
from envs.images.build import quote_requirement
from envs.images.snapshot import exact_pins

#: Extras and dependency groups of the project installed when it declares them: the test ones,
#: else ``dev`` (which often holds linters, type checkers and notebooks besides the test tools).
TEST_EXTRAS: tuple[str, ...] = ("test", "tests", "testing", "dev")
#: Requirement files of tools that do not run tests; installed only when another file includes them.
_NOT_TEST_FILES = re.compile(r"pre[-_]?commit|lint|typecheck|typing|mypy|docs?\b|release|publish")
#: Where the environment layer puts the dependency files while it installs them.
DEPS_DIR = "/tmp/pgs-deps"
#: The versions a lock file (uv.lock, poetry.lock) pins, as pip constraints for every install.
LOCK_CONSTRAINTS = "/opt/pgs/lock-constraints.txt"
#: A requirement line that installs the project itself: `-e .`, `.`, `-e .[socks]`, `file:.`.
_SELF = re.compile(r"^\s*(?:-e\s+|--editable[\s=]+)?(?:file:)?\.(?:/)?(\[[^\]]*\])?\s*(?:#.*)?$")


#: A requirement line naming a folder of the repository (`-e ./plugin`, `./lib[x]`, `file:sub`).
_LOCAL = re.compile(r"^\s*(?:-e\s+|--editable[\s=]+)?(?:file:)?\.{1,2}/")


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
        description="shell commands run in /repo (package indexes in reach) instead of the "
        "detected install",
    )
    index_date: str | None = Field(
        default=None,
        description="resolve what is not pinned exactly (==) against the package index as it "
        "was at the start of this day (YYYY-MM-DD, UTC); `now`: the index as it is; default "
        "(`commit`): the day of the commit's committer date. Exact pins are kept even when newer",
    )
    run_install: bool = Field(
        default=True,
        description="run the repository's own install code while its image is built (setup.py, "
        "its build backend, .pgs.yaml install commands); false: only its dependencies, from "
        "requirement files and pyproject.toml metadata, and the source put on the path unbuilt",
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

    @field_validator("index_date", mode="before")
    @classmethod
    def _a_day(cls, value: object) -> object:
        if isinstance(value, datetime.date):  # YAML reads `2024-06-15` as a date
            return value.isoformat()[:10]
        if value is None:
            return None
        text = str(value).strip().lower()
        if text in ("now", "commit"):
            return text
        try:
            return datetime.date.fromisoformat(text).isoformat()
        except ValueError:
            raise ValueError(
                f"{value!r} is not a day: give YYYY-MM-DD, `now` or `commit`"
            ) from None

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


#: ``-r FILE``, ``--requirement=FILE``, ``-c FILE``, ``--constraint FILE``.
_INCLUDE = re.compile(r"^\s*(-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+)(\S+)")


def included_files(path: str, text: bytes) -> list[tuple[str, str]]:
    """(option, path in the repository) of every file the requirement file ``path`` includes;
    references outside the repository, URLs and ones with variables are left out."""
    out = []
    for line in text.decode(errors="replace").splitlines():
        match = _INCLUDE.match(line.split(" #", 1)[0])
        if not match or re.search(r"^[a-z]+://|\$|\{", match.group(2)):
            continue
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), match.group(2)))
        if not target.startswith(("../", "/")) and target != "..":
            out.append((match.group(1), target))
    return out


def clean_requirements(text: bytes) -> tuple[bytes, set[str]]:
    """The file without the lines that install the project; the extras those lines asked for."""
    extras: set[str] = set()
    kept = []
    for line in text.decode(errors="replace").splitlines():
        match = _SELF.match(line)
        if match:
            extras |= {e.strip() for e in (match.group(1) or "").strip("[]").split(",") if e}
            continue
        if _LOCAL.match(line):  # another folder of the repository: not there when deps install
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

    for name in _test_names(set(groups)):
        expand(name, set())
    return list(dict.fromkeys(out))


def _test_names(declared: set[str]) -> list[str]:
    """The test extras or groups among ``declared``; ``dev`` only when there is none of them."""
    names = [n for n in TEST_EXTRAS[:-1] if n in declared]
    return names or [n for n in TEST_EXTRAS[-1:] if n in declared]


def _poetry_requirement(name: str, constraint: Any) -> str | None:
    """A poetry dependency as a PEP 508 requirement (None for git, path and url sources)."""
    extras: list[str] = []
    marker = ""
    if isinstance(constraint, list):  # several constraints by marker: the first
        constraint = constraint[0] if constraint else "*"
    if isinstance(constraint, dict):
        if any(k in constraint for k in ("git", "path", "url", "file")):
            return None
        extras = [str(e) for e in constraint.get("extras", [])]
        if constraint.get("markers"):
            marker = f"; {constraint['markers']}"
        constraint = constraint.get("version", "*")
    spec = ",".join(_poetry_constraint(c) for c in str(constraint).split(","))
    spec = ",".join(c for c in spec.split(",") if c)
    extra = f"[{','.join(extras)}]" if extras else ""
    return f"{name}{extra}{spec}{marker}"


def _poetry_constraint(text: str) -> str:
    text = text.strip()
    if text in ("", "*"):
        return ""
    if text[0] in "^~" and not text.startswith("~="):
        caret = text[0] == "^"
        parts = [int(p) for p in re.findall(r"\d+", text)[:3]] or [0]
        if caret:  # the first non-zero part may not change
            bump = next((i for i, p in enumerate(parts) if p), len(parts) - 1)
        else:  # ~1.2.3 and ~1.2: the minor may not change; ~1: the major
            bump = min(1, len(parts) - 1)
        upper = [*parts[:bump], parts[bump] + 1]
        return f">={text[1:].strip()},<{'.'.join(map(str, upper))}"
    if re.match(r"^\d", text):
        return f"=={text}"
    return text


def _poetry_groups(pyproject: dict[str, Any]) -> list[str]:
    """The test groups of ``[tool.poetry.group.*]`` (or the old ``dev-dependencies``)."""
    poetry = pyproject.get("tool", {}).get("poetry", {})
    groups = {n: g.get("dependencies", {}) for n, g in poetry.get("group", {}).items()}
    if "dev-dependencies" in poetry:
        groups.setdefault("dev", poetry["dev-dependencies"])
    out = []
    for name in _test_names(set(groups)):
        for package, constraint in groups[name].items():
            if package.lower() != "python":
                requirement = _poetry_requirement(package, constraint)
                if requirement:
                    out.append(requirement)
    return out


def _tox_deps(files: Mapping[str, bytes]) -> tuple[list[str], set[str]]:
    """``[testenv]`` ``deps`` and ``extras`` of tox.ini: plain lines only (no factors, files or
    paths)."""
    if "tox.ini" not in files:
        return [], set()
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(files["tox.ini"].decode(errors="replace"))
    except configparser.Error:
        return [], set()

    def lines(option: str) -> list[str]:
        if not parser.has_option("testenv", option):
            return []
        out = []
        for line in parser.get("testenv", option).splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith(("-", ".", "/")) or "{" in line:
                continue
            if re.match(r"^[\w,!-]+:\s", line):  # `py39: pytest<8` holds for some envs only
                continue
            out.append(line)
        return out

    return lines("deps"), set(lines("extras"))


#: Tox environments, CI workflow files and jobs that do not run the tests.
_NOT_TEST_ENVS = re.compile(
    r"pre[-_]?commit|lint|typecheck|typing|mypy|docs?\b|release|publish|upload|format|style|"
    r"flake8|pylint|ruff|changelog|docker|zizmor|binar"
)
#: An install of the project with extras, in a shell line: `-e .[d]`, `".[d,test]"`, `'.[x]'`.
_PROJECT_WITH_EXTRAS = re.compile(
    r"""(?:^|[\s"'=])(?:-e\s*|--editable[=\s]+)?(?:file:)?\.(?:/)?\[([^\]"']+)\]"""
)
#: A shell line that installs packages with pip (or uv's pip).
_PIP_INSTALL = re.compile(r"\bpip3?(?:\.exe)?\s+install\b|\buv\s+pip\s+install\b")
#: A CI job's command that runs a test suite.
_RUNS_TESTS = re.compile(r"\b(?:pytest|py\.test|tox|nox|unittest|coverage\s+run|hatch\s+test)\b")
#: A string argument of ``session.install(...)`` that is the project with extras.
_NOX_INSTALL = re.compile(r"session\.install\(([^)]*)\)")
_NOX_PROJECT = re.compile(r"""["'](?:-e\s*)?\.(?:/)?\[([^\]"']+)\]["']""")


def _extras_in_install_lines(text: str) -> set[str]:
    """The extras of every install of the project on the pip lines of ``text``."""
    found: set[str] = set()
    for line in text.splitlines():
        if _PIP_INSTALL.search(line):
            for match in _PROJECT_WITH_EXTRAS.finditer(line):
                found |= {e.strip() for e in match.group(1).split(",")}
    return found


def _tox_setup_extras(text: str) -> set[str]:
    """``extras`` and the extras ``commands`` install (``pip install -e .[d]``) of every test
    environment of tox.ini: one whose commands run a test runner, not named for docs, lint,
    release, ... (factor-conditional lines skipped)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return set()
    found: set[str] = set()
    for section in parser.sections():
        if section != "testenv" and not section.startswith("testenv:"):
            continue
        if _NOT_TEST_ENVS.search(section.removeprefix("testenv").lower()):
            continue
        if not _RUNS_TESTS.search(parser.get(section, "commands", fallback="")):
            continue  # `black --check`, a build: not the test suite
        for line in parser.get(section, "extras", fallback="").splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not re.match(r"^[\w,!-]+:\s", line):
                found |= {e.strip() for e in line.split(",")}
        for option in ("commands_pre", "commands"):
            found |= _extras_in_install_lines(parser.get(section, option, fallback=""))
    return found


def _workflow_extras(text: str) -> set[str]:
    """The extras the install lines of a GitHub Actions workflow install, in the jobs that run
    a test suite (a job that only lints or builds docs does not count)."""
    try:
        workflow = yaml.safe_load(text)
    except yaml.YAMLError:
        return set()
    jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
    found: set[str] = set()
    for name, job in (jobs or {}).items():
        if not isinstance(job, dict) or _NOT_TEST_ENVS.search(str(name).lower()):
            continue
        steps = [s for s in job.get("steps") or [] if isinstance(s, dict)]
        runs = "\n".join(str(s["run"]) for s in steps if isinstance(s.get("run"), str))
        if _RUNS_TESTS.search(runs):
            found |= _extras_in_install_lines(runs)
    return found


def extras_of_test_setup(files: Mapping[str, bytes]) -> set[str]:
    """The extras of the project its own test set-up installs, read without running any of it:
    tox.ini's test environments (``extras``, ``pip install -e .[x]`` in ``commands``),
    ``noxfile.py`` (``session.install("-e", ".[x]")``, as text), and the pip install lines of
    ``.github/workflows/*.yml`` jobs that run the tests. Names as written; which of them the
    project declares is the caller's check."""
    found: set[str] = set()
    if "tox.ini" in files:
        found |= _tox_setup_extras(files["tox.ini"].decode(errors="replace"))
    if "noxfile.py" in files:
        for call in _NOX_INSTALL.finditer(files["noxfile.py"].decode(errors="replace")):
            for match in _NOX_PROJECT.finditer(call.group(1)):
                found |= {e.strip() for e in match.group(1).split(",")}
    for path in sorted(files):
        workflow = path.rsplit("/", 1)[-1].lower()
        if path.startswith(".github/workflows/") and not _NOT_TEST_ENVS.search(workflow):
            found |= _workflow_extras(files[path].decode(errors="replace"))
    return {e for e in found if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", e)}


def lock_constraints(files: Mapping[str, bytes]) -> bytes:
    """``name==version`` of each index package ``uv.lock`` or ``poetry.lock`` pins (the test
    tools at the versions the project's own CI uses); a package locked at several versions (by
    marker) and packages from git, paths or the project itself are left out."""
    for lock in ("uv.lock", "poetry.lock"):
        if lock in files:
            break
    else:
        return b""
    try:
        packages = tomllib.loads(files[lock].decode(errors="replace")).get("package", [])
    except tomllib.TOMLDecodeError:
        return b""
    versions: dict[str, set[str]] = {}
    for package in packages:
        source = package.get("source") or {}
        from_index = (
            "registry" in source
            if lock == "uv.lock"
            else source.get("type")
            in (
                None,
                "legacy",
            )
        )
        if from_index and package.get("name") and package.get("version"):
            versions.setdefault(_canonical(package["name"]), set()).add(str(package["version"]))
    lines = [f"{n}=={v.pop()}" for n, v in sorted(versions.items()) if len(v) == 1]
    return "".join(f"{line}\n" for line in lines).encode()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared_extras(
    files: Mapping[str, bytes], pyproject: dict[str, Any], candidates: Iterable[str] = ()
) -> set[str]:
    """The extras the project declares (setup.py: those of the test names and ``candidates``
    it names in its ``extras_require``, read as text)."""
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
        for extra in {*TEST_EXTRAS, *candidates}:
            name = re.escape(extra)
            if re.search(rf"""["']{name}["']\s*:|\b{name}\s*=\s*[\[(]""", setup_py):
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
    tox_deps, tox_extras = _tox_deps(files)
    wanted_extras |= tox_extras
    for path in sorted(f for f in files if f.endswith((".txt", ".in"))):
        requirement_files[path], asked = clean_requirements(files[path])
        wanted_extras |= asked
    tests: list[str] = []
    name = _canonical(str(pyproject.get("project", {}).get("name", "")))
    for requirement in [*_dependency_groups(pyproject), *_poetry_groups(pyproject), *tox_deps]:
        match = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?\s*(;.*)?$", requirement)
        if installable and name and match and _canonical(match.group(1)) == name:
            wanted_extras |= {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
        else:  # `pytest[dev]` in pytest's own dev group is the project with its extra
            tests.append(requirement)
    extras: tuple[str, ...] | None = None
    if installable:
        if spec.extras is not None:
            extras = tuple(spec.extras)
        else:
            setup_extras = extras_of_test_setup(files)
            declared_extras = _declared_extras(files, pyproject, setup_extras)
            wanted_extras |= set(_test_names(declared_extras))
            # Only what the project declares: pip ignores an unknown extra with a warning, and
            # a CI line may install another package's `.[x]` from its own folder.
            known = {_canonical(e): e for e in declared_extras}
            wanted_extras |= {known[_canonical(e)] for e in setup_extras if _canonical(e) in known}
            extras = tuple(sorted(wanted_extras))
    project = pyproject.get("project", {})
    declared = [str(r) for r in project.get("dependencies", []) or []]
    for extra in extras or ():
        declared += [str(r) for r in project.get("optional-dependencies", {}).get(extra, [])]
    # An extra naming the project itself (`demo[test]` in `all`) is the project: left out.
    declared = [r for r in declared if not name or not _names_project(r, name)]
    build_requires = pyproject.get("build-system", {}).get("requires", [])
    if installable and not build_requires:
        build_requires = ["setuptools>=40.8.0", "wheel"]
    return DependencyPlan(
        requirement_files=requirement_files,
        project_extras=extras,
        test_requirements=tuple(dict.fromkeys(tests)),
        build_requires=tuple(str(r) for r in build_requires),
        requires_python=_requires_python(files, pyproject),
        extra_packages=tuple(spec.pip_packages),
        constraints=lock_constraints(files),
        project_requirements=tuple(dict.fromkeys(declared)),
    )


def _names_project(requirement: str, name: str) -> bool:
    match = re.match(r"^\s*([A-Za-z0-9._-]+)", requirement)
    return match is not None and _canonical(match.group(1)) == name


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
