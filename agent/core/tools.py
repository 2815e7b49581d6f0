"""The tools offered to the model, and calling them: the :class:`Toolset`.

A toolset is the built-in ``bash`` plus every tool of its bundles (:mod:`agent.core.bundles`
loads and checks a bundle folder). It installs the bundles into a sandbox
(:mod:`agent.core.toolenv`), describes the tools to the model (OpenAI function schemas, or text
docs), and turns a call into the shell command to run: arguments checked and coerced the way
models commonly send them, ``argument_format`` applied, multi-line tools typed in text mode
(:meth:`Toolset.guard_multiline`) given their text through a quoted heredoc. What a tool's output
means (SWE-agent's sentinels) is :mod:`agent.core.tool_output`; which sentinels count in a
command's output is its :meth:`Toolset.role` (a submission only from a submit tool). Real
SWE-agent bundles work unchanged: registry variables (and ``{WINDOW}`` in docstrings),
``#!/usr/bin/env python`` helpers, a submit that prints only the marker, ``install.sh`` that
pip-installs.

The names other modules use from the bundles and the output sentinels are importable from here
too.

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
from pathlib import Path
from typing import Any

from agent.core import toolenv
from agent.core.bundles import (
    BASH_TOOL,
    DEFAULT_FORMAT,
    JINJA,
    PLACEHOLDER,
    Bundle,
    ToolArgument,
    ToolSpec,
    default_bundle_paths,
    default_bundles_dir,
)
from agent.core.prompts import format_error
from agent.core.tool_output import OutputKind, Role, ToolOutput, classify_output
from agent.errors import ToolCallError, ToolConfigError, ToolInstallError
from envs.sandbox import Sandbox

__all__ = [
    "BASH_TOOL",
    "Bundle",
    "OutputKind",
    "Role",
    "ToolCallError",
    "ToolConfigError",
    "ToolInstallError",
    "ToolOutput",
    "ToolSpec",
    "Toolset",
    "classify_output",
    "default_bundle_paths",
    "default_bundles_dir",
]


#: SWE-agent's names: its ``submit`` (and review_on_submit_m's), its forfeit bundle's tool.
SUBMIT_TOOLS = ("submit",)
FORFEIT_TOOLS = ("exit_forfeit",)
#: Where a shell command line starts a new command (the first word after it runs).
_COMMAND_BREAK = re.compile(r"\$\(|[;&|\n(){}`!]")


def invoked_programs(command: str) -> set[str]:
    """The first word of each command of a shell command line (``cat x && submit`` →
    {cat, submit}), leading ``NAME=value`` assignments skipped. An approximation of the shell's
    grammar that errs towards finding a program: it only decides whether a sentinel counts."""
    programs = set()
    for part in _COMMAND_BREAK.split(command):
        words = [w for w in part.split() if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", w)]
        if words:
            programs.add(words[0])
    return programs


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
            argument_format=DEFAULT_FORMAT,
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
        submit_tools: Sequence[str] = SUBMIT_TOOLS,
        forfeit_tools: Sequence[str] = FORFEIT_TOOLS,
        submit_commands: Sequence[str] = (),
    ) -> None:
        self.bundles = list(bundles)
        #: Tools whose output may submit, or forfeit (:meth:`role`).
        self.submit_tools = set(submit_tools)
        #: Typed commands that may submit when they start the line (mini-swe-agent's echo).
        self.submit_commands = {tuple(c.split()) for c in submit_commands if c.split()}
        self.forfeit_tools = set(forfeit_tools)
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
        ``variables``: ``registry_variables``, ``env_variables``, ``submit_tools``,
        ``forfeit_tools``, ``submit_commands``."""
        chosen = default_bundle_paths() if paths is None else [Path(p) for p in paths]
        return cls([Bundle.load(p) for p in chosen], bash=bash, **variables)

    @property
    def variables(self) -> dict[str, Any]:
        """What ``{NAME}`` in a docstring becomes: env variables, then registry variables."""
        return {
            **self.env_variables,
            **toolenv.registry_values(self.bundles, self.registry_variables),
        }

    def describe(self, tool: ToolSpec) -> str:
        """The tool's docstring with ``{NAME}`` of a known scalar variable substituted."""
        values = {
            k: v for k, v in self.variables.items() if isinstance(v, str | int | float | bool)
        }

        def repl(m: re.Match[str]) -> str:
            return str(values[m.group(1)]) if m.group(1) in values else m.group(0)

        return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", repl, tool.docstring or "")

    def role(self, command: str, tool: str | None = None) -> Role:
        """Which sentinels count in the output of ``command`` (called as ``tool``, else typed):
        a bundle's submit tool may submit, its forfeit tool forfeit, any of its tools ask for a
        retry; ``bash``, and a command running none of them, none (:mod:`agent.core.tool_output`).
        A typed command whose first simple command is one of ``submit_commands`` may submit.
        """
        if tool in (None, BASH_TOOL) and self.submit_commands:
            first = _COMMAND_BREAK.split(command.lstrip(), maxsplit=1)[0].split()
            if tuple(w.strip("'\"") for w in first) in self.submit_commands:
                return Role.SUBMIT
        programs = invoked_programs(command)
        if tool and tool != BASH_TOOL:
            programs.add(tool)
        ours = programs & (self.tools.keys() - {BASH_TOOL})
        if ours & self.submit_tools:
            return Role.SUBMIT
        if ours & self.forfeit_tools:
            return Role.FORFEIT
        return Role.TOOL if ours else Role.COMMAND

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

    def state(
        self, sandbox: Sandbox, env: Mapping[str, str], *, session: str | None = None
    ) -> dict[str, Any]:
        """Run the state commands, then read ``<home>/state.json`` ({} when there is none);
        ``session``: the agent's persistent shell session, if any."""
        return toolenv.state(sandbox, self.state_commands, env, session=session)

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
                raise format_error(
                    kind="missing_end_line",
                    values={"tool": words[0], "end": end},
                    error=ToolCallError,
                )
            out += [f"{line.rstrip()} << '{end}'", *lines[i + 1 : close], end]
            i = close + 1
        return "\n".join(out)

    def to_command(self, name: str, arguments: Mapping[str, Any] | str | None) -> str:
        """The shell command for a tool call. Raises :class:`ToolCallError` (for the model)."""
        tool = self.tools.get(name)
        if tool is None:
            tools = ", ".join(self.tools)
            raise format_error(
                kind="unknown_tool",
                values={"tool": repr(name), "tools": tools},
                error=ToolCallError,
            )
        args = _coerce_arguments(tool, arguments)
        if tool.name == BASH_TOOL:
            command = args["command"]
            if not command.strip():
                raise format_error(kind="empty_command", error=ToolCallError)
            return str(command)
        return _render(tool, args)


def _text_usage(tool: ToolSpec) -> str:
    """The usage line as the model types it: argument_format applied to placeholders."""
    if tool.end_name:
        return tool.usage

    def placeholder(arg: ToolArgument) -> str:
        value: Any = [f"<{arg.name}>"] if arg.type == "array" else f"<{arg.name}>"
        shown = JINJA.from_string(arg.argument_format).render(value=value)
        return shown if arg.required else f"[{shown}]"

    by_name = {a.name: a for a in tool.arguments}
    return _substitute(tool.usage, {n: placeholder(a) for n, a in by_name.items()})


def _substitute(template: str, values: Mapping[str, str]) -> str:
    """Replace ``<arg>``, ``[<arg>]`` and ``{arg}``; an absent argument takes its space too."""

    def repl(m: re.Match[str]) -> str:
        value = values.get(m.group(2) or m.group(3) or m.group(4), "")
        return f"{m.group(1)}{value}" if value else ""

    return PLACEHOLDER.sub(repl, template)


def _coerce_arguments(tool: ToolSpec, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """Check a call's arguments against the tool; accept what models commonly send."""
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = json.loads(text)
        except ValueError:
            values = {"tool": tool.name, "text": repr(text[:200])}
            raise format_error(
                kind="arguments_not_json", values=values, error=ToolCallError
            ) from None
    if not isinstance(arguments, Mapping):
        raise format_error(
            kind="arguments_not_object", values={"tool": tool.name}, error=ToolCallError
        )
    known = {a.name: a for a in tool.arguments}
    extra = [k for k in arguments if k not in known and k != tool.end_name]
    if extra:
        values = {
            "tool": tool.name,
            "extra": ", ".join(map(str, extra)),
            "known": ", ".join(known) or "none",
        }
        raise format_error(kind="unexpected_arguments", values=values, error=ToolCallError)
    result: dict[str, Any] = {}
    for arg in tool.arguments:
        value = arguments.get(arg.name)
        if value is None:
            if arg.required:
                values = {"argument": arg.name, "tool": tool.name, "description": arg.description}
                raise format_error(kind="missing_argument", values=values, error=ToolCallError)
            continue
        result[arg.name] = _coerce_value(tool, arg, value)
    return result


def _coerce_value(tool: ToolSpec, arg: ToolArgument, value: Any) -> Any:
    where = {"argument": arg.name, "tool": tool.name}
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
        values = {**where, "type": arg.type, "value": json.dumps(value)[:200]}
        raise format_error(kind="wrong_type", values=values, error=ToolCallError)
    if isinstance(value, list):
        item_type = _JSON_TYPES.get((arg.items or {}).get("type", ""))
        if item_type and not all(
            isinstance(v, item_type) and not isinstance(v, bool) for v in value
        ):
            values = {**where, "items": str(arg.items), "value": json.dumps(value)}
            raise format_error(kind="wrong_item_type", values=values, error=ToolCallError)
        if arg.name == "view_range" and len(value) != 2:
            values = {**where, "value": json.dumps(value)}
            raise format_error(kind="not_a_range", values=values, error=ToolCallError)
    if arg.enum and value not in arg.enum:
        allowed = ", ".join(map(str, arg.enum))
        values = {**where, "allowed": allowed, "value": repr(value)}
        raise format_error(kind="not_allowed", values=values, error=ToolCallError)
    if isinstance(value, str) and "\0" in value:
        raise format_error(kind="nul_character", values=where, error=ToolCallError)
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
        values = {"tool": tool.name, "end": tool.end_name}
        raise format_error(kind="end_marker_in_text", values=values, error=ToolCallError)
    body = body if body.endswith("\n") or not body else body + "\n"
    return f"{head.strip()} << '{tool.end_name}'\n{body}{tool.end_name}"


def _format_arg(tool: ToolSpec, name: str, value: Any, *, quote: bool) -> str:
    arg = next(a for a in tool.arguments if a.name == name)

    def q(v: Any) -> str:
        # As SWE-agent renders a value that is not a string (its bundles' scripts read them
        # so): Python's spelling (`True`, `False`, `3`), nothing for null, never quoted.
        if not isinstance(v, str):
            return "" if v is None else str(v)
        return shlex.quote(v) if quote else v

    shown: Any = [q(v) for v in value] if isinstance(value, list) else q(value)
    if isinstance(shown, list) and arg.argument_format == DEFAULT_FORMAT:
        return " ".join(shown)
    return JINJA.from_string(arg.argument_format).render(value=shown)
