"""The package index as it was at a moment: PyPI's simple API without the files uploaded later.

An environment spec pins some packages and leaves the rest to the resolver; resolved today, the
rest are newer than when the spec was written (and than in the official images built from it),
and an old repository breaks on them (sphinx 3.0 with docutils 0.22). A build that gives a
moment reaches the index through the build proxy (:mod:`envs.images.buildnet`), which passes
each project page through :func:`visible`, so the resolver sees what it saw then. Any pip since
22.2 asks for the JSON form (PEP 691), whose files carry their ``upload-time`` (PEP 700); an
HTML answer is passed through unfiltered.

A build may name exact pins (:data:`Pins`: ``pip==24.2``, a lock file's versions): the files of
those versions stay visible whatever their upload time, so a pin newer than the moment is kept
and only what is left unpinned resolves as of the moment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

JSON_TYPE = "application/vnd.pypi.simple.v1+json"

#: Exact pins a build keeps visible: canonical project name -> normalized versions.
Pins = Mapping[str, frozenset[str]]


def canonical_name(name: str) -> str:
    """PEP 503's normalized name (``Foo_Bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _normalized(version: str) -> str | None:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return None


def file_version(filename: str) -> str | None:
    """The normalized version of a wheel or sdist file name (None when it cannot be read)."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    from packaging.version import InvalidVersion

    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def exact_pins(lines: Iterable[str]) -> dict[str, frozenset[str]]:
    """The ``name==version`` (and ``===``) pins among requirement lines; options (``-r``,
    ``--hash``), comments, URLs, wildcard and range specifiers are not pins."""
    from packaging.requirements import InvalidRequirement, Requirement

    found: dict[str, set[str]] = {}
    for raw in lines:
        line = re.split(r"(?:^|\s)#", raw, maxsplit=1)[0]
        line = re.split(r"\s+--?[A-Za-z]", line, maxsplit=1)[0].strip().rstrip("\\").strip()
        if not line or line.startswith("-"):
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        for spec in requirement.specifier:
            if spec.operator in ("==", "===") and "*" not in spec.version:
                version = _normalized(spec.version)
                if version:
                    found.setdefault(canonical_name(requirement.name), set()).add(version)
    return {name: frozenset(versions) for name, versions in found.items()}


def merge_pins(*groups: Pins) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for group in groups:
        for name, versions in group.items():
            out[name] = out.get(name, frozenset()) | versions
    return out


def visible(page: dict[str, Any], moment: str, pins: Pins | None = None) -> dict[str, Any]:
    """``page`` (a PEP 691 project page) without the files uploaded at or after ``moment``
    (ISO 8601, UTC, as PEP 700 writes ``upload-time``), except those of a pinned version."""
    kept = (pins or {}).get(canonical_name(str(page.get("name") or "")), frozenset())
    files = [
        f
        for f in page.get("files", [])
        if str(f.get("upload-time") or "") < moment
        or (kept and file_version(str(f.get("filename") or "")) in kept)
    ]
    return {**page, "files": files}
