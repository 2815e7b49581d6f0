"""What the project's own test set-up installs, read as text without running any of it: the
``deps`` and ``extras`` of tox.ini's test environments, ``noxfile.py``'s ``session.install``,
and the install lines of the CI jobs that run the tests."""

from __future__ import annotations

import configparser
import re
from collections.abc import Mapping

import yaml


def tox_testenv(files: Mapping[str, bytes]) -> tuple[list[str], set[str]]:
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
