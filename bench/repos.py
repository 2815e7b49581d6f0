"""Images of real, well-known Python repositories that pgs knows nothing about (issue 9, item 7):
detection builds each, and with the network off its own test suite collects and a test file runs.

    .venv/bin/python bench/repos.py --repos-dir DIR [--only NAME ...] [--fresh]

DIR holds working clones named as in :data:`REPOS` (``DIR/requests``, ...), each having the
pinned commit; to prepare it, clone each repository's snapshot (``git clone URL DIR/NAME``).
Per repository: ``pgs env build``'s detection and build (``cold``: the build; ``cached``: a
second call, a cache hit), then in a container of the image with the network off: ``python
--version``, ``python -m pytest --collect-only -q TESTS`` with no error, an optional import
check, and ``python -m pytest -x -q FILE`` passing. ``--fresh`` removes the repository's pgs
images first, so the cold time is a real build. One line per repository; last line:
``unknown_repos_ok=K/N``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.errors import EnvError
from envs.images import build_repo_image, repo_image_name


@dataclass(frozen=True)
class RealRepo:
    name: str
    url: str
    commit: str
    #: How its dependencies are declared (what detection must read).
    layout: str
    #: What ``pytest --collect-only`` is given (the project's test folder).
    tests: str
    #: One test file that must pass with the network off.
    subset: str
    #: A command that must succeed too (an extension is compiled, ...), or "".
    check: str = ""


REPOS: tuple[RealRepo, ...] = (
    RealRepo(
        "requests",
        "https://github.com/psf/requests",
        "1f6589ec3a1ee910f9a65cc3ceac60b26677bc0e",
        "setup.py + requirements-dev.txt with -e .[socks], tox extras",
        "tests",
        "tests/test_structures.py",
    ),
    RealRepo(
        "flask",
        "https://github.com/pallets/flask",
        "2ac89889f4cc330eabd50f295dcef02828522c69",
        "flit, PEP 735 dependency-groups (tests)",
        "tests",
        "tests/test_config.py",
    ),
    RealRepo(
        "pytest",
        "https://github.com/pytest-dev/pytest",
        "df87db7b0462fb764ef73fa00561adf8ad047572",
        "setuptools-scm, extra dev, group naming the project itself",
        "testing",
        "testing/test_findpaths.py",
        "python -c 'import _pytest._version as v; assert not v.version.startswith(\"0.\"), v'",
    ),
    RealRepo(
        "pylint",
        "https://github.com/pylint-dev/pylint",
        "3a99b2d728d0c8ff5267e0c38ebad4f5ba228dac",
        "requirements_test*.txt with -r includes and .[extras]",
        "tests",
        "tests/test_numversion.py",
    ),
    RealRepo(
        "seaborn",
        "https://github.com/mwaskom/seaborn",
        "f04b6cd5484267a0885d1fed068e99dff3a1b226",
        "flit, dependency-groups test (pinned pytest)",
        "tests",
        "tests/test_algorithms.py",
        "python -m pytest --version | grep -q 'pytest 9.1.1'",
    ),
    RealRepo(
        "sphinx",
        "https://github.com/sphinx-doc/sphinx",
        "e44a40eb2f810558ccd9da1425421270ccb81351",
        "flit, requires-python >=3.12 (Python 3.13), dependency-groups test",
        "tests",
        "tests/test_util/test_util_docstrings.py",
    ),
    RealRepo(
        "attrs",
        "https://github.com/python-attrs/attrs",
        "c1dc5dcba16ed827aa6dcad896b41a3afedb4e32",
        "hatchling + hatch-vcs, dependency-groups with include-group",
        "tests",
        "tests/test_filters.py",
    ),
    RealRepo(
        "more-itertools",
        "https://github.com/more-itertools/more-itertools",
        "2fe1b2eeb9d75f994113fe3ac76d14b6bcd6fb10",
        "flit, requirements/*.txt with --requirement ../docs/requirements.txt, tox, unittest",
        "tests",
        "tests/test_recipes.py",
    ),
    RealRepo(
        "tomlkit",
        "https://github.com/python-poetry/tomlkit",
        "d8ed1e3cdb024dfc2c6f12b45a0dfd4d4d91f727",
        "poetry-core, [tool.poetry.group.dev] with ^ constraints",
        "tests",
        "tests/test_items.py",
    ),
    RealRepo(
        "black",
        "https://github.com/psf/black",
        "8947c48ef2077c3a301b03c1e814dc2e3f78436e",
        "hatchling + hatch-vcs, tox commands `pip install -e .[d]` (blackd's tests need it)",
        "tests",
        "tests/test_blackd.py",
    ),
    RealRepo(
        "simplejson",
        "https://github.com/simplejson/simplejson",
        "639b2ee73b2de6b385fcd4d44e0e08054a4d8a0e",
        "setup.py with a C extension, no test deps declared",
        "simplejson/tests",
        "simplejson/tests/test_speedups.py",
        "python -c 'import simplejson._speedups'",
    ),
)


@dataclass
class Outcome:
    repo: RealRepo
    ok: bool = False
    python: str = ""
    cold: float | None = None
    cached: float | None = None
    collected: int | None = None
    subset: str = ""
    problem: str = ""

    def line(self) -> str:
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}s"

        return (
            f"{self.repo.name:15} {self.repo.commit[:10]} py{self.python or '?':5} "
            f"cold={seconds(self.cold):>7} cached={seconds(self.cached):>6} "
            f"collected={self.collected if self.collected is not None else '-':>5} "
            f"subset={self.subset or '-':12} {'ok' if self.ok else 'FAIL: ' + self.problem}"
        )


def _tail(text: str, lines: int = 15) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def remove_images(name: str) -> None:
    """Every pgs image of the repository folder ``name`` (both layers)."""
    from envs.docker_util import docker_client

    client = docker_client()
    for prefix in (repo_image_name(Path(name)), repo_image_name(Path(name), "pgs-env")):
        for image in client.images.list(prefix):
            for tag in image.tags:
                client.images.remove(tag, force=True)


def check_repo(repo: RealRepo, folder: Path, *, fresh: bool = False) -> Outcome:
    """Build the image of ``folder`` at the pinned commit and run the checks with no network."""
    out = Outcome(repo)
    if fresh:
        remove_images(folder.name)
    try:
        first = build_repo_image(folder, repo.commit, status=print_status)
        out.python = first.python
        if not first.cache_hit:
            out.cold = first.seconds
        again = build_repo_image(folder, repo.commit)
        out.cached = again.seconds
        if not again.cache_hit:
            out.problem = "the second build was not a cache hit"
            return out
    except EnvError as e:
        errors = [line for line in str(e).splitlines() if re.search(r"error", line, re.I)]
        out.problem = f"build: {str(e).splitlines()[0]} | {' | '.join(errors[-6:])}"
        return out
    config = DockerSandboxConfig(image=first.tag, network=False, timeout=900)
    with DockerSandbox(config) as box:
        version = box.run("python --version")
        if version.exit_code != 0 or not version.output.startswith("Python 3"):
            out.problem = f"python --version: {_tail(version.output)}"
            return out
        collect = box.run(f"python -m pytest --collect-only -q -p no:cacheprovider {repo.tests}")
        # The summary is the last line ("12 tests collected in 0.3s", "..., 1 error in ...").
        summary = collect.output.strip().splitlines()[-1] if collect.output.strip() else ""
        found = re.search(r"(\d+)(?:/\d+)? tests? collected", summary)
        if collect.exit_code != 0 or re.search(r"\berrors?\b", summary) or not found:
            out.problem = f"collect (exit {collect.exit_code}): {_tail(collect.output)}"
            return out
        out.collected = int(found.group(1))
        if repo.check:
            checked = box.run(repo.check)
            if checked.exit_code != 0:
                out.problem = f"check {repo.check!r}: {_tail(checked.output)}"
                return out
        run = box.run(f"python -m pytest -x -q -p no:cacheprovider {repo.subset}")
        summary = run.output.strip().splitlines()[-1] if run.output.strip() else ""
        passed = re.search(r"\d+ passed", summary)
        out.subset = passed.group(0) if passed else summary[:40]
        if run.exit_code != 0:
            out.problem = f"subset (exit {run.exit_code}): {_tail(run.output)}"
            return out
    out.ok = True
    return out


def print_status(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos-dir", type=Path)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    parser.add_argument("--only", action="append", metavar="NAME", help="repeatable")
    parser.add_argument("--fresh", action="store_true", help="remove their pgs images first")
    args = parser.parse_args()
    if args.repos_dir is None or not args.repos_dir.is_dir():
        if not args.quick:
            parser.error("--repos-dir: a folder of fetched repositories is needed")
        # Quick mode without the fetched repositories: nothing to measure, and it says so.
        print(f"no repositories at --repos-dir {args.repos_dir}: skipped")
        print("unknown_repos_ok=skipped")
        return
    chosen = [r for r in REPOS if not args.only or r.name in args.only]
    ok = 0
    for repo in chosen:
        folder = args.repos_dir / repo.name
        started = time.monotonic()
        if not (folder / ".git").exists():
            outcome = Outcome(repo, problem=f"no clone at {folder}: git clone {repo.url} {folder}")
        else:
            try:
                outcome = check_repo(repo, folder, fresh=args.fresh)
            except Exception as e:  # one repository's surprise must not hide the others
                outcome = Outcome(repo, problem=f"{type(e).__name__}: {_tail(str(e))}")
        ok += outcome.ok
        print(outcome.line() + f"  ({time.monotonic() - started:.0f}s in all)", flush=True)
    print(f"unknown_repos_ok={ok}/{len(chosen)}")


if __name__ == "__main__":
    main()
