"""Checks a client batch passes before it is appended (Kafka's analyzeAndValidateRecords and
LogValidator, in their order). A failing batch raises a LogError; nothing is appended.

Records are not decoded except where Kafka's rule needs them: the null-key check of
compacted topics. (Kafka also walks every record of every batch; kaflet keeps batches opaque
on the produce path and relies on the CRC for integrity.)
"""

from __future__ import annotations

import time

from protocol.records import HEADER_SIZE, TIMESTAMP_TYPE_BIT, BatchHeader, InvalidBatch, batch_crc, iter_all_records, read_header
from storage.config import LONG_MAX, LogConfig
from storage.errors import CorruptRecord, InvalidRecord, InvalidTimestamps, RecordErrors, RecordTooLarge


def now_ms() -> int:
    return int(time.time() * 1000)


def validate_client_batch(batch: bytes | bytearray | memoryview, config: LogConfig, name: str, now: int | None = None) -> BatchHeader:
    """`batch` holds exactly one v2 batch (the request layer checked framing and magic)."""
    header = read_header(batch)
    if header.base_offset != 0:
        raise InvalidRecord(f"The baseOffset of the record batch in the append to {name} should be 0, but it is {header.base_offset}")
    size = header.size
    if size > config.max_message_bytes:
        raise RecordTooLarge(
            f"The record batch size in the append to {name} is {size} bytes which exceeds the maximum configured value of {config.max_message_bytes}."
        )
    if size < HEADER_SIZE or header.crc != batch_crc(batch, 0, size):
        raise CorruptRecord(f"Record is corrupt (stored crc = {header.crc}) in topic partition {name}.")
    last_offset = header.base_offset + header.last_offset_delta
    count_from_offsets = last_offset - header.base_offset + 1
    if count_from_offsets <= 0:
        raise InvalidRecord(f"Batch has an invalid offset range: [{header.base_offset}, {last_offset}] in topic partition {name}")
    if header.record_count <= 0:
        raise InvalidRecord(f"Invalid reported count for record batch: {header.record_count} in topic partition {name}")
    if count_from_offsets != header.record_count:
        raise InvalidRecord(
            f"Inconsistent batch offset range [{header.base_offset}, {last_offset}] and count of records {header.record_count} in topic partition {name}"
        )
    if header.is_control:
        raise InvalidRecord(f"Clients are not allowed to write control records in topic partition {name}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecord(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id} in topic partition {name}"
        )
    if config.compact:
        _check_keys(batch, header, name)
    _check_timestamps(batch, header, config, now_ms() if now is None else now)
    return header


def _check_timestamps(batch: bytes | bytearray | memoryview, header: BatchHeader, config: LogConfig, now: int) -> None:
    """message.timestamp.before/after.max.ms for CreateTime topics; a LogAppendTime topic refuses
    batches that already claim LogAppendTime. Records are decoded only when a bound could be
    crossed: the batch's maxTimestamp settles the default case (no lower bound)."""
    if config.log_append_time:
        if header.attributes & TIMESTAMP_TYPE_BIT:
            message = "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."
            raise InvalidTimestamps(
                "One or more records have been rejected due to invalid timestamp", [(i, message) for i in range(header.record_count)]
            )
        return
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if header.max_timestamp - now <= after and before >= LONG_MAX:
        return
    errors = []
    low, high = now - before, now + after
    try:
        for i, rec in enumerate(iter_all_records(batch, 0, header)):
            ts = rec.timestamp
            if ts != -1 and (now - ts > before or ts - now > after):
                errors.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {rec.offset} is out of range. The timestamp should be within [{low}, {high}]",
                    )
                )
    except (InvalidBatch, IndexError, ValueError) as exc:
        raise CorruptRecord(f"Record is corrupt: {exc}") from exc
    if errors:
        raise InvalidTimestamps("One or more records have been rejected due to invalid timestamp", errors)


def _check_keys(batch: bytes | bytearray | memoryview, header: BatchHeader, name: str) -> None:
    errors: list[tuple[int, str]] = []
    try:
        for i, rec in enumerate(iter_all_records(batch, 0, header)):
            if rec.key is None:
                errors.append((i, f"Compacted topic cannot accept message without key in topic partition {name}"))
    except (InvalidBatch, IndexError, ValueError) as exc:
        raise CorruptRecord(f"Record is corrupt in topic partition {name}: {exc}") from exc
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise RecordErrors(
            f"One or more records have been rejected due to {len(errors)} record errors in total, and only showing the first three errors at most: [{shown}]",
            errors,
        )
