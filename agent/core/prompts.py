"""The shipped prompts: ``agent/config/default.yaml``, read once.

The pydantic configs take their template defaults from here, so a config built in Python and
one loaded from ``--config`` files start from the same text; a file overrides any key.

Here too are the Generator's texts besides its five main templates, as config sections: what a
reply that cannot be run is told (:class:`FormatErrors`, ``agent.format_errors``), the output
shown instead of a command that would wait for a terminal (:class:`Refusals`,
``agent.refusals``) and a long output as each truncation convention cuts it
(:class:`TruncationTemplates`, ``agent.truncation_templates``). These sections, and the other
texts marked :data:`CONFIG_ONLY`, have no command-line flag: a ``--config`` file sets any of
their keys, the others keep the default.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field

from agent.errors import FormatError

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config" / "default.yaml"


@functools.cache
def _defaults() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    return data


def default_prompt(*keys: str) -> str:
    """The template at ``keys`` in default.yaml (``default_prompt("agent", "system_template")``)."""
    node: Any = _defaults()
    for key in keys:
        node = node[key]
    if not isinstance(node, str):
        raise TypeError(f"{'.'.join(keys)} in {DEFAULT_CONFIG} is not a template")
    return node


#: ``json_schema_extra`` of a config field that has no command-line flag: a text set only in a
#: ``--config`` file (``agent.format_errors``, ``pgs.tester.retry_template``, ...).
CONFIG_ONLY: dict[str, Any] = {"config_only": True}


def config_only(extra: object) -> bool:
    """Whether a field whose ``json_schema_extra`` is ``extra`` has no flag."""
    return isinstance(extra, dict) and bool(extra.get("config_only"))


@functools.cache
def _compiled(template: str) -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(template)


def render_text(template: str, values: Mapping[str, Any]) -> str:
    """``template`` (Jinja2; a misspelt variable is an error) rendered as is: no strip, so the
    text around the values is the template's to the byte."""
    return _compiled(template).render(**values)


def config_only_prompt(*keys: str) -> Any:
    """A config field holding the default.yaml template at ``keys``, settable only by file."""
    return Field(default=default_prompt(*keys), json_schema_extra=CONFIG_ONLY)


def _default(section: str, key: str) -> Any:
    return config_only_prompt("agent", section, key)


class FormatErrors(BaseModel):
    """What a reply that cannot be run is told (the ``error`` of ``format_error_template``)."""

    model_config = ConfigDict(extra="forbid")
    format_help: str = _default("format_errors", "format_help")
    no_tool_call: str = _default("format_errors", "no_tool_call")
    malformed_arguments: str = _default("format_errors", "malformed_arguments")
    no_block: str = _default("format_errors", "no_block")
    many_blocks: str = _default("format_errors", "many_blocks")
    empty_block: str = _default("format_errors", "empty_block")
    unclosed_block: str = _default("format_errors", "unclosed_block")
    unknown_tool: str = _default("format_errors", "unknown_tool")
    empty_command: str = _default("format_errors", "empty_command")
    arguments_not_json: str = _default("format_errors", "arguments_not_json")
    arguments_not_object: str = _default("format_errors", "arguments_not_object")
    unexpected_arguments: str = _default("format_errors", "unexpected_arguments")
    missing_argument: str = _default("format_errors", "missing_argument")
    wrong_type: str = _default("format_errors", "wrong_type")
    wrong_item_type: str = _default("format_errors", "wrong_item_type")
    not_a_range: str = _default("format_errors", "not_a_range")
    not_allowed: str = _default("format_errors", "not_allowed")
    nul_character: str = _default("format_errors", "nul_character")
    end_marker_in_text: str = _default("format_errors", "end_marker_in_text")
    missing_end_line: str = _default("format_errors", "missing_end_line")

    def render(self, kind: str, values: Mapping[str, Any]) -> str:
        """The message of the format error ``kind`` (a field name) with its ``values``."""
        template = getattr(self, kind)
        return render_text(template, {"format_help": self.format_help, **values})


class Refusals(BaseModel):
    """The output shown instead of running a command that waits for a terminal."""

    model_config = ConfigDict(extra="forbid")
    editor: str = _default("refusals", "editor")
    pager: str = _default("refusals", "pager")
    monitor: str = _default("refusals", "monitor")
    repl: str = _default("refusals", "repl")


class TruncationTemplates(BaseModel):
    """A long output as each ``agent.truncation`` convention cuts it."""

    model_config = ConfigDict(extra="forbid")
    pgs: str = _default("truncation_templates", "pgs")
    swe_agent: str = _default("truncation_templates", "swe_agent")
    mini_swe_agent: str = _default("truncation_templates", "mini_swe_agent")

    def render(self, convention: str, values: Mapping[str, Any]) -> str:
        return render_text(getattr(self, convention.replace("-", "_")), values)


#: The shipped texts (default.yaml), for callers given none.
DEFAULT_FORMAT_ERRORS = FormatErrors()
DEFAULT_REFUSALS = Refusals()
DEFAULT_TRUNCATION = TruncationTemplates()

_Error = TypeVar("_Error", bound=FormatError)


def format_error(
    *,
    kind: str,
    values: Mapping[str, Any] | None = None,
    error: type[_Error] = FormatError,  # type: ignore[assignment]
) -> _Error:
    """A :class:`~agent.errors.FormatError` (or ``error``, a subclass) of ``kind`` (a template of
    ``agent.format_errors``) with its ``values``; its message is the shipped text, the loop
    renders it again with the run's config (:meth:`~agent.errors.FormatError.render`)."""
    values = dict(values or {})
    return error(DEFAULT_FORMAT_ERRORS.render(kind, values), kind=kind, values=values)
