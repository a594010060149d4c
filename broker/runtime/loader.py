"""Reading an internal topic's batches back at load time, as fast as Python allows.

aiokafka ships a compiled (Cython) record-batch reader; when it is importable kaflet uses it
to iterate records, about six times faster than the pure-Python path in protocol.records,
which is the fallback (and the reference the tests compare against).
"""

from __future__ import annotations

import asyncio
import time
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


class CoordinatorLoader:
    """Replays a partition's log into its shard (Kafka's CoordinatorLoader), from its start:
    batches are CRC-checked (a corrupt one is logged and skipped, storage/log.py), control
    batches replay as transaction markers, and the loop gets a turn every MiB, so that requests
    wait at most ~one MiB of replay. A shard with `replay_batch` (BatchReplay) replays a batch
    at a time; any other one record by record."""

    def __init__(self, yield_bytes: int = 1024 * 1024) -> None:
        self.yield_bytes = yield_bytes

    async def load(self, plog: Any, shard: Any) -> tuple[int, float]:
        """(records replayed, milliseconds taken); raises what the replay raised."""
        started = time.monotonic()
        replay_batch = getattr(shard, "replay_batch", None) or (lambda buf, pos, header, pid: replay_records(shard, buf, pos, header, pid))
        count = 0
        since_yield = 0
        for buf, pos, header in plog.iter_batches(verify=True):
            if header.is_control:
                for _offset, key, _value in batch_records(buf, pos, header):
                    kind = rec.control_record_type(key)
                    if kind is not None:
                        shard.replay_end_transaction(header.producer_id, kind == 1)
                continue
            producer_id = header.producer_id if header.is_transactional else rec.NO_PRODUCER_ID
            count += replay_batch(buf, pos, header, producer_id)
            since_yield += header.size
            if since_yield >= self.yield_bytes:
                since_yield = 0
                await asyncio.sleep(0)
        return count, (time.monotonic() - started) * 1000


def replay_records(shard: Any, buf: Any, pos: int, header: rec.BatchHeader, producer_id: int) -> int:
    """replay() every record of a batch; a record without a key fails the load (every coordinator record has one)."""
    count = 0
    replay = shard.replay
    for offset, key, value in batch_records(buf, pos, header):
        if key is None:
            raise CoordinatorRecordError(f"record at offset {offset} has no key")
        replay(key, value, offset, producer_id)
        count += 1
    return count


class CoordinatorRecordError(ValueError):
    """A record of an internal topic that no coordinator wrote."""
