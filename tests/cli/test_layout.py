"""The command line's layout, as a user of the code meets it: one module per command, each with
``register``; nothing below ``agent.cli`` imports it; no sandbox kind is told apart by
``isinstance`` outside the registry (envs/registry.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from agent.cli import build_parser

ROOT = Path(__file__).parents[2]
COMMANDS = {
    "run": "run",
    "demo": "demo",
    "batch": "batch",
    "eval": "eval",
    "select": "select",
    "report": "report",
    "ladder": "ladder",
    "inspect": "inspect",
    "replay": "replay",
    "serve-script": "serve",
    "github": "github",
}
SANDBOX_KINDS = {"DockerSandboxConfig", "LocalSandboxConfig", "DockerSandbox", "LocalSandbox"}


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def test_every_command_is_its_own_module_with_register() -> None:
    import importlib

    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "==SUPPRESS==" and a.choices]
    registered = set(actions[0].choices or {})
    assert registered == {*COMMANDS, "env"}
    for module in COMMANDS.values():
        assert callable(importlib.import_module(f"agent.cli.{module}").register)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_nothing_below_the_cli_imports_it() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in python_files("agent")
        if "agent/cli/" not in path.as_posix()
        and any(n == "agent.cli" or n.startswith("agent.cli.") for n in imported_modules(path))
    ]
    assert offenders == []


def test_no_isinstance_on_sandbox_kinds_outside_the_registry() -> None:
    offenders = []
    for path in python_files("agent", "envs"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if named & SANDBOX_KINDS:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_python_m_agent_cli_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0 and "serve-script" in done.stdout
