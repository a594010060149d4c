"""Sparse offset and time indexes of one segment, in Kafka's file formats.

`.index` entries are (relative offset int32, file position int32); `.timeindex` entries are
(timestamp int64, relative offset int32). Both are kept in memory as arrays for bisection
and appended to their files in batches: they can always be rebuilt from the log, so a lost
tail only costs a rebuild at the next unclean start.
"""

from __future__ import annotations

import os
import struct
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_FLUSH_AT = 64 * 1024


class IndexCorrupt(ValueError):
    pass


class _Index(ABC):
    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry.size)
        self.keys = array("q")
        self.values = array("q")
        self._pending = bytearray()
        self._on_disk = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _add(self, key: int, value: int, raw: bytes) -> None:
        self.keys.append(key)
        self.values.append(value)
        self._pending += raw
        if len(self._pending) >= _FLUSH_AT:
            try:
                self.flush()
            except OSError:
                pass  # a full disk: the entries stay pending, and the log they index is what counts

    def flush(self) -> None:
        """Append entries not yet in the file. If that fails (a full disk), the file is cut back
        to the entries it held before, so a retry cannot leave an entry in it twice."""
        if not self._pending:
            return
        try:
            with open(self.path, "ab") as f:
                f.write(self._pending)
        except OSError:
            try:
                os.truncate(self.path, self._on_disk * self.entry.size)
            except OSError:
                pass
            raise
        self._on_disk = len(self.keys)
        self._pending.clear()

    def fsync(self) -> None:
        self.flush()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_all(self) -> None:
        """Rewrite the file from memory (after a rebuild or a truncation)."""
        data = self._encode_all()
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk must not keep a half-written copy around
            raise
        os.replace(tmp, self.path)
        self._pending.clear()
        self._on_disk = len(self.keys)

    @abstractmethod
    def _encode_all(self) -> bytes: ...

    def clear(self) -> None:
        del self.keys[:]
        del self.values[:]
        self._pending.clear()
        self._on_disk = 0


class OffsetIndex(_Index):
    """keys: absolute last offsets of indexed batches; values: their file positions."""

    entry = _OFFSET_ENTRY

    def append(self, offset: int, position: int) -> None:
        if self.keys and offset <= self.keys[-1]:
            return
        self._add(offset, position, _OFFSET_ENTRY.pack(offset - self.base_offset, position))

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch ending at or before `offset` (0 if none)."""
        i = bisect_right(self.keys, offset) - 1
        return self.values[i] if i >= 0 else 0

    def truncate_after_position(self, position: int) -> None:
        """Drop entries pointing at `position` or beyond."""
        n = len(self.keys)
        while n and self.values[n - 1] >= position:
            n -= 1
        if n != len(self.keys):
            del self.keys[n:]
            del self.values[n:]
            self.write_all()

    def _encode_all(self) -> bytes:
        out = bytearray()
        base = self.base_offset
        for off, pos in zip(self.keys, self.values, strict=True):
            out += _OFFSET_ENTRY.pack(off - base, pos)
        return bytes(out)

    def load(self, segment_size: int, limit_offset: int | None) -> None:
        """Read the file; raise IndexCorrupt when it cannot describe this segment."""
        data = self.path.read_bytes()
        if len(data) % 8:
            raise IndexCorrupt(f"{self.path}: size {len(data)} is not a multiple of 8")
        self.clear()
        base = self.base_offset
        last_off, last_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel == 0 and pos == 0 and last_pos >= 0:
                break  # Kafka preallocates index files with zeros; the rest is unused
            off = base + rel
            if off <= last_off or pos <= last_pos or pos >= segment_size or (limit_offset is not None and off >= limit_offset):
                raise IndexCorrupt(f"{self.path}: entry ({off}, {pos}) is out of order or out of range")
            self.keys.append(off)
            self.values.append(pos)
            last_off, last_pos = off, pos
        self._on_disk = len(self.keys)


class TimeIndex(_Index):
    """keys: max timestamps so far (increasing); values: absolute offsets at which they were reached."""

    entry = _TIME_ENTRY

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self.keys and (timestamp <= self.keys[-1] or offset < self.values[-1]):
            return
        self._add(timestamp, offset, _TIME_ENTRY.pack(timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is at or before `timestamp` (base offset if none)."""
        i = bisect_right(self.keys, timestamp) - 1
        return self.values[i] if i >= 0 else self.base_offset

    @property
    def last_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    @property
    def last_offset(self) -> int:
        return self.values[-1] if self.values else -1

    def _encode_all(self) -> bytes:
        out = bytearray()
        base = self.base_offset
        for ts, off in zip(self.keys, self.values, strict=True):
            out += _TIME_ENTRY.pack(ts, off - base)
        return bytes(out)

    def load(self, limit_offset: int | None) -> None:
        data = self.path.read_bytes()
        if len(data) % 12:
            raise IndexCorrupt(f"{self.path}: size {len(data)} is not a multiple of 12")
        self.clear()
        base = self.base_offset
        last_ts, last_off = -(1 << 63), -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if ts == 0 and rel == 0 and self.keys:
                break
            off = base + rel
            if ts <= last_ts or off < last_off or (limit_offset is not None and off >= limit_offset):
                raise IndexCorrupt(f"{self.path}: entry ({ts}, {off}) is out of order or out of range")
            self.keys.append(ts)
            self.values.append(off)
            last_ts, last_off = ts, off
        self._on_disk = len(self.keys)
