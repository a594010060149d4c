"""Nullability per (api, version), and the length of strings, enforced in one place for every
schema-decoded request.

kafka-python's schema codecs decode a null string, bytes, array or struct wherever the wire
says -1 (or 0 in a compact encoding), whether or not the schema lets that field be null at
that version. Kafka's generated readers refuse it ("non-nullable field X was serialized as
null") and the request never reaches a handler. `check(cls, version, request)` does the
same after decoding: a checker is compiled once per (message class, version) from the
schema's `nullableVersions` and walks only the fields that can hold a null (strings,
bytes, records, arrays, structs; elements of arrays of strings or bytes are never
nullable). Tagged fields are not checked: kafka-python leaves an absent one None, where
Kafka's reader takes the field's default. A null where the schema forbids it raises NullFieldError, a decode error.

A string is at most 32,767 bytes in every version: a classic (int16) length cannot say more, and
Kafka's readers of a flexible version refuse a longer compact string ("string field X had invalid
length N"), so the request is not served and the connection closes. The checker enforces the same on
flexible versions (StringLengthError), so that no overlong id reaches a record key whose int16
length cannot hold it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs import Bytes, String
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField


class NullFieldError(ValueError):
    """A field that the schema does not allow to be null at this version was null."""


class StringLengthError(ValueError):
    """A string field is longer than 32,767 bytes."""


MAX_STRING_BYTES = 32_767  # Short.MAX_VALUE


def too_long(value: str) -> bool:
    """Whether `value`'s UTF-8 form exceeds MAX_STRING_BYTES (encoded only when it may)."""
    return len(value) > MAX_STRING_BYTES // 3 and len(value.encode("utf-8", "surrogatepass")) > MAX_STRING_BYTES


Checker = Callable[[Any, str], None]


def _can_be_null(field: SimpleField) -> bool:
    # Strings, bytes and records decode to None from a -1 length; numbers, booleans and
    # UUIDs (the zero UUID means "no id") have no null form to police.
    kind = field._type
    return isinstance(kind, String) or kind is Bytes or field.type_str == "records"


def _is_string(field: Any) -> bool:
    return isinstance(field, SimpleField) and isinstance(field._type, String)


def _compile(fields: Any, version: int, flexible: bool = False) -> Checker | None:
    """A checker for the fields of one struct at `version`, or None when nothing can be null or too long."""
    steps: list[Callable[[Any, str], None]] = []
    for field in fields or ():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue  # an absent tagged field decodes to None here, where Kafka takes its default
        name = field.name
        nullable = field.nullable_for_version_q(version)
        if isinstance(field, StructArrayField):
            steps.append(_struct_array_step(name, nullable, _compile(field.array_of._fields, version, flexible)))
        elif isinstance(field, ArrayField):
            inner = field.array_of
            strings = flexible and _is_string(inner)
            steps.append(_array_step(name, nullable, isinstance(inner, SimpleField) and _can_be_null(inner), strings))
        elif isinstance(field, StructField):
            steps.append(_struct_step(name, nullable, _compile(field._fields, version, flexible)))
        elif flexible and _is_string(field):
            steps.append(_string_step(name, nullable))
        elif isinstance(field, SimpleField) and not nullable and _can_be_null(field):
            steps.append(_scalar_step(name))
    if not steps:
        return None

    def check(obj: Any, path: str) -> None:
        for step in steps:
            step(obj, path)

    return check


def _fail(path: str, name: str) -> None:
    raise NullFieldError(f"non-nullable field {path}{name} was serialized as null")


def _too_long(path: str, name: str, value: str) -> None:
    raise StringLengthError(f"string field {path}{name} had invalid length {len(value.encode('utf-8', 'surrogatepass'))}")


def _string_step(name: str, nullable: bool) -> Callable[[Any, str], None]:
    def step(obj: Any, path: str) -> None:
        value = getattr(obj, name)
        if value is None:
            if not nullable:
                _fail(path, name)
        elif too_long(value):
            _too_long(path, name, value)

    return step


def _scalar_step(name: str) -> Callable[[Any, str], None]:
    def step(obj: Any, path: str) -> None:
        if getattr(obj, name) is None:
            _fail(path, name)

    return step


def _array_step(name: str, nullable: bool, elements_checked: bool, strings: bool = False) -> Callable[[Any, str], None]:
    def step(obj: Any, path: str) -> None:
        items = getattr(obj, name)
        if items is None:
            if not nullable:
                _fail(path, name)
            return
        if elements_checked or strings:
            for i, item in enumerate(items):
                if item is None:
                    if elements_checked:
                        _fail(path, f"{name}[{i}]")
                elif strings and too_long(item):
                    _too_long(path, f"{name}[{i}]", item)

    return step


def _struct_array_step(name: str, nullable: bool, inner: Checker | None) -> Callable[[Any, str], None]:
    def step(obj: Any, path: str) -> None:
        items = getattr(obj, name)
        if items is None:
            if not nullable:
                _fail(path, name)
            return
        if inner is not None:
            for i, item in enumerate(items):
                inner(item, f"{path}{name}[{i}].")

    return step


def _struct_step(name: str, nullable: bool, inner: Checker | None) -> Callable[[Any, str], None]:
    def step(obj: Any, path: str) -> None:
        value = getattr(obj, name)
        if value is None:
            if not nullable:
                _fail(path, name)
            return
        if inner is not None:
            inner(value, f"{path}{name}.")

    return step


_CHECKERS: dict[tuple[int, int], Checker | None] = {}


def checker(cls: Any, version: int) -> Checker | None:
    """The compiled checker of a message class at `version` (None: nothing to check)."""
    key = (id(cls), version)
    try:
        return _CHECKERS[key]
    except KeyError:
        pass
    compiled = _compile(cls._struct._fields, version, bool(cls.flexible_version_q(version)))
    _CHECKERS[key] = compiled
    return compiled


def check(cls: Any, version: int, message: Any) -> None:
    """Raise NullFieldError if `message` (decoded at `version`) holds a null the schema forbids,
    StringLengthError if it holds a string over 32,767 bytes."""
    compiled = checker(cls, version)
    if compiled is not None:
        compiled(message, "")
