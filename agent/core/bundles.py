"""Tool bundles on disk, in SWE-agent's format: the folder, its ``config.yaml``, and checks.

A bundle is a folder with ``config.yaml`` (``tools:`` name → signature, docstring, arguments,
optional ``end_name``; optional top-level ``state_command`` and ``registry_variables``), ``bin/``
with one executable per tool, and optionally ``install.sh`` and ``lib/``. The config models
mirror SWE-agent's ``sweagent/tools/commands.py`` and ``bundle.py``, so real SWE-agent bundles
load unchanged. Our own bundles live in the repository's ``tools/`` folder
(:func:`default_bundles_dir`).

Errors: :class:`ToolConfigError` (a ValueError) for a malformed bundle; the message names the
folder and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ToolConfigError

#: Name of the built-in tool that runs a shell command as it is.
BASH_TOOL = "bash"
#: What an argument's name may be.
ARG_NAME = r"[a-zA-Z_][a-zA-Z0-9_-]*"
#: ``<arg>``, ``[<arg>]`` or ``{arg}`` in a signature, with the space before it.
PLACEHOLDER = re.compile(rf"(\s*)(?:\[<({ARG_NAME})>\]|<({ARG_NAME})>|\{{({ARG_NAME})\}})")
#: The ``argument_format`` that puts the value in as it is.
DEFAULT_FORMAT = "{{value}}"
#: Renders ``argument_format`` templates, which come from bundle files (hence sandboxed).
JINJA = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined)


def default_bundles_dir() -> Path:
    """The folder holding our bundles: ``tools/`` of a checkout, else the installed copy."""
    checkout = Path(__file__).resolve().parents[2] / "tools"
    if checkout.is_dir():
        return checkout
    import pgs_tools  # tools/, installed as package data

    return Path(next(iter(pgs_tools.__path__)))


def default_bundle_paths() -> list[Path]:
    """Our bundles, in the order their tools are offered to the model."""
    root = default_bundles_dir()
    return [root / name for name in ("edit", "search", "submit")]


# -- config models (mirror SWE-agent's sweagent/tools/commands.py and bundle.py) ---------------


class ToolArgument(BaseModel):
    """One argument of a tool, as SWE-agent declares it."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=rf"^{ARG_NAME}$")
    type: str = Field(description="JSON-schema type: string, integer, number, boolean, array")
    description: str
    required: bool
    enum: list[Any] | None = None
    items: dict[str, Any] | None = Field(None, description="JSON schema of an array's items")
    argument_format: str = Field(
        DEFAULT_FORMAT, description="Jinja template rendering the (quoted) value in the command"
    )


class ToolSpec(BaseModel):
    """One tool of a bundle: an executable ``bin/<name>`` and how the model calls it."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""
    signature: str | None = None
    docstring: str | None
    end_name: str | None = Field(None, description="multi-line tool: body ends with this line")
    arguments: list[ToolArgument] = Field(default_factory=list)

    @cached_property
    def usage(self) -> str:
        """The signature, or ``name <arg> [<optional>]`` built from the arguments."""
        if self.signature:
            return self.signature.strip()
        parts = [self.name]
        for arg in self.arguments:
            parts.append(f"<{arg.name}>" if arg.required else f"[<{arg.name}>]")
        if self.end_name and self.arguments:
            body = parts.pop()
            return " ".join(parts) + f"\n{body}\n{self.end_name}"
        return " ".join(parts)


class BundleConfig(BaseModel):
    """A bundle's ``config.yaml``."""

    model_config = ConfigDict(extra="forbid")
    tools: dict[str, ToolSpec]
    state_command: str | None = None
    registry_variables: dict[str, Any] = Field(
        default_factory=dict, description="written to the registry file before install.sh runs"
    )


@dataclass(frozen=True)
class Bundle:
    """A bundle folder and its validated config."""

    path: Path
    config: BundleConfig

    @property
    def name(self) -> str:
        return self.path.name

    @classmethod
    def load(cls, path: Path | str) -> Bundle:
        path = Path(path).resolve()
        where = f"tool bundle {path.name!r} ({path})"
        config_file = path / "config.yaml"
        if not path.is_dir():
            raise ToolConfigError(f"{where}: no such folder; give --tools a bundle folder")
        if not config_file.is_file():
            raise ToolConfigError(f"{where}: config.yaml is missing; a bundle needs one")
        try:
            raw = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise ToolConfigError(f"{where}: config.yaml is not valid YAML: {e}") from None
        try:
            config = BundleConfig.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(top level)"
            raise ToolConfigError(
                f"{where}: config.yaml field {field!r}: {err['msg'].lower()}"
            ) from None
        for name, tool in config.tools.items():
            tool.name = name
            _check_tool(where, tool)
            exe = path / "bin" / name
            if not exe.is_file():
                raise ToolConfigError(
                    f"{where}: tool {name!r} has no executable bin/{name}; add it or remove "
                    f"the tool from config.yaml"
                )
        return cls(path=path, config=config)


def _check_tool(where: str, tool: ToolSpec) -> None:
    prefix = f"{where}: tool {tool.name!r}"
    if tool.name == BASH_TOOL:
        raise ToolConfigError(f"{prefix}: the name is taken by the built-in bash tool")
    if not re.fullmatch(ARG_NAME, tool.name):
        raise ToolConfigError(f"{prefix}: the name must be letters, digits, '_' or '-'")
    names = [a.name for a in tool.arguments]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ToolConfigError(f"{prefix}: field 'arguments' repeats {', '.join(duplicates)}")
    seen_optional = None
    for arg in tool.arguments:
        if not arg.required:
            seen_optional = seen_optional or arg.name
        elif seen_optional:
            raise ToolConfigError(
                f"{prefix}: field 'arguments': required argument {arg.name!r} comes after "
                f"optional argument {seen_optional!r}; required arguments must come first"
            )
    if tool.signature:
        in_signature = [
            m.group(2) or m.group(3) or m.group(4) for m in PLACEHOLDER.finditer(tool.signature)
        ]
        if sorted(in_signature) != sorted(names):
            raise ToolConfigError(
                f"{prefix}: field 'signature' names {sorted(in_signature)} but 'arguments' "
                f"declares {sorted(names)}; the signature must name exactly the arguments"
            )
    for arg in tool.arguments:
        try:
            JINJA.from_string(arg.argument_format)
        except jinja2.TemplateSyntaxError as e:
            raise ToolConfigError(
                f"{prefix}: argument {arg.name!r} field 'argument_format' is not a valid "
                f"Jinja template: {e}"
            ) from None
