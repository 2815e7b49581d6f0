"""Starts pytest in the sandbox so that only pgs decides what loads (docs/checking.md, "How pytest
is started").

Run as ``python -I -B <plugin folder>/pgs_pytest_plugin_start.py <pytest args> -- <targets>``
from the repository's root (:func:`agent.pgs.runner.pytest_command` builds the command).
Isolated mode (``-I``) leaves out every ``PYTHON*`` variable (``PYTHONPATH``,
``PYTHONSTARTUP``, ...), the user's site-packages and the working folder; ``-B`` writes no
bytecode into the repository. Then, in this order:

1. pytest, its own packages and Hypothesis are imported from the interpreter's site-packages,
   before the repository is on ``sys.path``: a ``pytest.py`` or ``hypothesis/`` there cannot
   stand in for them;
2. pgs's plugin and its companion module are loaded from this file's folder by path (no
   folder is put on ``sys.path`` for them), so a ``pgs_pytest_plugin.py`` elsewhere is never
   the one that runs;
3. the repository's root goes first on ``sys.path``, as ``python -m pytest`` puts it, and
   after it the entries of the environment's ``PYTHONPATH`` (the image's: a check's shell
   inherits nothing the Generator did), so the repository's imports work as before;
4. when ``PGS_ENTRY_POINTS`` is set (JSON: ``[[name, value, distribution], ...]``, the
   ``pytest11`` entry points found on the original code by
   :func:`agent.pgs.runner.pin_entry_points`), only those entry points are seen:
   ``importlib.metadata.distributions`` answers with each distribution's ``entry_points.txt``
   cut to them. Autoload stays on, so pytester's runs, assertion rewriting of plugins and
   ``required_plugins`` work as pytest means them to;
5. the configuration is the repository's: the first pytest configuration file in the folders
   from the targets' common folder up to the repository's root, given with ``-c`` (none:
   ``-c /dev/null``), and ``--rootdir`` and ``--confcutdir`` at that file's folder (the root,
   without one): no ``pytest.ini``, ``conftest.py`` or ``pytest.toml`` above the repository
   is read, and the rootdir cannot move out of it.

``--pgs-list-entry-points`` instead prints the ``pytest11`` entry points this start would see
unpinned (JSON, as ``PGS_ENTRY_POINTS`` takes them): the pin. Exit code 4 (pytest's usage error)
when pytest cannot be imported, with one line saying so.

It runs on the repository's Python: standard library only, compatible with Python 3.8.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN = "pgs_pytest_plugin"
#: The plugin's companion modules, in the order they import each other.
COMPANIONS = (
    "pgs_pytest_plugin_hard",
    "pgs_pytest_plugin_results",
    "pgs_pytest_plugin_oracle",
    "pgs_pytest_plugin_inputs",
    "pgs_pytest_plugin_passes",
)
ENTRY_POINTS_ENV = "PGS_ENTRY_POINTS"
GROUP = "pytest11"
LIST_FLAG = "--pgs-list-entry-points"
#: Imported before the repository is on sys.path (those that are installed).
PROTECTED = ("pytest", "_pytest", "pluggy", "iniconfig", "hypothesis", "_hypothesis_pytestplugin")
#: pytest's configuration files, in the order pytest 9 looks for them in a folder (an older
#: pytest gives no configuration for the names it does not know).
CONFIG_NAMES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
#: pytest's mark for a module it must not rewrite: the modules imported first carry it, or
#: pytest would warn (an error under a repository's ``filterwarnings = error``, in its pytester
#: runs too) that it cannot rewrite them, Hypothesis's being a plugin's.
DONT_REWRITE = "PYTEST_DONT_REWRITE"


def _import_protected(names: tuple[str, ...]) -> None:
    """pytest (exit code 4 when it cannot be imported), then ``names``, marked not to rewrite."""
    import importlib

    try:
        import pytest  # noqa: F401
    except ImportError as e:
        sys.stderr.write(
            f"pgs: pytest cannot be imported by {sys.executable} in isolated mode (-I: no "
            f"PYTHONPATH, no user site-packages): {e}\n"
        )
        raise SystemExit(4) from None
    before = set(sys.modules)
    for name in names:
        # One not installed is left out: a repository without Hypothesis still gets its tests run.
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for name in set(sys.modules) - before:
        module = sys.modules[name]
        if "." not in name and module is not None:
            with contextlib.suppress(AttributeError, TypeError):  # a read-only __doc__
                module.__doc__ = f"{module.__doc__ or ''}\n\n{DONT_REWRITE}"


def _load_plugin() -> Any:
    """pgs's plugin modules from this folder, by path, under their top-level names."""
    import importlib.util

    module = None
    for name in (*COMPANIONS, PLUGIN):  # the plugin imports its companions by name
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
        if spec is None or spec.loader is None:
            raise SystemExit(f"pgs: cannot load {name} from {HERE}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _repository_on_path(repo: str) -> None:
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [repo, *extra]


# -- the entry points ------------------------------------------------------------------------


def _dist_name(dist: Any) -> str:
    return (dist.metadata["Name"] or "") if dist.metadata is not None else ""


def listed() -> list[list[str]]:
    """The ``pytest11`` entry points of every distribution on ``sys.path``."""
    import importlib.metadata

    found: list[list[str]] = []
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == GROUP:
                item = [ep.name, ep.value, _dist_name(dist)]
                if item not in found:
                    found.append(item)
    return found


def _cut(text: str, dist: str, allowed: set[tuple[str, str, str]]) -> str:
    """``entry_points.txt`` without the ``pytest11`` entries not in ``allowed``."""
    out: list[str] = []
    group: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            group = stripped[1:-1].strip()
        elif group == GROUP and stripped and not stripped.startswith(("#", ";")):
            name, _, value = stripped.partition("=")
            if (name.strip(), value.strip(), dist) not in allowed:
                continue
        out.append(line)
    return "\n".join(out) + "\n"


def pin(entries: list[list[str]]) -> None:
    """Only the entry points ``entries`` (``[name, value, distribution]``) are seen."""
    import importlib.metadata as metadata

    allowed = {(str(n), str(v), str(d)) for n, v, d in entries}
    every = metadata.distributions

    class Pinned(metadata.Distribution):
        def __init__(self, dist: Any) -> None:
            self._dist = dist

        def read_text(self, filename: str) -> str | None:
            text = self._dist.read_text(filename)
            if filename == "entry_points.txt" and text:
                return _cut(text, _dist_name(self._dist), allowed)
            return text

        def locate_file(self, path: Any) -> Any:
            return self._dist.locate_file(path)

        def __getattr__(self, name: str) -> Any:  # _path, and what else callers read
            return getattr(self._dist, name)

    def distributions(**kwargs: Any) -> Any:
        for dist in every(**kwargs):
            yield Pinned(dist)

    metadata.distributions = distributions


# -- the configuration -----------------------------------------------------------------------


def _targets(args: list[str]) -> list[str]:
    after = args[args.index("--") + 1 :] if "--" in args else []
    return [t.split("::", 1)[0] for t in after]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def configuration(repo: str, targets: list[str]) -> tuple[str | None, str]:
    """The file pytest would read its configuration from, looking no higher than ``repo``
    (None: none), and the rootdir (its folder; ``repo`` without one)."""
    from pathlib import Path

    try:
        from _pytest.config.findpaths import load_config_dict_from_file
    except ImportError:  # before pytest 6: it finds its own file; the boundaries still hold
        return None, repo
    folders: list[str] = []
    for target in targets:
        path = os.path.abspath(os.path.join(repo, target))
        if os.path.exists(path) and _inside(path, repo):
            folders.append(path if os.path.isdir(path) else os.path.dirname(path))
    folder = os.path.commonpath(folders) if folders else repo
    while True:
        for name in CONFIG_NAMES:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                try:
                    found = load_config_dict_from_file(Path(candidate))
                except Exception:  # pytest says what is wrong with it when it reads it
                    found = {}
                if found is not None:
                    return candidate, folder
        if folder == repo or not _inside(folder, repo):
            return None, repo
        folder = os.path.dirname(folder)


def arguments(repo: str, args: list[str]) -> list[str]:
    """``args`` with the configuration file, rootdir and conftest boundary pgs sets."""
    config, root = configuration(repo, _targets(args))
    fixed = ["--rootdir", root, "--confcutdir", root]
    if config is not None or _reads_files():
        fixed[0:0] = ["-c", config or os.devnull]
    return [*fixed, *args]


def _reads_files() -> bool:
    """Whether this pytest has the reader :func:`configuration` uses."""
    try:
        from _pytest.config.findpaths import load_config_dict_from_file  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str]) -> int:
    repo = os.path.abspath(os.getcwd())
    listing = LIST_FLAG in argv
    # The listing runs no test: it only needs pytest to be there. Hypothesis, half of a run's
    # start-up, changes nothing of what the distributions on sys.path declare.
    _import_protected(() if listing else PROTECTED)
    plugin = None if listing else _load_plugin()
    _repository_on_path(repo)
    if listing:
        sys.stdout.write(json.dumps(listed()) + "\n")
        return 0
    pinned = os.environ.get(ENTRY_POINTS_ENV)
    if pinned is not None:
        pin(json.loads(pinned))
    import pytest

    return int(pytest.main(arguments(repo, argv), plugins=[plugin]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
