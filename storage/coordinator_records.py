"""Framing shared by the share-group, streams-group and share-state records: keys of a group's
records, some scoped to a member (int16 type + int16-length group id [+ member id]), and a value's
tagged-field section holding one optional fixed-size field.

Both follow Kafka's generated code: a tagged field is written only when it differs from its
default, and when read, an unknown tag (or a known one of another size) is skipped.
"""

from __future__ import annotations

import struct

from storage.offsets_records import _H, _NO_TAGS, RecordFormatError, _Reader, _string, _uvarint, key_type


def group_key(kind: int, group: str, member: str | None, member_kinds: frozenset[int]) -> bytes:
    """Key of a group record; `member` exactly for the types in `member_kinds`."""
    if (member is not None) != (kind in member_kinds):
        raise ValueError(f"record type {kind} {'needs' if kind in member_kinds else 'takes no'} member id")
    return _H.pack(kind) + _string(group) + (_string(member) if member is not None else b"")


def parse_group_key(key: bytes, member_kinds: frozenset[int], what: str) -> tuple[int, str, str | None]:
    """(type, group id, member id or None); `what` names the records in errors ("share group")."""
    try:
        kind = key_type(key)
        r = _Reader(key, 2, False)
        group = r.string()
        member = r.string() if kind in member_kinds else None
    except (IndexError, struct.error) as exc:
        raise RecordFormatError(f"bad {what} key: {exc}") from exc
    if r.pos != len(key):
        raise RecordFormatError(f"{what} key has trailing bytes")
    return kind, group, member


def one_tag(tag: int, fmt: struct.Struct, value: int, default: int) -> bytes:
    """A tagged-field section holding `tag` (packed by `fmt`), or none when `value` is its default."""
    if value == default:
        return _NO_TAGS
    return b"\x01" + _uvarint(tag) + _uvarint(fmt.size) + fmt.pack(value)


def read_one_tag(r: _Reader, name: str, tag: int, fmt: struct.Struct, default: int) -> int:
    """Read the last tagged-field section of value `name`: `tag`'s value, else `default`."""
    value = default
    for _ in range(r.uvarint()):
        t = r.uvarint()
        raw = r._take(r.uvarint())
        if t == tag and len(raw) == fmt.size:
            value = fmt.unpack(raw)[0]
    if r.pos != len(r.buf):
        raise RecordFormatError(f"{name} has trailing bytes")
    return value
