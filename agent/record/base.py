"""The base of every part of the run record: tolerant reading, faithful writing.

A :class:`Record` keeps unknown keys (and writes them back), gives missing ones their defaults,
and leaves out of its JSON the fields in :attr:`Record.omitted_when_empty` while they are None
(or an empty list), as the dict records written before these models did.

A record read from a JSON object (``model_validate``, :func:`load`; a part given as a dict to
a constructor too) also remembers that object's layout: the keys it had and their order.
Written back, it has the same keys in the same order (a field the object lacked is written
only once something sets it), so an old file rewrites byte for byte.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

R = TypeVar("R", bound="Record")


class Record(BaseModel):
    """A part of the run record: extra keys kept, fields in :attr:`omitted_when_empty` left
    out of the JSON while None (or an empty list), a loaded file's layout kept."""

    model_config = ConfigDict(extra="allow")
    omitted_when_empty: ClassVar[tuple[str, ...]] = ()
    #: The keys of the JSON object this record was loaded from, in order (None: built in code).
    _layout: list[str] | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_layout(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        record = handler(data)
        if isinstance(data, dict) and isinstance(record, Record):
            record._layout = list(data)
        return record

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        self._layout = None  # built in code (its parts given as dicts keep theirs)

    # Mapping access, for code written when the record was a dict: ``record["key"]`` is the
    # field (or the extra key), ``record["key"] = value`` a validated assignment.
    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields:
            return getattr(self, key)
        extra = self.model_extra or {}
        if key in extra:
            return extra[key]
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self.__pydantic_validator__.validate_assignment(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __eq__(self, other: object) -> bool:
        """Equal when they write the same JSON (a loaded record and one built in code alike)."""
        if isinstance(other, dict):
            return bool(self.model_dump(mode="json") == other)
        if isinstance(other, Record) and type(other) is type(self):
            return bool(self.model_dump(mode="json") == other.model_dump(mode="json"))
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    @model_serializer(mode="wrap")
    def _leave_out_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not isinstance(self, Record):  # a plain dict where a record belongs: as it is
            return data
        layout = self._layout
        present = set(layout) if layout is not None else set()
        for name in self.omitted_when_empty:
            if name in present:
                continue
            if name in data and (data[name] is None or data[name] == []):
                del data[name]
        if layout is None:
            return data
        for name in type(self).model_fields:
            if name not in present and name not in self.model_fields_set:
                data.pop(name, None)  # defaulted on reading, never set: not in the file
        ordered = {key: data[key] for key in layout if key in data}
        ordered.update((key, value) for key, value in data.items() if key not in ordered)
        return ordered


def load(cls: type[R], data: Any) -> R:
    """``data`` (a parsed JSON object) as a ``cls``, remembering its layout at every level."""
    return cls.model_validate(data)
