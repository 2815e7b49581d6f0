"""Configuration of a run: one pydantic model per component, from a YAML file and from flags.

Every leaf field of a component is also a flag, ``--SECTION.FIELD`` (``--agent.step-limit 30``,
``--model.temperature 0.2``, ``--sandbox.memory 2g``); a few common ones have short aliases
(``--model``, ``--base-url``, ``--sandbox``, ``--image``). Precedence: flags over the file over
the defaults. A bad value is one error naming the field and the file or flag that set it; an
unknown key in a file is named with the key meant (:func:`describe_config_errors`).
"""

from __future__ import annotations

import argparse
import difflib
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.core.loop_config import AgentConfig
from agent.core.prompts import config_only
from agent.core.tools import Toolset
from agent.errors import ConfigError
from agent.models import ModelConfig, model_kind
from agent.pgs.config import PGSConfig
from agent.run.foreign import foreign_hint
from envs.docker_sandbox import DockerSandboxConfig
from envs.local import LocalSandboxConfig
from envs.registry import BUILTIN, SandboxConfig, SandboxTypeError
from envs.registry import config_class as sandbox_config_class

#: SWE-agent's default tool environment, plus the window of its windowed editor.
TOOL_ENV: dict[str, str | int | float | bool] = {
    "PAGER": "cat",
    "MANPAGER": "cat",
    "LESS": "-R",
    "PIP_PROGRESS_BAR": "off",
    "TQDM_DISABLE": "1",
    "GIT_PAGER": "cat",
    "WINDOW": "100",
    "OVERLAP": "2",
}


class ToolsConfig(BaseModel):
    """The tool bundles and the variables they read (SWE-agent's ``tools`` section)."""

    model_config = ConfigDict(extra="forbid")
    bundles: list[Path] | None = Field(
        None, description="tool bundle folders (SWE-agent format); None: pgs's own bundles"
    )
    env_variables: dict[str, str | int | float | bool] = Field(
        default_factory=lambda: dict(TOOL_ENV),
        description="environment of every tool call; {NAME} in docstrings is substituted",
    )
    registry_variables: dict[str, Any] = Field(
        default_factory=dict,
        description="written to the tools' registry file (~/.swe-agent-env), over the bundles'",
    )
    submit_tools: list[str] = Field(
        default_factory=lambda: ["submit"],
        description="tools whose <<SWE_AGENT_SUBMISSION>> ends the run (in any other "
        "command's output the marker is text)",
    )
    submit_commands: list[str] = Field(
        default_factory=list,
        description="typed commands that submit as mini-swe-agent's do: when one is the first "
        "command of the line and its output's first line is the marker "
        "(e.g. ['echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT'])",
    )
    forfeit_tools: list[str] = Field(
        default_factory=lambda: ["exit_forfeit"],
        description="tools whose ###SWE-AGENT-EXIT-FORFEIT### gives up the run",
    )

    @field_validator("env_variables")
    @classmethod
    def _over_defaults(cls, value: dict[str, Any]) -> dict[str, Any]:
        return {**TOOL_ENV, **value}  # setting WINDOW keeps PAGER=cat

    def toolset(self) -> Toolset:
        """The bundles installed as this section says."""
        return Toolset.from_paths(
            self.bundles,
            registry_variables=self.registry_variables,
            env_variables=self.env_variables,
            submit_tools=self.submit_tools,
            submit_commands=self.submit_commands,
            forfeit_tools=self.forfeit_tools,
        )


class RunConfig(BaseModel):
    """Everything a single run needs besides the repository and the issue."""

    model_config = ConfigDict(extra="forbid")
    model: ModelConfig
    agent: AgentConfig = Field(default_factory=AgentConfig)
    sandbox: SandboxConfig = Field(default_factory=DockerSandboxConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    pgs: PGSConfig = Field(default_factory=PGSConfig)


SECTIONS: dict[str, type[BaseModel]] = {
    "model": ModelConfig,
    "agent": AgentConfig,
    "sandbox": DockerSandboxConfig,
    "tools": ToolsConfig,
    "pgs": PGSConfig,
}
#: Fields of the other sandbox kinds that the flags also accept.
EXTRA_SECTION_MODELS: dict[str, list[type[BaseModel]]] = {"sandbox": [LocalSandboxConfig]}
ALIASES = {
    "model.name": ["--model"],
    "model.base_url": ["--base-url"],
    "sandbox.type": ["--sandbox"],
    "sandbox.image": ["--image"],
    "pgs.feedback": ["--feedback"],
    "pgs.rounds": ["--rounds"],
    "pgs.tester_model": ["--tester-model"],
    "pgs.keep_properties": ["--keep-properties"],
    "pgs.test_cmd": ["--test-cmd"],
}


def _scalar(annotation: Any) -> tuple[Any, list[str] | None] | None:
    """(python type, choices) for a flag-able annotation, or None for structured values."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _scalar(args[0]) if len(args) == 1 else None
    if origin is Literal:
        return str, [str(a) for a in typing.get_args(annotation)]
    if annotation in (str, int, float, bool):
        return annotation, None
    return None


def add_config_flags(
    parser: argparse.ArgumentParser, sections: Sequence[str] = tuple(SECTIONS)
) -> None:
    """One flag per config field of ``sections`` (default: all); structured fields (lists,
    tables) take JSON or YAML text."""
    for section, model in SECTIONS.items():
        if section not in sections:
            continue
        group = parser.add_argument_group(f"{section} options")
        fields = dict(model.model_fields)
        choices: dict[str, list[str]] = {}
        for other in [model, *EXTRA_SECTION_MODELS.get(section, [])]:
            for name, info in other.model_fields.items():
                fields.setdefault(name, info)
                kind = _scalar(info.annotation)
                if kind and kind[1]:
                    choices.setdefault(name, []).extend(kind[1])
        for name, info in fields.items():
            if config_only(info.json_schema_extra):
                continue  # a text set in a --config file only (agent.format_errors, ...)
            key = f"{section}.{name}"
            flags = [f"--{section}.{name.replace('_', '-')}", *ALIASES.get(key, [])]
            help_text = (info.description or _section_help(info.annotation)).replace("%", "%%")
            kind = _scalar(info.annotation)
            dest = key.replace(".", "__")
            if kind is None:
                parser_args: dict[str, Any] = {"type": _structured, "metavar": "JSON"}
            elif kind[0] is bool:
                parser_args = {"action": argparse.BooleanOptionalAction}
            elif key == "sandbox.type":  # a registered kind or a user's class by import path
                parser_args = {"type": str, "metavar": "|".join([*BUILTIN, "MODULE:CLASS"])}
                help_text = "the sandbox: a built-in kind or package.module:Class of your own"
            else:
                parser_args = {"type": kind[0], "metavar": name.upper()}
                if name in choices:
                    parser_args = {"choices": choices[name]}
            group.add_argument(*flags, dest=dest, default=None, help=help_text, **parser_args)


def _section_help(annotation: Any) -> str:
    """The help of a field that is a section of its own (``model.retries``, ``pgs.tester``):
    the section's docstring and its keys."""
    section = _config_class(annotation)
    if section is None:
        return ""
    what = (section.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ").rstrip(".")
    keys = [k for k, f in section.model_fields.items() if not config_only(f.json_schema_extra)]
    return f"{what}; JSON or YAML with keys {', '.join(keys)}"


def _structured(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON or YAML: {e}") from None


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields set on the command line, as a nested dict."""
    out: dict[str, Any] = {}
    for dest, value in vars(args).items():
        if value is None or "__" not in dest:
            continue
        section, field = dest.split("__", 1)
        if section in SECTIONS:
            out.setdefault(section, {})[field] = value
    return out


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(paths: Path | Sequence[Path] | None, overrides: Mapping[str, Any]) -> RunConfig:
    """The run's configuration: the defaults (prompts from ``agent/config/default.yaml``), then
    each file of ``paths`` in order (``--config a.yaml --config b.yaml``: b's keys win, sections
    merge key by key; a bare name such as ``paper`` that is no file here is the shipped
    ``agent/config/paper.yaml``), then ``overrides`` (the flags)."""
    if isinstance(paths, str | Path):
        paths = [Path(paths)]
    data: dict[str, Any] = {}
    files: list[tuple[Path, dict[str, Any]]] = []
    for path in paths or []:
        files.append((Path(path), _read_config_file(shipped_config(Path(path)))))
        data = merge(data, files[-1][1])
    data = merge(data, overrides)
    # Switching the sandbox kind keeps only the fields that kind has.
    sandbox = data.get("sandbox") or {}
    if isinstance(sandbox, dict) and "type" not in sandbox:  # `--image X` alone means docker
        sandbox = data["sandbox"] = {"type": "docker", **sandbox}
    if isinstance(sandbox, dict) and isinstance(sandbox.get("type"), str):
        try:  # a built-in kind or a user's class (envs/registry.py)
            allowed = set(sandbox_config_class(sandbox["type"]).model_fields)
        except SandboxTypeError as e:
            raise ConfigError(f"bad configuration: sandbox.type: {e}") from None
        dropped = {k for k in sandbox if k not in allowed and k in overrides.get("sandbox", {})}
        data["sandbox"] = {k: v for k, v in sandbox.items() if k not in dropped}
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(describe_config_errors(e, data, files, overrides)) from None


NO_MODEL = "no model given: pass --model NAME (or model.name in --config)"


def describe_config_errors(
    error: ValidationError,
    data: Mapping[str, Any],
    files: Sequence[tuple[Path, Mapping[str, Any]]],
    overrides: Mapping[str, Any],
) -> str:
    """One line for all the problems of a run's configuration, each named by where it was set
    (the file, or the flag) and its key: ``a.yaml: unknown key model.nmae (did you mean
    model.name?)``, ``--agent.step-limit: Input should be greater than or equal to 0, got -5``.
    Another tool's keys are told by what pgs calls them (:func:`agent.run.foreign.foreign_hint`):
    ``mini.yaml: this looks like a mini-swe-agent config: model.model_name is pgs's
    model.name``. A key missing because a close one is misspelled, or given under another
    tool's name, is not named twice."""
    by_source: dict[str, list[str]] = {}  # "" for the defaults
    foreign_tool: dict[str, str] = {}  # a source that looks like another tool's config
    meant: set[tuple[str, ...]] = set()
    missing: list[tuple[str, ...]] = []
    for item in error.errors():
        loc = tuple(str(p) for p in item["loc"] if not str(p).endswith("Config"))
        key = ".".join(loc)
        if item["type"] == "missing":
            missing.append(loc)
            continue
        where = _set_by(loc, files, overrides)
        if item["type"] == "extra_forbidden":
            source = next((d for path, d in reversed(files) if str(path) == where), data)
            foreign = foreign_hint(loc, source)
            names = list((_model_at(loc[:-1], data) or BaseModel).model_fields)
            close = difflib.get_close_matches(loc[-1], names, n=1, cutoff=0.6)
            if foreign is not None:  # another tool's key: what pgs calls it (agent/run/foreign.py)
                tool, told, targets = foreign
                foreign_tool.setdefault(where, tool)
                meant.update(targets)
                by_source.setdefault(where, []).extend(told)
                continue
            hint = f" (did you mean {'.'.join((*loc[:-1], close[0]))}?)" if close else ""
            if close:
                meant.add((*loc[:-1], close[0]))
            problem = f"unknown key {key}{hint}"
        else:
            got = item.get("input")
            shown = f", got {got!r}"[:80] if isinstance(got, str | int | float | bool) else ""
            if isinstance(got, str) and got and got in item["msg"]:
                shown = ""  # the message names the value already
            named = where.startswith("--") and len(loc) == 2  # a flag names its key itself
            problem = f"{item['msg']}{shown}" if named else f"{key}: {item['msg']}{shown}"
        by_source.setdefault(where, []).append(problem)
    for loc in missing:
        if any(loc[: len(m)] == m or m[: len(loc)] == loc for m in meant):
            continue  # `nmae:` already told
        key = ".".join(loc)
        by_source.setdefault("", []).append(
            NO_MODEL if key in ("model", "model.name") else f"{key}: missing"
        )
    lines = []
    for where, told in by_source.items():
        text = "; ".join(told)
        if where in foreign_tool:
            text = f"this looks like a {foreign_tool[where]} config: {text}"
        lines.append(f"{where}: {text}" if where else text)
    return "; ".join(lines)


def _set_by(
    loc: tuple[str, ...],
    files: Sequence[tuple[Path, Mapping[str, Any]]],
    overrides: Mapping[str, Any],
) -> str:
    """Where the value at ``loc`` came from: its flag (flags win over files), the last file
    that holds it, or "" (the defaults)."""
    if len(loc) >= 2 and _holds(overrides, loc[:2]):
        return f"--{loc[0]}.{loc[1].replace('_', '-')}"
    for path, data in reversed(files):
        if _holds(data, loc):
            return str(path)
    return ""


def _holds(data: Mapping[str, Any], loc: Sequence[str]) -> bool:
    for part in loc:
        if not isinstance(data, Mapping) or part not in data:
            return False
        data = data[part]
    return True


def _model_at(loc: Sequence[str], data: Mapping[str, Any]) -> type[BaseModel] | None:
    """The config class of the section at ``loc`` (``()``: the whole config), to name the keys
    it has; None when it is not a config class."""
    model: type[BaseModel] = RunConfig
    for i, part in enumerate(loc):
        if i == 0 and part == "sandbox":
            section = data.get("sandbox")
            kind = section.get("type") if isinstance(section, Mapping) else None
            try:
                model = sandbox_config_class(str(kind or "docker"))
            except SandboxTypeError:
                return None
            continue
        field = model.model_fields.get(part)
        found = field and _config_class(field.annotation)
        if not found:
            return None
        model = found
    return model


def _config_class(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):  # X | None
        found = _config_class(arg)
        if found:
            return found
    return None


#: Config files shipped with pgs (``default.yaml``, ``paper.yaml``), named without the folder.
SHIPPED_CONFIGS = Path(__file__).resolve().parents[1] / "config"


def shipped_config(path: Path) -> Path:
    """``path``, or the shipped config it names (``paper``, ``paper.yaml``) when no such file
    exists here."""
    if path.exists() or len(path.parts) != 1:
        return path
    for candidate in (SHIPPED_CONFIGS / path.name, SHIPPED_CONFIGS / f"{path.name}.yaml"):
        if candidate.is_file():
            return candidate
    return path


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as e:
        raise ConfigError(f"cannot read the config file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"the config file {path} is not valid YAML{_yaml_where(e)}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"the config file {path} must hold a mapping of sections")
    return loaded


def _yaml_where(error: yaml.YAMLError) -> str:
    """Where and what, on one line (str(error) spans several, with a source excerpt)."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{where}: {problem}"


def dump(config: RunConfig) -> dict[str, Any]:
    """``config`` as plain data, with the values that decided the run wherever they came from:
    the base URL an OpenAI-compatible model was reached at, when it came from
    ``OPENAI_BASE_URL`` (a ``.env`` file) or the default, so that ``--config`` of the saved
    file reaches the same server elsewhere. The key's variable is ``model.api_key_env``,
    left out for a litellm provider whose own variable was read."""
    data: dict[str, Any] = json.loads(config.model_dump_json())
    kind = model_kind(config.model)
    if config.model.base_url is None and kind == "openai":
        data["model"]["base_url"] = config.model.resolved_base_url()
    if kind == "litellm" and "api_key_env" not in config.model.model_fields_set:
        # litellm read the provider's own variable (ANTHROPIC_API_KEY, ...): so must a rerun,
        # which a saved api_key_env: OPENAI_API_KEY would send to Anthropic instead.
        del data["model"]["api_key_env"]
    return data


def config_yaml(config: RunConfig) -> str:
    """The resolved configuration as YAML, every section with the values used (the file, the
    flags and the environment merged: :func:`dump`); ``--config`` takes it back. Keys are
    never in it: only the name of the variable that holds one (``model.api_key_env``)."""
    text: str = yaml.dump(dump(config), Dumper=_BlockDumper, sort_keys=False, allow_unicode=True)
    return "# the resolved configuration of a pgs run: pass it to --config to run it again\n" + text


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the prompt templates) as ``|`` blocks, as they are written by hand."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_block)
