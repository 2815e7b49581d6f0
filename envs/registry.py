"""Sandbox kinds: the one place that maps a config's ``type`` to a sandbox class.

A ``sandbox`` section's ``type`` is a registered kind (``docker``, ``local``) or an import path
``package.module:Class`` naming a user's own sandbox class. A sandbox class carries

- ``config_class``: its pydantic config, a :class:`SandboxSettings` (``type: str`` plus its
  own fields, ``extra="forbid"``), which validates the section;
- ``from_config(config, *, repo, run_id)``: a classmethod that starts the sandbox
  (:class:`~envs.sandbox.Sandbox`) for the host repository ``repo``.

What the rest of pgs needs to know about a kind is on its config class (:class:`SandboxSettings`
``takes_image``, ``copies_repo``, ``image_tag``), never an ``isinstance`` on a kind. A ``type``
that names no kind or no usable class is a :class:`SandboxTypeError` (a ``ValueError``, so a
config that holds it fails validation with one message naming the field).

Adding a kind to pgs itself: one line in :data:`BUILTIN`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol, Self, cast

from pydantic import BaseModel, BeforeValidator, SerializeAsAny

from envs.sandbox import Sandbox

#: Kinds shipped with pgs, by name: the import path of their sandbox class (imported lazily).
BUILTIN: dict[str, str] = {
    "docker": "envs.docker_sandbox:DockerSandbox",
    "local": "envs.local:LocalSandbox",
}


class SandboxTypeError(ValueError):
    """A sandbox ``type`` that is neither a kind nor an importable sandbox class."""


class SandboxSettings(BaseModel):
    """Base of every sandbox config. Subclasses set ``type`` (a ``Literal`` for built-in kinds,
    any string for a user's class: it holds the import path) and their own fields."""

    type: str
    #: The sandbox starts from a container image (an ``image`` field): pgs builds the
    #: repository's image when none is given, and installs the tool bundles into it.
    takes_image: ClassVar[bool] = False
    #: The sandbox starts with the host's working tree (uncommitted changes too) already in
    #: it; otherwise pgs copies the repository in when the sandbox does not hold it.
    copies_repo: ClassVar[bool] = False

    def image_tag(self) -> str | None:
        """The image the sandbox starts from; None: none given (or the kind takes none)."""
        return None

    def updated(self, **fields: Any) -> Self:
        """A validated copy with ``fields`` changed (unknown fields are an error)."""
        return self.model_validate({**self.model_dump(), **fields})


class SandboxClass(Protocol):
    """What a sandbox class offers the registry."""

    config_class: ClassVar[type[SandboxSettings]]

    @classmethod
    def from_config(cls, config: Any, *, repo: Path, run_id: str) -> Sandbox: ...


def sandbox_class(kind: str) -> type[SandboxClass]:
    """The sandbox class of ``kind``: a built-in name or ``package.module:Class``."""
    path = BUILTIN.get(kind, kind)
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        known = ", ".join(BUILTIN)
        raise SandboxTypeError(
            f"unknown sandbox type {kind!r}: use {known}, or an import path package.module:Class"
        )
    try:
        found: Any = getattr(importlib.import_module(module_name), name)
    except ImportError as e:
        raise SandboxTypeError(f"sandbox type {kind!r}: cannot import {module_name} ({e})") from e
    except AttributeError:
        raise SandboxTypeError(f"sandbox type {kind!r}: {module_name} has no {name}") from None
    config_class = getattr(found, "config_class", None)
    if not (isinstance(config_class, type) and issubclass(config_class, SandboxSettings)):
        raise SandboxTypeError(
            f"sandbox type {kind!r}: {name} has no config_class (a subclass of "
            "envs.registry.SandboxSettings)"
        )
    if not callable(getattr(found, "from_config", None)):
        raise SandboxTypeError(f"sandbox type {kind!r}: {name} has no from_config classmethod")
    return cast("type[SandboxClass]", found)


def config_class(kind: str) -> type[SandboxSettings]:
    """The config class that validates a ``sandbox`` section of type ``kind``."""
    return sandbox_class(kind).config_class


def sandbox_config(section: Any) -> Any:
    """A ``sandbox`` section (a mapping, or a config already built) as its kind's config."""
    if isinstance(section, SandboxSettings) or not isinstance(section, dict):
        return section  # pydantic reports what is not a mapping
    kind = str(section.get("type") or "docker")
    return config_class(kind).model_validate({**section, "type": kind})


def make_sandbox(config: SandboxSettings, *, repo: Path, run_id: str) -> Sandbox:
    """Start the sandbox ``config`` describes, for the host repository ``repo``."""
    return sandbox_class(config.type).from_config(config, repo=repo, run_id=run_id)


#: The ``sandbox`` field of a run's config: any kind's config, chosen by ``type``, and
#: serialized with its own fields (a ``.traj``'s replay config holds them all).
SandboxConfig = Annotated[SerializeAsAny[SandboxSettings], BeforeValidator(sandbox_config)]
