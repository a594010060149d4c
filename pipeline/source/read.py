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
    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic, self.partition, self.include_headers = topic, partition, include_headers
        self.schema = arrow_schema(include_headers)
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.stamps: list[int | None] = []
        self.types: list[int] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def add(self, msg: Any) -> None:
        self.keys.append(msg.key())
        self.values.append(msg.value())
        self.offsets.append(msg.offset())
        kind, ts = msg.timestamp()
        # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka's timestampType: 0 CreateTime, 1 LogAppendTime
        self.stamps.append(ts * 1000 if kind else None)
        self.types.append(1 if kind == 2 else 0)
        if self.include_headers:
            hs = msg.headers()
            self.headers.append([{"key": k, "value": v} for k, v in hs] if hs else [])

    def __len__(self) -> int:
        return len(self.offsets)

    def emit(self) -> pa.RecordBatch:
        n = len(self.offsets)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.stamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
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
    conf.update({"enable.partition.eof": True, "error_cb": lambda e: errors.append(str(e))})
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
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        # The log ends before `until`: those offsets are gone (truncation / deleted topic).
                        end = msg.offset()
                        if end < r.until:
                            if fail_on_data_loss:
                                raise _loss(r, max(expected, end), r.until, f"the log ends at {end}")
                        expected = r.until  # what lies between is compacted away or control records
                        break
                    if code == KafkaError._AUTO_OFFSET_RESET or code == KafkaError.OFFSET_OUT_OF_RANGE:
                        low, high = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=poll_timeout_ms / 1000)
                        if fail_on_data_loss:
                            raise _loss(r, expected, min(max(low, expected), r.until), f"the log now holds [{low}, {high})")
                        if expected < low < r.until:
                            expected = low
                            consumer.assign([TopicPartition(r.topic, r.partition, low)])  # seek fails in this error state
                            break
                        expected = r.until
                        break
                    raise SourceError(f"kaflet source: reading {r.topic}-{r.partition} from {bootstrap} failed: {err.str()}")
                offset = msg.offset()
                if offset >= r.until:
                    expected = r.until
                    break
                if offset > expected and expected == r.start:
                    # A first record past the start: loss only if the log start moved past it.
                    low, _ = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=poll_timeout_ms / 1000)
                    if low > expected and fail_on_data_loss:
                        raise _loss(r, expected, min(low, r.until), f"the log starts at {low}")
                batch.add(msg)
                expected = offset + 1
                if len(batch) >= BATCH_ROWS:
                    yield batch.emit()
            else:
                # Past control records and compacted gaps the position moves without records.
                pos = consumer.position([TopicPartition(r.topic, r.partition)])[0].offset
                if pos >= r.until:
                    expected = r.until
        if len(batch):
            yield batch.emit()
    finally:
        consumer.close()
