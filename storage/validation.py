"""Checks a client batch passes before it is appended (Kafka's analyzeAndValidateRecords and
LogValidator, in their order). A failing batch raises a LogError; nothing is appended.

As Kafka's LogValidator does, every record is read (decompressed first when the batch is
compressed): records that do not fill their batch exactly are INVALID_RECORD, data that does
not decompress is UNKNOWN_SERVER_ERROR, and the batch's maxTimestamp is what its records say,
whatever its header claims (Sarama 1.22, for one, writes -1 there). The walk reads every field's
length and each timestamp, in place; the log rewrites a header that disagrees (storage/log.py),
and appends one that agrees as the client sent it. Where the codec of a compressed batch is not
installed (snappy, lz4 and zstd are optional), its header is taken as it is.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from protocol.records import (
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    InvalidBatch,
    Record,
    batch_crc,
    batch_max_timestamp,
    iter_all_records,
    read_header,
)
from storage.config import LONG_MAX, LogConfig
from storage.errors import CorruptRecord, InvalidRecord, InvalidTimestamps, RecordErrors, RecordTooLarge, UndecodableRecords

_BAD_TIMESTAMPS = "One or more records have been rejected due to invalid timestamp"


class Validated(NamedTuple):
    header: BatchHeader  # as the client sent it
    # The maxTimestamp to store (CreateTime): the records' largest timestamp; None on a
    # LogAppendTime topic, where the log stamps the append time.
    max_timestamp: int | None


def now_ms() -> int:
    return int(time.time() * 1000)


def validate_client_batch(batch: bytes | bytearray | memoryview, config: LogConfig, name: str, now: int | None = None) -> Validated:
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
    records_max = _read_records(batch, header, name)
    if config.compact:
        _check_keys(batch, header, name)
    return Validated(header, _check_timestamps(batch, header, config, now_ms() if now is None else now, records_max))


def _read_records(batch: bytes | bytearray | memoryview, header: BatchHeader, name: str) -> int | None:
    """Every record read as Kafka's validation reads it: their largest timestamp, or None where
    the batch's codec is not installed here (its header is then all there is to go by)."""
    try:
        return batch_max_timestamp(batch, 0, header)
    except InvalidBatch as exc:
        if exc.kind == "codec":
            return None
        if exc.kind == "record":
            raise InvalidRecord(f"{exc.reason} in topic partition {name}") from None
        raise UndecodableRecords(f"{exc.reason} in topic partition {name}") from None


def _record_text(rec: Record) -> str:
    """A record as Kafka's DefaultRecord.toString writes it into error messages."""
    key = 0 if rec.key is None else len(rec.key)
    value = 0 if rec.value is None else len(rec.value)
    return f"DefaultRecord(offset={rec.offset}, timestamp={rec.timestamp}, key={key} bytes, value={value} bytes)"


def _append_time_claimed(batch: bytes | bytearray | memoryview, header: BatchHeader) -> InvalidTimestamps:
    try:
        texts = [f" {_record_text(rec)}" for rec in iter_all_records(batch, 0, header)]
    except InvalidBatch:  # a compressed batch whose codec is not installed: no record to name
        texts = [""] * header.record_count
    message = "Invalid timestamp type in message{}. Producer should not set timestamp type to LogAppendTime."
    return InvalidTimestamps(_BAD_TIMESTAMPS, [(i, message.format(text)) for i, text in enumerate(texts)])


def _check_timestamps(
    batch: bytes | bytearray | memoryview, header: BatchHeader, config: LogConfig, now: int, records_max: int | None
) -> int | None:
    """Kafka's validateTimestamp for every record, then the maxTimestamp to store (None: the
    append time). message.timestamp.before/after.max.ms bound CreateTime records (a record
    stamped -1 is not checked); a LogAppendTime topic refuses batches claiming LogAppendTime,
    and so does a CreateTime topic when their records then read -1. Records are decoded here
    only when a bound could be crossed: their largest timestamp settles the default case."""
    claims_append_time = bool(header.attributes & TIMESTAMP_TYPE_BIT)
    if config.log_append_time:
        if claims_append_time:
            raise _append_time_claimed(batch, header)
        return None
    if claims_append_time:
        # Each record reads as the header's maxTimestamp (Kafka's iterator does so): that is the max.
        if header.max_timestamp == -1:
            raise _append_time_claimed(batch, header)
        records_max = max(-1, header.max_timestamp)
    elif records_max is None:
        records_max = header.max_timestamp
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if records_max - now <= after and before >= LONG_MAX:
        return records_max
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
        raise InvalidTimestamps(_BAD_TIMESTAMPS, errors)
    return records_max


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
