"""Executors' reads: one offset range of one partition, with a confluent-kafka Consumer (assign + seek).

Records come out as Arrow record batches in the connector's schema, which is far cheaper than a
Python tuple per row. The range [start, until) was fixed on the driver, so a retried task (or a
restarted stream) reads exactly the same records.

Data loss, as the connector means it: records of the range that the broker no longer has (the log
start moved past them: retention, DeleteRecords, a deleted topic) or never will (the log end is
below `until`: truncation). With failOnDataLoss (the default) the task fails naming the offsets;
without, what is there is read and the rest skipped. Offset gaps inside the log (compaction,
transaction markers) are not loss.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.source.kafka import SourceError, client_config
from pipeline.source.ranges import OffsetRange

BATCH_ROWS = 8192
HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS))
    return pa.schema(fields)


def spark_schema(include_headers: bool) -> str:
    ddl = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
    if include_headers:
        ddl += ", headers array<struct<key: string, value: binary>>"
    return ddl


class _Batch:
    """Columns being gathered for the next Arrow batch; whole runs of messages are added at once
    (one comprehension per column costs far less than one call per message)."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic, self.partition, self.include_headers = topic, partition, include_headers
        self.schema = arrow_schema(include_headers)
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.stamps: list[tuple[int, int]] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def add(self, msgs: list[Any]) -> None:
        self.keys += [m.key() for m in msgs]
        self.values += [m.value() for m in msgs]
        self.offsets += [m.offset() for m in msgs]
        self.stamps += [m.timestamp() for m in msgs]
        if self.include_headers:
            # No headers: null, as the connector gives (not an empty array).
            self.headers += [[{"key": k, "value": v} for k, v in hs] if (hs := m.headers()) else None for m in msgs]

    def __len__(self) -> int:
        return len(self.offsets)

    def emit(self) -> pa.RecordBatch:
        n = len(self.offsets)
        # librdkafka's timestamp kinds: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka's timestampType
        # column: 0 CreateTime, 1 LogAppendTime. Milliseconds become Spark's microseconds.
        ms = pa.array([t if k else None for k, t in self.stamps], pa.int64())
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(ms, 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array([1 if k == 2 else 0 for k, _ in self.stamps], pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, HEADERS))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self.clear()
        return batch


def _loss(r: OffsetRange, first_missing: int, end_missing: int, why: str) -> SourceError:
    return SourceError(
        f"kaflet source: cannot fetch offsets [{first_missing}, {end_missing}) of {r.topic}-{r.partition}: {why}. "
        "Some data may have been lost because it is not available in Kafka any more: either it was aged out or deleted, "
        "or the topic was deleted before all its data was processed. If you don't want the query to fail in such "
        "cases, set the source option 'failOnDataLoss' to 'false'."
    )


def read_range(
    r: OffsetRange,
    bootstrap: str,
    kafka: dict[str, str],
    group_id: str,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of [r.start, r.until) of one partition as Arrow batches."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if not isinstance(r, OffsetRange) or r.size <= 0:
        return  # Spark runs one task with a bare InputPartition when there are no ranges at all
    errors: list[str] = []
    conf = client_config(bootstrap, kafka, group_id)
    # fetch.queue.backoff.ms 0: librdkafka otherwise pauses fetching a partition for 1 s whenever its
    # local queue is over queued.min.messages, which caps a range read well below what the broker serves.
    conf = {"fetch.queue.backoff.ms": 0, **conf, "enable.partition.eof": True, "error_cb": lambda e: errors.append(str(e))}
    consumer = Consumer(conf)
    batch = _Batch(r.topic, r.partition, include_headers)
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        expected = r.start  # the next offset we still need
        last_progress = time.monotonic()
        want = min(r.size, 10_000)
        while expected < r.until:
            msgs = consumer.consume(num_messages=want, timeout=0.5)
            if not msgs:
                if time.monotonic() - last_progress > poll_timeout_ms / 1000:
                    seen = "; ".join(dict.fromkeys(errors[-5:])) or "no records"
                    raise SourceError(
                        f"kaflet source: no progress reading {r.topic}-{r.partition} at offset {expected} from "
                        f"kafka.bootstrap.servers={bootstrap} within kafkaConsumer.pollTimeoutMs={poll_timeout_ms} ({seen})"
                    )
                continue
            last_progress = time.monotonic()
            ok = [m.error() is None for m in msgs]  # (KafkaError's == refuses None, so no errs.count(None))
            first_err = ok.index(False) if False in ok else len(msgs)
            recs = msgs[:first_err]
            reached_end = False
            while recs and recs[-1].offset() >= r.until:  # a range of a split partition ends inside the batch
                recs.pop()
                reached_end = True
            if recs:
                if expected == r.start and recs[0].offset() > expected:
                    # A first record past the start: loss only if the log start moved past it.
                    low, _ = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=poll_timeout_ms / 1000)
                    if low > expected and fail_on_data_loss:
                        raise _loss(r, expected, min(low, r.until), f"the log starts at {low}")
                batch.add(recs)
                expected = recs[-1].offset() + 1
                if len(batch) >= BATCH_ROWS:
                    yield batch.emit()
            if reached_end:
                break
            if first_err < len(msgs):
                err = msgs[first_err].error()
                code = err.code()
                if code == KafkaError._PARTITION_EOF:
                    end = msgs[first_err].offset()
                    if end < r.until and fail_on_data_loss:
                        # The log ends before `until`: those offsets are gone (truncation, a deleted topic).
                        raise _loss(r, max(expected, end), r.until, f"the log ends at {end}")
                    break  # at the end: what lies between is compacted away or control records
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low, high = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=poll_timeout_ms / 1000)
                    if fail_on_data_loss:
                        raise _loss(r, expected, min(max(low, expected), r.until), f"the log now holds [{low}, {high})")
                    if not expected < low < r.until:
                        break
                    expected = low
                    consumer.assign([TopicPartition(r.topic, r.partition, low)])  # seek fails in this error state
                    continue
                raise SourceError(f"kaflet source: reading {r.topic}-{r.partition} from {bootstrap} failed: {err.str()}")
            # Past control records and compacted gaps the position moves without records.
            if consumer.position([TopicPartition(r.topic, r.partition)])[0].offset >= r.until:
                break
        if len(batch):
            yield batch.emit()
    finally:
        consumer.close()
