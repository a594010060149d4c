"""Reading `__consumer_offsets` batches back at load time, as fast as Python allows.

aiokafka ships a compiled (Cython) record-batch reader; when it is importable kaflet uses it
to iterate records, about six times faster than the pure-Python path in protocol.records,
which is the fallback (and the reference the tests compare against).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from protocol import records as rec

_compiled: Any = None


def compiled_reader() -> Any:
    """aiokafka's compiled batch class, imported on first use (it is not needed to start serving)."""
    global _compiled
    if _compiled is None:
        try:
            from aiokafka.record._crecords import DefaultRecordBatch  # type: ignore[import-not-found]
        except ImportError:  # pragma: no cover - depends on the platform's wheels
            DefaultRecordBatch = False
        _compiled = DefaultRecordBatch
    return _compiled or None


def records_of(buf: Any, pos: int, header: rec.BatchHeader) -> Any:
    """The records of a batch as objects with .offset, .key and .value: the compiled reader's
    batch itself when available (no per-record tuple), else the pure-Python records."""
    reader = compiled_reader()
    if reader is not None:
        return reader(memoryview(buf)[pos : pos + header.size])
    if header.compression:
        from kafka.record.default_records import DefaultRecordBatch

        return DefaultRecordBatch(bytes(memoryview(buf)[pos : pos + header.size]))
    return rec.iter_records(buf, pos)


def batch_records(buf: Any, pos: int, header: rec.BatchHeader, compiled: bool = True) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in the batch at `pos` (compressed batches included)."""
    reader = compiled_reader() if compiled else None
    if reader is not None:
        view = memoryview(buf)[pos : pos + header.size]
        for record in reader(view):
            yield record.offset, record.key, record.value
        return
    if header.compression:
        from kafka.record.default_records import DefaultRecordBatch

        for record in DefaultRecordBatch(bytes(memoryview(buf)[pos : pos + header.size])):
            yield record.offset, record.key, record.value
        return
    yield from rec.iter_key_values(buf, pos, header)
