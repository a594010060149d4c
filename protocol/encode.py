"""Hand-written encoding primitives for hot-path responses (Produce, Fetch).

The schema codec is general but slow for the data path; these build the same bytes with
`struct` and let record sets stay separate buffers (written with `writelines`).
"""

from __future__ import annotations

import struct

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: int16 length, or compact (uvarint length + 1) when flexible."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    if flexible:
        return uvarint(len(raw) + 1) + raw
    return I16.pack(len(raw)) + raw


def array_len(count: int | None, flexible: bool) -> bytes:
    """An array's length prefix; None is a null array."""
    if count is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return uvarint(count + 1) if flexible else I32.pack(count)


def bytes_len(length: int | None, flexible: bool) -> bytes:
    """The length prefix of a (nullable) bytes/records field."""
    if length is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return uvarint(length + 1) if flexible else I32.pack(length)


NO_TAGS = b"\x00"
