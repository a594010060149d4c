"""A produced batch is stored as Kafka's log validation leaves it: its maxTimestamp set from its
records (the LogAppendTime bit cleared on a CreateTime topic, the append time on a LogAppendTime
topic), records that do not fill their batch refused INVALID_RECORD and data that does not
decompress refused UNKNOWN_SERVER_ERROR. The answers pinned here are Kafka 4.4's for the same
batches (tests/differential/test_reference_timestamps.py compares them live).

A batch whose header already agrees with its records is appended without a copy of it.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker import Broker
from protocol import records as r
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.validation import validate_client_batch
from tests.support.raw_client import RawClient
from tests.support.timestamp_batches import CASES, Case, observe, raw_batch, recent_now

FOUND = {-3: (0, 2, 2000), 500: (0, 1, 1000), 1500: (0, 2, 2000), 2500: (0, -1, -1)}
APPEND_TIME = "log append time"
INVALID_TYPE = (
    "Invalid timestamp type in message DefaultRecord(offset={i}, timestamp=-1, key=2 bytes, value=2 bytes). "
    "Producer should not set timestamp type to LogAppendTime."
)
BAD_TIMESTAMPS = "One or more records have been rejected due to invalid timestamp"


def stored(attributes: int, max_timestamp: int | str, list_offsets: dict[int, Any], base_timestamp: int = 0) -> dict[str, Any]:
    return {
        "error": 0,
        "base_offset": 0,
        "log_start_offset": 0,
        "error_message": None,
        "record_errors": [],
        "log_append_time": "set" if max_timestamp == APPEND_TIME else -1,
        "stored": {"attributes": attributes, "max_timestamp": max_timestamp, "base_timestamp": base_timestamp},
        "list_offsets": list_offsets,
    }


def refused(error: int, message: str | None = None, record_errors: list[tuple[int, str]] | None = None) -> dict[str, Any]:
    return {
        "error": error,
        "base_offset": -1,
        "log_start_offset": 0,
        "error_message": message,
        "record_errors": record_errors or [],
        "log_append_time": -1,
    }


EXPECTED = {
    "header-minus-1": stored(0, 2000, FOUND),
    "header-agrees": stored(0, 2000, FOUND),
    "header-too-high": stored(0, 2000, FOUND),
    "gzip-header-minus-1": stored(1, 2000, FOUND),
    "lz4-header-minus-1": stored(3, 2000, FOUND),
    "zstd-header-minus-1": stored(4, 2000, FOUND),
    "snappy-header-minus-1": stored(2, 2000, FOUND),
    "unordered-stamps": stored(0, 1000, {-3: (0, 0, 1000), 500: (0, 0, 1000), 1500: (0, -1, -1), 2500: (0, -1, -1)}, 500),
    # The records read as 500 (the header's max, under the LogAppendTime bit), so that is the max
    # kept; once the bit is cleared they read 0, 1000 and 2000, and no record holds 500.
    "append-time-bit": stored(0, 500, {-3: (0, -1, -1), 500: (0, 1, 1000), 1500: (0, -1, -1), 2500: (0, -1, -1)}),
    "append-time-bit-header-minus-1": refused(
        ErrorCode.INVALID_TIMESTAMP, BAD_TIMESTAMPS, [(i, INVALID_TYPE.format(i=i)) for i in range(3)]
    ),
    "header-hides-a-future-record": refused(
        ErrorCode.INVALID_TIMESTAMP,
        BAD_TIMESTAMPS,
        [(1, "Timestamp <ms> of message with offset 1 is out of range. The timestamp should be within [<ms>, <ms>]")],
    ),
    "log-append-time-topic": stored(r.TIMESTAMP_TYPE_BIT, APPEND_TIME, dict.fromkeys(FOUND, (0, 0, APPEND_TIME))),
    "append-time-bit-on-a-log-append-time-topic": refused(
        ErrorCode.INVALID_TIMESTAMP, BAD_TIMESTAMPS, [(i, INVALID_TYPE.format(i=i).replace("=-1", "=<ms>")) for i in range(3)]
    ),
    "trailing-bytes": refused(ErrorCode.INVALID_RECORD),
    "fewer-records-than-counted": refused(ErrorCode.INVALID_RECORD),
    "more-records-than-counted": refused(ErrorCode.INVALID_RECORD),
    "record-overruns-the-batch": refused(ErrorCode.INVALID_RECORD),
    "compressed-trailing-bytes": refused(ErrorCode.INVALID_RECORD),
    "gzip-garbage": refused(ErrorCode.UNKNOWN_SERVER_ERROR),
    "lz4-garbage": refused(ErrorCode.UNKNOWN_SERVER_ERROR),
    "unknown-codec-7": refused(ErrorCode.UNKNOWN_SERVER_ERROR),
}


def test_every_case_has_its_expected_answer() -> None:
    assert sorted(EXPECTED) == sorted(CASES)


@pytest.mark.parametrize("name", list(CASES))
async def test_batch_is_stored_as_kafka_validates_it(broker: Broker, raw: Callable[..., Any], name: str) -> None:
    client: RawClient = await raw()
    assert await observe(client, name, CASES[name], recent_now()) == EXPECTED[name]


async def test_message_timestamp_after_max_ms_reads_the_records_not_the_header(broker: Broker, raw: Callable[..., Any]) -> None:
    """A header claiming -1 does not let a record stamped beyond the topic's bound through."""
    client: RawClient = await raw()
    now = recent_now()
    configs = {"message.timestamp.after.max.ms": "600000"}
    seen = await observe(client, "after-bound", Case(lambda n: raw_batch(n, (0, 70_000, 1_800_000), header_max=-1), configs), now)
    assert (seen["error"], [i for i, _ in seen["record_errors"]]) == (ErrorCode.INVALID_TIMESTAMP, [2])


# -- zero copy ------------------------------------------------------------------------------------


def _peak_while_appending(log: PartitionLog, batch: bytes) -> int:
    view = memoryview(batch)
    checked = validate_client_batch(view, log.config, log.name)
    tracemalloc.start()
    try:
        log.append(view, max_timestamp=checked.max_timestamp)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_batch_that_agrees_is_appended_without_a_copy_and_one_that_does_not_is_rewritten(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(max_message_bytes=16 << 20), clean=True)
    now = int(time.time() * 1000)
    stamps = tuple(range(0, 4000, 1))  # 4,000 records of 1 KiB: a 4 MiB batch
    body = bytearray()
    for i, ts in enumerate(stamps):
        r.encode_record(body, i, ts, b"k", bytes(1024))
    agrees = bytes(r._assemble(bytearray(body), len(stamps), len(stamps) - 1, now, now + stamps[-1], 0, -1, -1, -1, 0, -1))
    lies = bytes(r._assemble(bytearray(body), len(stamps), len(stamps) - 1, now, -1, 0, -1, -1, -1, 0, -1))
    assert _peak_while_appending(log, agrees) < 64 * 1024  # the batch's bytes are written as they came
    assert _peak_while_appending(log, lies) >= len(lies)  # copied once, to be rewritten
    first, second = (h for _pos, h in r.iter_batches(log.read(0, 16 << 20) or b""))
    assert first.max_timestamp == second.max_timestamp == now + stamps[-1]
    log.close()
