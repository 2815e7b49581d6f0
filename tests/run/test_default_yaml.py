"""``agent/config/default.yaml`` is the whole of a run's defaults and nothing else: every prompt
key in it is a config field whose default is that text and that the code reads (no dead prompt),
every numeric default of the config classes is written in it with its value (and it holds no
number the classes lack), and passing it as a ``--config`` file changes nothing."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from agent.core.prompts import DEFAULT_CONFIG
from agent.core.tool_output import Truncation
from agent.run.config import RunConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {p: p.read_text() for p in (ROOT / "agent").rglob("*.py")}
#: The sections whose defaults default.yaml writes (the sandbox's depend on its kind).
SECTIONS = ("model", "agent", "tools", "pgs")


def shipped() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DEFAULT_CONFIG.read_text())
    return data


def leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    else:
        yield path, node


def section_class(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = section_class(arg)
        if found:
            return found
    return None


def field_at(path: tuple[str, ...]) -> Any:
    """The pydantic field at ``path`` of the run config (``("pgs", "tester", "step_limit")``)."""
    model: type[BaseModel] = RunConfig
    for key in path[:-1]:
        sub = section_class(model.model_fields[key].annotation)
        assert sub is not None, f"{'.'.join(path)}: {key} is not a section"
        model = sub
    assert path[-1] in model.model_fields, f"{'.'.join(path)} is no config field"
    return model.model_fields[path[-1]]


def default_of(field: Any) -> Any:
    return field.default_factory() if field.default_factory else field.default


def is_numeric(annotation: Any) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = set(typing.get_args(annotation)) - {type(None)}
    else:
        args = {annotation}
    return bool(args) and args <= {int, float}


def numeric_fields(
    model: type[BaseModel], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, field in model.model_fields.items():
        sub = section_class(field.annotation)
        if sub is not None:
            yield from numeric_fields(sub, (*path, name))
        elif is_numeric(field.annotation):
            yield (*path, name), field.default


def test_every_numeric_default_of_the_config_classes_is_in_default_yaml_with_its_value() -> None:
    data = shipped()
    written = {
        path: value
        for path, value in leaves(data)
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool))
    }
    expected: dict[tuple[str, ...], Any] = {}
    for section in SECTIONS:
        model = section_class(RunConfig.model_fields[section].annotation)
        assert model is not None
        expected.update(numeric_fields(model, (section,)))
    assert len(expected) > 25  # the walk found the classes' numbers
    missing = {".".join(p): v for p, v in expected.items() if p not in written}
    assert not missing, f"numeric defaults not written in default.yaml: {missing}"
    wrong = {
        ".".join(p): (written[p], v)
        for p, v in expected.items()
        if written[p] != v or type(written[p]) is not type(v)
    }
    assert not wrong, f"default.yaml (written, class default) disagree: {wrong}"
    extra = sorted(".".join(p) for p in written if p not in expected)
    assert not extra, f"numbers in default.yaml that no config class has: {extra}"


def prompt_keys() -> list[tuple[str, ...]]:
    return [path for path, value in leaves(shipped()) if isinstance(value, str)]


def read_by_code(path: tuple[str, ...]) -> bool:
    """Whether the code uses the text at ``path``: a format error raised with its kind, a
    refusal or truncation convention the code names, any other field read as an attribute
    (outside its own definition)."""
    key = path[-1]
    if path[:2] == ("agent", "format_errors") and key != "format_help":
        pattern = rf'kind="{key}"'
    elif path[:2] == ("agent", "truncation_templates"):
        return key.replace("_", "-") in typing.get_args(Truncation)
    elif path[:2] == ("agent", "refusals"):  # a program's refusal, or the interpreters'
        parsing = SOURCES[ROOT / "agent" / "core" / "parsing.py"]
        return re.search(rf'"{key}"\)?,?$|refusals\.{key}\b', parsing, re.M) is not None
    else:
        pattern = rf"\.{key}\b"
    definition = re.compile(rf"^\s*{key}\s*:|default_prompt\(|_default\(")
    for text in SOURCES.values():
        for line in text.splitlines():
            if re.search(pattern, line) and not definition.search(line):
                return True
    return False


def test_every_prompt_key_is_a_config_field_with_that_text_that_the_code_uses() -> None:
    keys = prompt_keys()
    assert len(keys) >= 40  # the Generator's, the Tester's and the feedback's
    for path in keys:
        value = dict(leaves(shipped()))[path]
        assert default_of(field_at(path)) == value, f"{'.'.join(path)}: not the field's default"
    unused = [".".join(p) for p in keys if not read_by_code(p)]
    assert not unused, f"prompts in default.yaml that no code reads: {unused}"


def test_the_check_for_unused_prompts_finds_one() -> None:
    assert not read_by_code(("agent", "format_errors", "no_such_error"))
    assert not read_by_code(("pgs", "tester", "no_such_template"))
    assert not read_by_code(("agent", "refusals", "browser"))
    assert read_by_code(("pgs", "tester", "probe_template"))


def test_default_yaml_as_a_config_file_changes_nothing(tmp_path: Path) -> None:
    model = {"model": {"name": "m"}}
    assert load_config([DEFAULT_CONFIG], model) == load_config([], model)
    assert load_config([Path("default")], model) == load_config([], model)  # the shipped name


def test_docs_prompts_md_lists_every_prompt_key() -> None:
    listed = (ROOT / "docs" / "prompts.md").read_text()
    missing = [".".join(p) for p in prompt_keys() if f"`{'.'.join(p)}`" not in listed]
    assert not missing, f"prompt keys docs/prompts.md does not list: {missing}"


def test_no_key_of_the_shipped_config_is_written_twice() -> None:
    # YAML keeps the last of two equal keys silently: an edit of the first would do nothing.
    repeated: list[str] = []

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        keys = [loader.construct_object(k) for k, _ in node.value]
        repeated.extend(f"{k} (line {node.start_mark.line + 1})" for k in keys if keys.count(k) > 1)
        return loader.construct_mapping(node)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    assert yaml.load(DEFAULT_CONFIG.read_text(), Loader=Strict)
    assert not repeated
