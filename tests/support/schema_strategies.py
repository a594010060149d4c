"""Hypothesis strategies for kafka-python messages, built by walking a message's schema.

For a message class and a version, `message(cls, version)` generates instances whose every
field present at that version holds a value of its wire type: ints of each width, floats,
booleans, UUIDs, strings and bytes (null where the field is nullable at that version),
bitfields, arrays of either, nested structs and arrays of structs, and tagged fields.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs import (
    UUID,
    BitField,
    Boolean,
    Bytes,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    UnsignedInt16,
)
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

MAX_ITEMS = 3
MAX_TEXT = 12

_INTS = {
    Int8: (-(1 << 7), (1 << 7) - 1),
    Int16: (-(1 << 15), (1 << 15) - 1),
    UnsignedInt16: (0, (1 << 16) - 1),
    Int32: (-(1 << 31), (1 << 31) - 1),
    Int64: (-(1 << 63), (1 << 63) - 1),
}

# The all-zero UUID is how the wire writes "no id": it decodes to None, so generate None for it.
_UUIDS = st.one_of(st.none(), st.uuids().filter(lambda u: u.int != 0))


def _nullable(field: Any, version: int, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy) if field.nullable_for_version_q(version) else strategy


def _simple(field: SimpleField, version: int, element: bool = False) -> st.SearchStrategy[Any]:
    """`element`: an array's item, which is never null (the array itself may be), as in Kafka's readers."""
    kind = field._type
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return st.integers(lo, hi)
    if kind is Float64:
        return st.floats(allow_nan=False)
    if kind is Boolean:
        return st.booleans()
    if kind is UUID:
        return _UUIDS
    if kind is BitField:
        # Bit 31 alone is the "not requested" sentinel (None); real sets use bits 0..30.
        return st.one_of(st.none(), st.sets(st.integers(0, 30), max_size=5))
    if isinstance(kind, String):
        text = st.text(max_size=MAX_TEXT)
        return text if element else _nullable(field, version, text)
    if kind is Bytes:
        raw = st.binary(max_size=MAX_TEXT)
        return raw if element else _nullable(field, version, raw)
    raise TypeError(f"no strategy for field {field.name} of type {field.type_str}")


def field_strategy(field: Any, version: int) -> st.SearchStrategy[Any]:
    if isinstance(field, StructArrayField):
        items = st.lists(struct(field.array_of, version), max_size=MAX_ITEMS)
        return _nullable(field, version, items)
    if isinstance(field, ArrayField):
        items = st.lists(_simple(field.array_of, version, element=True), max_size=MAX_ITEMS)
        return _nullable(field, version, items)
    if isinstance(field, StructField):
        return _nullable(field, version, struct(field, version))
    if isinstance(field, SimpleField):
        return _simple(field, version)
    raise TypeError(f"no strategy for field {field.name} ({type(field).__name__})")


def _fields(struct_field: StructField, version: int) -> dict[str, st.SearchStrategy[Any]]:
    return {f.name: field_strategy(f, version) for f in struct_field._fields if f.for_version_q(version)}


_CACHE: dict[tuple[int, int], st.SearchStrategy[Any]] = {}  # schema fields are unhashable: key by id


def struct(struct_field: StructField, version: int) -> st.SearchStrategy[Any]:
    """Instances of a nested struct's data class with every field of `version` filled in."""
    key = (id(struct_field), version)
    if key not in _CACHE:
        _CACHE[key] = st.builds(struct_field.data_class, **_fields(struct_field, version))
    return _CACHE[key]


def message(cls: Any, version: int) -> st.SearchStrategy[Any]:
    """Instances of a request or response class at `version`."""
    key = (id(cls), version)
    if key not in _CACHE:
        _CACHE[key] = st.fixed_dictionaries(_fields(cls._struct, version)).map(lambda kw: cls(version=version, **kw))
    return _CACHE[key]
