"""docs/architecture.md's package table says what the import-linter contracts of pyproject.toml
check (`lint-imports` in .ci/test): the same layers in the same order, the same packages side by
side, and for each package the imports the contracts allow. A contract changed without the page,
or the page without the contract, fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def contract_layers() -> list[list[str]]:
    """The layers contract, top first: each layer's packages (``a | b``: side by side),
    optional layers (``(name)``) included, named in full (``agent.cli``)."""
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    (container,) = layers["containers"]
    return [
        [f"{container}.{name.strip().strip('()')}" for name in re.split(r"[|:]", layer)]
        for layer in layers["layers"]
    ]


def forbidden(package: str) -> set[str]:
    """What the forbidden contracts keep ``package`` from importing."""
    out: set[str] = set()
    for contract in contracts():
        if contract["type"] == "forbidden" and package in contract["source_modules"]:
            out |= set(contract["forbidden_modules"])
    return out


def doc_table() -> list[tuple[str, str, set[str]]]:
    """(layer, package, may import) of each row of the page's package table."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Packages\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.startswith("|") or cells[0] in ("layer", "---"):
            continue
        package = cells[1].strip("`")
        rows.append((cells[0], package, set(re.findall(r"`([a-z_.]+)`", cells[3]))))
    return rows


def test_the_table_lists_the_contracts_layers_in_order() -> None:
    rows = [(layer, package) for layer, package, _ in doc_table() if package != "envs"]
    by_layer: dict[str, list[str]] = {}
    for layer, package in rows:
        by_layer.setdefault(layer, []).append(package)
    assert list(by_layer.values()) == contract_layers()
    assert list(by_layer) == [str(i) for i in range(1, len(by_layer) + 1)]


def test_each_package_may_import_what_the_contracts_allow() -> None:
    layers = contract_layers()
    for layer, package, may_import in doc_table():
        if package == "envs":
            continue
        below = {p for lower in layers[int(layer) :] for p in lower}
        allowed = {p for p in below | {"envs"} if p not in forbidden(package)}
        assert may_import == allowed, package


def test_envs_imports_nothing_of_agent() -> None:
    (envs,) = [row for row in doc_table() if row[1] == "envs"]
    assert "agent" in forbidden("envs")
    assert envs[0] == "—" and envs[2] == {"agent"}  # "nothing of `agent`"
    assert "| — | `envs` |" in DOC.read_text(encoding="utf-8")
    assert "| nothing of `agent` |" in DOC.read_text(encoding="utf-8")
