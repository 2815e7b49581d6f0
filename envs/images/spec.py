"""What a user may override about a repository image: the ``image`` section of a
``.pgs.yaml``, or the flags of ``pgs env build`` and ``pgs run`` (:class:`RepoImageSpec`)."""

from __future__ import annotations

import datetime

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envs.errors import EnvError
from envs.images.base import check_python


class RepoImageSpec(BaseModel):
    """What a user may override about a repository image (``.pgs.yaml`` key ``image``)."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(
        default=None, description="3.9, 3.11 or 3.13; default: from requires-python, else 3.11"
    )
    pip_packages: list[str] = Field(
        default_factory=list, description="extra requirements, resolved with the detected ones"
    )
    extras: list[str] | None = Field(
        default=None, description="extras of the project to install; default: the test/dev extras"
    )
    install: list[str] | None = Field(
        default=None,
        description="shell commands run in /repo (package indexes in reach) instead of the "
        "detected install",
    )
    index_date: str | None = Field(
        default=None,
        description="resolve what is not pinned exactly (==) against the package index as it "
        "was at the start of this day (YYYY-MM-DD, UTC); `now`: the index as it is; default "
        "(`commit`): the day of the commit's committer date. Exact pins are kept even when newer",
    )
    run_install: bool = Field(
        default=True,
        description="run the repository's own install code while its image is built (setup.py, "
        "its build backend, .pgs.yaml install commands); false: only its dependencies, from "
        "requirement files and pyproject.toml metadata, and the source put on the path unbuilt",
    )

    @field_validator("python")
    @classmethod
    def _supported(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_python(value)
        except EnvError as e:
            raise ValueError(str(e)) from e

    @field_validator("index_date", mode="before")
    @classmethod
    def _a_day(cls, value: object) -> object:
        if isinstance(value, datetime.date):  # YAML reads `2024-06-15` as a date
            return value.isoformat()[:10]
        if value is None:
            return None
        text = str(value).strip().lower()
        if text in ("now", "commit"):
            return text
        try:
            return datetime.date.fromisoformat(text).isoformat()
        except ValueError:
            raise ValueError(
                f"{value!r} is not a day: give YYYY-MM-DD, `now` or `commit`"
            ) from None

    @field_validator("install")
    @classmethod
    def _one_line_each(cls, value: list[str] | None) -> list[str] | None:
        if value and any("\n" in command for command in value):
            raise ValueError("give one single-line shell command per entry of install")
        return value

    @classmethod
    def from_yaml(cls, text: str, *, source: str = ".pgs.yaml") -> RepoImageSpec:
        """The ``image`` section of a ``.pgs.yaml`` (an empty spec when there is none)."""
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise EnvError(f"{source} is not valid YAML: {e}") from e
        section = data.get("image") if isinstance(data, dict) else None
        if section is None:
            return cls()
        return cls.checked(section, source=f"{source}, section image")

    @classmethod
    def checked(cls, data: object, *, source: str = "image options") -> RepoImageSpec:
        """Validate ``data``; a problem is one EnvError sentence, not pydantic's report."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'image'}: "
                f"{err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()
            )
            raise EnvError(f"{source}: {problems}") from e

    def overridden_by(self, other: RepoImageSpec) -> RepoImageSpec:
        """This spec with every field ``other`` sets explicitly replaced (CLI flags over file)."""
        return self.model_copy(update=other.model_dump(exclude_unset=True))
