"""What ships and what is declared: every folder of agent/, envs/ and tools/ is a listed package
(so an installed pgs has its prompts, examples, templates and bundles, and setuptools warns about
nothing), and every library the code imports directly is a declared dependency."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: Imported only where the optional extra is installed (the code says how to get it).
OPTIONAL = {"swebench", "datasets", "ray", "tiktoken"}


def _folders() -> set[str]:
    names = set()
    for top, package in (("agent", "agent"), ("envs", "envs"), ("tools", "pgs_tools")):
        base = ROOT / top
        for folder in [base, *base.rglob("*")]:
            if folder.is_dir() and "__pycache__" not in folder.parts:
                rel = folder.relative_to(base).parts
                names.add(".".join((package, *rel)))
    return names


def test_every_folder_ships_as_a_listed_package() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert _folders() - listed == set(), "add these folders to [tool.setuptools] packages"
    assert listed - _folders() == set(), "these listed packages have no folder"


def test_the_license_is_an_spdx_string() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"


def _imported_modules() -> set[str]:
    modules = set()
    for path in [*(ROOT / "agent").rglob("*.py"), *(ROOT / "envs").rglob("*.py")]:
        if "examples" in path.parts or "helper" in path.parts:
            continue  # a user's repository; the sandbox-side helper (standard library only)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def _declared() -> set[str]:
    project = PYPROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {_normal(re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0]) for r in requirements}


def _normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them: `pydantic_core` is `pydantic-core`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_library_imported_directly_is_declared() -> None:
    # The plugin's companions, imported top-level inside the sandbox.
    ours = {
        "agent",
        "envs",
        "pgs_tools",
        "pgs_pytest_plugin_results",
        "pgs_pytest_plugin_oracle",
        "pgs_pytest_plugin_inputs",
        "pgs_pytest_plugin_passes",
        "pgs_pytest_plugin_hard",
    }
    third_party = {
        m
        for m in _imported_modules()
        if m not in sys.stdlib_module_names and m not in ours and m != "__future__"
    }
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module in sorted(third_party - OPTIONAL):
        names = {_normal(d) for d in distributions.get(module, [module])}
        if not names & _declared():
            missing.append(f"{module} (from {sorted(names)})")
    assert not missing, f"imported but not in pyproject's dependencies: {missing}"
    assert "requests" in third_party  # agent/github talks to the API with it
