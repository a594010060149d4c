"""Request and response headers (request v1/v2, response v0/v1), parsed and written by hand.

The header is on every request's hot path, so it is decoded with `struct` rather than
through the schema codec.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from protocol.compiled import speedups

_HDR = struct.Struct(">hhih")
_I32 = struct.Struct(">i")
_SIZE_CORR = struct.Struct(">ii")


class HeaderError(ValueError):
    """The request header does not decode."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint at `pos`; returns (value, next position)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise HeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise HeaderError("varint too long")


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise HeaderError("truncated tagged field")
    return pos


def peek_api(buf: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, without the client id."""
    if len(buf) < 8:
        raise HeaderError("frame shorter than a request header")
    api_key, api_version, corr = struct.unpack_from(">hhi", buf, 0)
    return api_key, api_version, corr


def parse_request_header(buf: bytes | memoryview, flexible: bool) -> RequestHeader:
    """Request header v1 (or v2 when `flexible`): the client id stays a non-compact string.
    The compiled twin (protocol/_speedups.c) replaces this where it is built."""
    if len(buf) < 10:
        raise HeaderError("frame shorter than a request header")
    api_key, api_version, corr, clen = _HDR.unpack_from(buf, 0)
    pos = 10
    if clen < 0:
        if clen != -1:
            raise HeaderError("negative client id length")
        client_id = None
    else:
        end = pos + clen
        if end > len(buf):
            raise HeaderError("truncated client id")
        try:
            client_id = bytes(buf[pos:end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HeaderError("client id is not UTF-8") from exc
        pos = end
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, corr, client_id, pos)


def response_header(size_of_body: int, correlation_id: int, flexible: bool) -> bytes:
    """Size prefix plus response header v0, or v1 (an empty tagged-field section) if flexible."""
    if flexible:
        return _SIZE_CORR.pack(size_of_body + 5, correlation_id) + b"\x00"
    return _SIZE_CORR.pack(size_of_body + 4, correlation_id)


parse_request_header_py = parse_request_header
if speedups is not None:
    speedups.configure_header(RequestHeader, HeaderError)
    parse_request_header = speedups.parse_request_header  # the compiled twin
