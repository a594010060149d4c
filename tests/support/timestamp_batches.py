"""Record batches whose header does not say what their records say, and how a broker answers them.

Kafka's log validation (LogValidator) reads every record of a produced batch: it sets the batch's
maxTimestamp from the records (and the timestamp type from the topic), and refuses batches whose
records do not fill the batch exactly (INVALID_RECORD) or do not decompress (UNKNOWN_SERVER_ERROR).
`CASES` are such batches, built relative to a `now`; `observe` produces one to a fresh topic and
reads back what the broker made of it: the produce answer, the stored batch's header and the
answers of ListOffsets by timestamp. tests/api/test_batch_timestamps.py pins kaflet's answers;
tests/differential/test_reference_timestamps.py compares them with Kafka 4.4's.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka import codec

from protocol import records as r
from tests.support import data as d
from tests.support.raw_client import RawClient

# Record timestamps of the usual batch, relative to `now` (a minute ago, inside every default bound).
STAMPS = (0, 1000, 2000)
# ListOffsets questions: the largest timestamp (-3), and times between and after the records.
QUESTIONS = (-3, 500, 1500, 2500)
_NOT_READY = (3, 6)  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER
_CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def recent_now() -> int:
    return int(time.time() * 1000) - 60_000


def raw_batch(
    now: int,
    stamps: tuple[int, ...] = STAMPS,
    header_max: int | None = None,
    *,
    base: int | None = None,
    attributes: int = 0,
    compression: str | None = None,
    body: bytes | None = None,
    count: int | None = None,
) -> bytes:
    """A v2 batch of records stamped now + each of `stamps` (deltas from `base`), whose header
    claims maxTimestamp `header_max` (absolute, or -1) and whatever else is asked, CRC right."""
    base_ts = now + (stamps[0] if base is None else base)
    if body is None:
        out = bytearray()
        for i, ts in enumerate(stamps):
            r.encode_record(out, i, now + ts - base_ts, b"k%d" % i, b"v%d" % i)
        body = bytes(out)
    if compression is not None:
        attributes |= _CODECS[compression]
        encode = {"gzip": codec.gzip_encode, "snappy": codec.snappy_encode, "lz4": codec.lz4_encode, "zstd": codec.zstd_encode}
        body = encode[compression](body)
    n = len(stamps) if count is None else count
    maximum = now + max(stamps) if header_max is None else header_max
    return bytes(r._assemble(bytearray(body), n, n - 1, base_ts, maximum, 0, -1, -1, -1, attributes, -1))


def _records(now: int) -> bytes:
    out = bytearray()
    for i, ts in enumerate(STAMPS[:2]):
        r.encode_record(out, i, ts, b"k", b"v")
    return bytes(out)


@dataclass(frozen=True)
class Case:
    build: Callable[[int], bytes]
    configs: dict[str, str] = field(default_factory=dict)


CASES: dict[str, Case] = {
    # What Sarama 1.22 writes: maxTimestamp -1 (Go's zero time) over records with timestamps.
    "header-minus-1": Case(lambda now: raw_batch(now, header_max=-1)),
    "header-agrees": Case(lambda now: raw_batch(now)),
    "header-too-high": Case(lambda now: raw_batch(now, header_max=now + 5000)),
    "gzip-header-minus-1": Case(lambda now: raw_batch(now, header_max=-1, compression="gzip")),
    "lz4-header-minus-1": Case(lambda now: raw_batch(now, header_max=-1, compression="lz4")),
    "zstd-header-minus-1": Case(lambda now: raw_batch(now, header_max=-1, compression="zstd")),
    "snappy-header-minus-1": Case(lambda now: raw_batch(now, header_max=-1, compression="snappy")),
    # A first record stamped after a later one: the max is not the last record's.
    "unordered-stamps": Case(lambda now: raw_batch(now, (1000, 0, 400), header_max=now + 400, base=500)),
    # The LogAppendTime bit on a CreateTime topic: records read as the header's max; Kafka
    # stores the batch as CreateTime with that max.
    "append-time-bit": Case(lambda now: raw_batch(now, header_max=now + 500, attributes=r.TIMESTAMP_TYPE_BIT)),
    "append-time-bit-header-minus-1": Case(lambda now: raw_batch(now, header_max=-1, attributes=r.TIMESTAMP_TYPE_BIT)),
    # A record 3 h ahead (the default message.timestamp.after.max.ms is 1 h), hidden by the header.
    "header-hides-a-future-record": Case(lambda now: raw_batch(now, (0, 3 * 3_600_000), header_max=-1)),
    # LogAppendTime topics stamp the batch whatever its header says.
    "log-append-time-topic": Case(lambda now: raw_batch(now, header_max=-1), {"message.timestamp.type": "LogAppendTime"}),
    "append-time-bit-on-a-log-append-time-topic": Case(
        lambda now: raw_batch(now, header_max=now + 500, attributes=r.TIMESTAMP_TYPE_BIT), {"message.timestamp.type": "LogAppendTime"}
    ),
    # Records that do not fill their batch exactly (the CRC is right): INVALID_RECORD.
    "trailing-bytes": Case(lambda now: raw_batch(now, STAMPS[:2], body=_records(now) + b"\x00\x00\x00")),
    "fewer-records-than-counted": Case(lambda now: raw_batch(now, STAMPS[:2], body=_records(now), count=3)),
    "more-records-than-counted": Case(lambda now: raw_batch(now, STAMPS[:2], body=_records(now), count=1)),
    "record-overruns-the-batch": Case(lambda now: raw_batch(now, STAMPS[:2], body=_records(now)[:-2])),
    "compressed-trailing-bytes": Case(lambda now: raw_batch(now, STAMPS[:2], body=_records(now) + b"\x00\x00", compression="gzip")),
    # Compressed data that does not decompress, and an unknown codec: UNKNOWN_SERVER_ERROR.
    "gzip-garbage": Case(lambda now: raw_batch(now, STAMPS[:2], body=b"not gzip data at all", attributes=1)),
    "lz4-garbage": Case(lambda now: raw_batch(now, STAMPS[:2], body=b"not lz4 data at all, not at all", attributes=3)),
    "unknown-codec-7": Case(lambda now: raw_batch(now, STAMPS[:2], attributes=7)),
}


async def create(client: RawClient, topic: str, configs: dict[str, str]) -> None:
    from kafka.protocol.admin import CreateTopicsRequest

    T = CreateTopicsRequest.CreatableTopic
    config_list = [T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
    req = CreateTopicsRequest[5](
        topics=[T(name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=config_list)],
        timeout_ms=10_000,
        validate_only=False,
    )
    resp = await client.request(req)
    assert resp.topics[0].error_code == 0, resp


def _clock_free(message: str) -> str:
    """A record error's message without the clock readings in it (times in ms, and bounds)."""
    return re.sub(r"-?\d{12,}", "<ms>", message)


def _relative(ts: int, now: int) -> int:
    return ts - now if ts >= 0 else ts


async def observe(client: RawClient, topic: str, case: Case, now: int, ready: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Produce `case` to a new topic; the answer, the stored header and ListOffsets, relative to `now`."""
    await create(client, topic, case.configs)
    if ready is not None:
        await ready(topic)
    batch = case.build(now)
    deadline = time.monotonic() + 30
    while True:
        res = d.produce_result(await client.request(d.produce(topic, 0, batch)))
        # A topic just created may not have its leader yet (Kafka): nothing was validated, retry.
        if res.error_code not in _NOT_READY or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    seen: dict[str, Any] = {
        "error": res.error_code,
        "base_offset": res.base_offset,
        "log_start_offset": res.log_start_offset,
        "error_message": res.error_message,
        "record_errors": [(e.batch_index, _clock_free(e.batch_index_error_message)) for e in res.record_errors],
        "log_append_time": "set" if res.log_append_time_ms > 0 else res.log_append_time_ms,
    }
    if res.error_code:
        return seen
    stored = (await client.request(d.fetch([(topic, 0, 0)]))).responses[0].partitions[0].records
    header = r.validate_batch(stored)  # the CRC matches what the header says now
    appended = res.log_append_time_ms
    seen["stored"] = {
        "attributes": header.attributes,
        "max_timestamp": "log append time" if header.max_timestamp == appended > 0 else _relative(header.max_timestamp, now),
        "base_timestamp": _relative(header.base_timestamp, now),
    }
    answers = {}
    for q in QUESTIONS:
        asked = q if q < 0 else now + q
        part = (await client.request(d.list_offsets(topic, 0, asked, version=8), version=8)).topics[0].partitions[0]
        answers[q] = (part.error_code, part.offset, "log append time" if part.timestamp == appended > 0 else _relative(part.timestamp, now))
    seen["list_offsets"] = answers
    return seen
