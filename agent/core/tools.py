"""Tool bundles in SWE-agent's format: load, install into a sandbox, describe, call.

A bundle is a folder with ``config.yaml`` (``tools:`` name → signature, docstring, arguments,
optional ``end_name``; optional top-level ``state_command`` and ``registry_variables``), ``bin/``
with one executable per tool, and optionally ``install.sh`` (sourced after upload) and ``lib/``.
Real SWE-agent bundles work unchanged: registry variables (and ``{WINDOW}`` in docstrings),
``#!/usr/bin/env python`` helpers, a submit that only writes ``/root/model.patch``, multi-line
tools typed in text mode (:meth:`Toolset.guard_multiline`), ``install.sh`` that pip-installs
(:mod:`agent.core.toolenv` prepares it with the network on). Our own bundles live in the
repository's ``tools/`` folder (:func:`default_bundles_dir`): ``edit`` (str_replace_editor),
``search`` (find_file, search_dir, search_file) and ``submit`` (submit, and the ``_state``
state command).

Errors::

    ToolConfigError (ValueError)     a bundle on disk is malformed; names the folder and field
    ToolInstallError (RuntimeError)  uploading or sourcing install.sh in the sandbox failed
    ToolCallError (FormatError)      the model called an unknown tool or gave bad arguments;
                                     ``str(error)`` is the message to send back to the model
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.core import toolenv
from agent.core.parsing import FormatError
from agent.core.toolenv import ToolInstallError as ToolInstallError  # re-exported
from envs.sandbox import Sandbox

#: Name of the built-in tool that runs a shell command as it is.
BASH_TOOL = "bash"
SUBMISSION = "<<SWE_AGENT_SUBMISSION>>"
RETRY_WITH_OUTPUT = "###SWE-AGENT-RETRY-WITH-OUTPUT###"
RETRY_WITHOUT_OUTPUT = "###SWE-AGENT-RETRY-WITHOUT-OUTPUT###"
EXIT_FORFEIT = "###SWE-AGENT-EXIT-FORFEIT###"

_ARG_NAME = r"[a-zA-Z_][a-zA-Z0-9_-]*"
_PLACEHOLDER = re.compile(rf"(\s*)(?:\[<({_ARG_NAME})>\]|<({_ARG_NAME})>|\{{({_ARG_NAME})\}})")
_DEFAULT_FORMAT = "{{value}}"
_JINJA = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined)


class ToolConfigError(ValueError):
    """A bundle's config.yaml or layout is wrong. The message names the bundle and the field."""


class ToolCallError(FormatError):
    """The model called an unknown tool or gave bad arguments; the message is for the model."""


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
    name: str = Field(pattern=rf"^{_ARG_NAME}$")
    type: str = Field(description="JSON-schema type: string, integer, number, boolean, array")
    description: str
    required: bool
    enum: list[Any] | None = None
    items: dict[str, Any] | None = Field(None, description="JSON schema of an array's items")
    argument_format: str = Field(
        _DEFAULT_FORMAT, description="Jinja template rendering the (quoted) value in the command"
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
    if not re.fullmatch(_ARG_NAME, tool.name):
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
            m.group(2) or m.group(3) or m.group(4) for m in _PLACEHOLDER.finditer(tool.signature)
        ]
        if sorted(in_signature) != sorted(names):
            raise ToolConfigError(
                f"{prefix}: field 'signature' names {sorted(in_signature)} but 'arguments' "
                f"declares {sorted(names)}; the signature must name exactly the arguments"
            )
    for arg in tool.arguments:
        try:
            _JINJA.from_string(arg.argument_format)
        except jinja2.TemplateSyntaxError as e:
            raise ToolConfigError(
                f"{prefix}: argument {arg.name!r} field 'argument_format' is not a valid "
                f"Jinja template: {e}"
            ) from None


# -- output sentinels -------------------------------------------------------------------------


class OutputKind(StrEnum):
    NORMAL = "normal"
    SUBMISSION = "submission"
    RETRY_WITH_OUTPUT = "retry_with_output"
    RETRY_WITHOUT_OUTPUT = "retry_without_output"
    EXIT_FORFEIT = "exit_forfeit"


@dataclass(frozen=True)
class ToolOutput:
    """What a tool's output means to the loop."""

    kind: OutputKind
    #: The output with the sentinel lines removed.
    text: str
    #: For a submission: the patch (between the two sentinels, or after the only one).
    patch: str | None = None


def classify_output(output: str) -> ToolOutput:
    """Recognise SWE-agent's sentinels in a command's output."""
    if SUBMISSION in output:
        before, _, rest = output.partition(SUBMISSION)
        rest = rest.removeprefix("\r\n").removeprefix("\n")
        patch, found, _after = rest.rpartition(SUBMISSION)
        if not found:
            patch = rest
        return ToolOutput(OutputKind.SUBMISSION, before.strip(), patch)
    for sentinel, kind in (
        (EXIT_FORFEIT, OutputKind.EXIT_FORFEIT),
        (RETRY_WITH_OUTPUT, OutputKind.RETRY_WITH_OUTPUT),
        (RETRY_WITHOUT_OUTPUT, OutputKind.RETRY_WITHOUT_OUTPUT),
    ):
        if sentinel in output:
            return ToolOutput(kind, output.replace(sentinel, "").strip())
    return ToolOutput(OutputKind.NORMAL, output)


# -- the toolset ------------------------------------------------------------------------------

_BASH_SPEC = ToolSpec(
    name=BASH_TOOL,
    signature="bash <command>",
    docstring="runs the given command in a fresh bash shell in the repository (no state "
    "carries over between calls: chain commands with && and use absolute paths)",
    end_name=None,
    arguments=[
        ToolArgument(
            name="command",
            type="string",
            description="The bash command to run.",
            required=True,
            items=None,
            argument_format=_DEFAULT_FORMAT,
        )
    ],
)

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


class Toolset:
    """The tools offered to the model: the built-in ``bash`` plus every bundle's tools."""

    def __init__(
        self,
        bundles: Sequence[Bundle],
        *,
        bash: bool = True,
        registry_variables: Mapping[str, Any] | None = None,
        env_variables: Mapping[str, Any] | None = None,
    ) -> None:
        self.bundles = list(bundles)
        #: Configured registry values (they win over the bundles' own and install.sh's).
        self.registry_variables = dict(registry_variables or {})
        self.env_variables = {k: str(v) for k, v in (env_variables or {}).items()}
        self.tools: dict[str, ToolSpec] = {BASH_TOOL: _BASH_SPEC} if bash else {}
        owners: dict[str, str] = {}
        folders: dict[str, Path] = {}
        for bundle in self.bundles:
            if bundle.name in folders:
                raise ToolConfigError(
                    f"tool bundles {folders[bundle.name]} and {bundle.path} share the folder "
                    f"name {bundle.name!r}; they would be installed in the same place"
                )
            folders[bundle.name] = bundle.path
            for name, tool in bundle.config.tools.items():
                if name in owners:
                    raise ToolConfigError(
                        f"tool bundle {bundle.name!r}: tool {name!r} is already defined by "
                        f"bundle {owners[name]!r}"
                    )
                owners[name] = bundle.name
                self.tools[name] = tool

    @classmethod
    def from_paths(
        cls, paths: Sequence[Path | str] | None = None, *, bash: bool = True, **variables: Any
    ) -> Toolset:
        """Load bundles from folders (default: ours, :func:`default_bundle_paths`);
        ``variables``: ``registry_variables`` and ``env_variables``."""
        chosen = default_bundle_paths() if paths is None else [Path(p) for p in paths]
        return cls([Bundle.load(p) for p in chosen], bash=bash, **variables)

    @property
    def variables(self) -> dict[str, Any]:
        """What ``{NAME}`` in a docstring becomes: env variables, then registry variables."""
        values: dict[str, Any] = dict(self.env_variables)
        for bundle in self.bundles:
            values.update(bundle.config.registry_variables)
        return {**values, **self.registry_variables}

    def describe(self, tool: ToolSpec) -> str:
        """The tool's docstring with ``{NAME}`` of a known scalar variable substituted."""
        values = {
            k: v for k, v in self.variables.items() if isinstance(v, str | int | float | bool)
        }

        def repl(m: re.Match[str]) -> str:
            return str(values[m.group(1)]) if m.group(1) in values else m.group(0)

        return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", repl, tool.docstring or "")

    @property
    def state_commands(self) -> list[str]:
        return [b.config.state_command for b in self.bundles if b.config.state_command]

    # -- in the sandbox ---------------------------------------------------------------------

    def install(
        self,
        sandbox: Sandbox,
        *,
        timeout: float = 300.0,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Upload every bundle to ``<home>/tools/<name>``, source its install.sh, and return
        the environment to pass to every later command (:func:`agent.core.toolenv.install`);
        ``env``: more variables for the tools (PROBLEM_STATEMENT)."""
        return toolenv.install(
            sandbox,
            self.bundles,
            registry=self.registry_variables,
            env_variables={**self.env_variables, **(env or {})},
            timeout=timeout,
        )

    def state(self, sandbox: Sandbox, env: Mapping[str, str]) -> dict[str, Any]:
        """Run the state commands, then read ``<home>/state.json`` ({} when there is none)."""
        return toolenv.state(sandbox, self.state_commands, env)

    # -- for the model ----------------------------------------------------------------------

    def openai_tools(self) -> list[dict[str, Any]]:
        """One OpenAI function schema per tool (SWE-agent's get_function_calling_tool)."""
        schemas = []
        for tool in self.tools.values():
            properties: dict[str, Any] = {}
            for arg in tool.arguments:
                prop: dict[str, Any] = {"type": arg.type, "description": arg.description}
                if arg.items:
                    prop["items"] = arg.items
                if arg.enum:
                    prop["enum"] = arg.enum
                properties[arg.name] = prop
            parameters: dict[str, Any] = {
                "type": "object",
                "properties": properties,
                "required": [a.name for a in tool.arguments if a.required],
            }
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": self.describe(tool),
                        "parameters": parameters,
                    },
                }
            )
        return schemas

    def text_docs(self) -> str:
        """Tool documentation for text mode: each tool's usage line, then its docstring."""
        blocks = []
        for tool in self.tools.values():
            if tool.name == BASH_TOOL:
                continue
            doc = textwrap.indent(self.describe(tool).strip(), "    ")
            blocks.append(f"{_text_usage(tool)}\n{doc}".rstrip())
        return "\n\n".join(blocks)

    def guard_multiline(self, command: str) -> str:
        """Text mode: a multi-line tool typed the way its signature shows it (``edit 6:6``, the
        text, a line ``end_of_edit``) gets its text through a quoted heredoc, as SWE-agent's
        parser does. Raises :class:`ToolCallError` when the closing line is missing."""
        enders = {t.name: t.end_name for t in self.tools.values() if t.end_name}
        lines = command.split("\n")
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            words = line.split(maxsplit=1)
            end = enders.get(words[0]) if words else None
            if end is None or "<<" in line:
                out.append(line)
                i += 1
                continue
            close = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == end), None)
            if close is None:
                raise ToolCallError(
                    f"`{words[0]}` takes its text on the lines after it, ended by a line holding "
                    f"only `{end}`; that line is missing."
                )
            out += [f"{line.rstrip()} << '{end}'", *lines[i + 1 : close], end]
            i = close + 1
        return "\n".join(out)

    def to_command(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """The shell command for a tool call. Raises :class:`ToolCallError` (for the model)."""
        tool = self.tools.get(name)
        if tool is None:
            raise ToolCallError(f"Unknown tool {name!r}. The tools are: {', '.join(self.tools)}.")
        args = _coerce_arguments(tool, arguments)
        if tool.name == BASH_TOOL:
            command = args["command"]
            if not command.strip():
                raise ToolCallError("The bash tool needs a non-empty `command`.")
            return str(command)
        return _render(tool, args)


def _text_usage(tool: ToolSpec) -> str:
    """The usage line as the model types it: argument_format applied to placeholders."""
    if tool.end_name:
        return tool.usage

    def placeholder(arg: ToolArgument) -> str:
        value: Any = [f"<{arg.name}>"] if arg.type == "array" else f"<{arg.name}>"
        shown = _JINJA.from_string(arg.argument_format).render(value=value)
        return shown if arg.required else f"[{shown}]"

    by_name = {a.name: a for a in tool.arguments}
    return _substitute(tool.usage, {n: placeholder(a) for n, a in by_name.items()})


def _substitute(template: str, values: Mapping[str, str]) -> str:
    """Replace ``<arg>``, ``[<arg>]`` and ``{arg}``; an absent argument takes its space too."""

    def repl(m: re.Match[str]) -> str:
        value = values.get(m.group(2) or m.group(3) or m.group(4), "")
        return f"{m.group(1)}{value}" if value else ""

    return _PLACEHOLDER.sub(repl, template)


def _coerce_arguments(tool: ToolSpec, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Check a call's arguments against the tool; accept what models commonly send."""
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = json.loads(text)
        except ValueError:
            raise ToolCallError(
                f"The arguments of {tool.name} are not valid JSON: {text[:200]!r}"
            ) from None
    if not isinstance(arguments, Mapping):
        raise ToolCallError(f"The arguments of {tool.name} must be a JSON object.")
    known = {a.name: a for a in tool.arguments}
    extra = [k for k in arguments if k not in known and k != tool.end_name]
    if extra:
        raise ToolCallError(
            f"Unexpected argument(s) for {tool.name}: {', '.join(map(str, extra))}. "
            f"Its arguments are: {', '.join(known) or 'none'}."
        )
    result: dict[str, Any] = {}
    for arg in tool.arguments:
        value = arguments.get(arg.name)
        if value is None:
            if arg.required:
                raise ToolCallError(
                    f"Required argument `{arg.name}` of {tool.name} is missing ({arg.description})"
                )
            continue
        result[arg.name] = _coerce_value(tool, arg, value)
    return result


def _coerce_value(tool: ToolSpec, arg: ToolArgument, value: Any) -> Any:
    where = f"Argument `{arg.name}` of {tool.name}"
    if arg.type == "integer" and isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        value = int(value)
    if arg.type == "array" and isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = value.split()
    if (
        arg.type == "array"
        and isinstance(value, list)
        and (arg.items or {}).get("type") == "integer"
    ):
        with contextlib.suppress(ValueError):
            value = [int(v) if isinstance(v, str) else v for v in value]
    expected = _JSON_TYPES.get(arg.type)
    if expected and (
        not isinstance(value, expected) or (bool not in expected and isinstance(value, bool))
    ):
        raise ToolCallError(f"{where} must be of type {arg.type}, got {json.dumps(value)[:200]}.")
    if isinstance(value, list):
        item_type = _JSON_TYPES.get((arg.items or {}).get("type", ""))
        if item_type and not all(
            isinstance(v, item_type) and not isinstance(v, bool) for v in value
        ):
            raise ToolCallError(f"{where} must be a list of {arg.items}, got {json.dumps(value)}.")
        if arg.name == "view_range" and len(value) != 2:
            raise ToolCallError(f"{where} must be [start, end], got {json.dumps(value)}.")
    if arg.enum and value not in arg.enum:
        allowed = ", ".join(map(str, arg.enum))
        raise ToolCallError(f"{where} must be one of: {allowed} (got {value!r}).")
    if isinstance(value, str) and "\0" in value:
        raise ToolCallError(f"{where} contains a NUL character, which a command cannot carry.")
    return value


def _render(tool: ToolSpec, args: Mapping[str, Any]) -> str:
    usage = tool.usage
    first, _, rest = usage.partition("\n")
    if not tool.end_name:
        rendered = {n: _format_arg(tool, n, v, quote=True) for n, v in args.items()}
        return _substitute(first, rendered).strip()
    # A multi-line tool: arguments on the first line are quoted; the lines after it (up to the
    # end_name line) are the body, sent verbatim through a quoted heredoc.
    body_template = rest.rstrip("\n")
    if body_template.endswith(tool.end_name):
        body_template = body_template[: -len(tool.end_name)].rstrip("\n")
    head = _substitute(first, {n: _format_arg(tool, n, v, quote=True) for n, v in args.items()})
    body = _substitute(
        body_template, {n: _format_arg(tool, n, v, quote=False) for n, v in args.items()}
    )
    if any(line == tool.end_name for line in body.split("\n")):
        raise ToolCallError(
            f"The text given to {tool.name} contains a line `{tool.end_name}`, which would end "
            "it early; change that line."
        )
    body = body if body.endswith("\n") or not body else body + "\n"
    return f"{head.strip()} << '{tool.end_name}'\n{body}{tool.end_name}"


def _format_arg(tool: ToolSpec, name: str, value: Any, *, quote: bool) -> str:
    arg = next(a for a in tool.arguments if a.name == name)

    def q(v: Any) -> str:
        if isinstance(v, bool):
            v = "true" if v else "false"
        return shlex.quote(str(v)) if quote else str(v)

    shown: Any = [q(v) for v in value] if isinstance(value, list) else q(value)
    if isinstance(shown, list) and arg.argument_format == _DEFAULT_FORMAT:
        return " ".join(shown)
    return _JINJA.from_string(arg.argument_format).render(value=shown)
