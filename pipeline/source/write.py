"""Writes (`df.write.format("kaflet")`, `writeStream`): rows become records through an idempotent Producer.

Columns are the connector's: `value` (required; binary or string, may be null), `key` (binary or
string), `topic` (string; the `topic` option overrides it), `partition` (int; unset or null leaves
it to the producer's partitioner), `headers` (array<struct<key: string, value: binary>>). Other
columns are ignored, as the connector ignores them. The schema is checked on the driver before any
task runs.

Each task produces its rows with `enable.idempotence` (no duplicates or reordering from the
producer's own retries) and waits for every acknowledgement before it reports success; any
delivery error fails the task, naming the record's topic and partition. As with the connector the
sink is at-least-once: a task Spark retries writes its rows again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, DataType, IntegerType, StringType, StructType

from pipeline.source.kafka import LOG, Admin, SourceError
from pipeline.source.options import OptionError, WriteOptions, parse_write


@dataclass
class Written(WriterCommitMessage):
    records: int


def _check_schema(schema: StructType, opts: WriteOptions, what: str) -> None:
    fields: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}

    def kind(name: str, allowed: tuple[type, ...], wanted: str) -> None:
        if name in fields and not isinstance(fields[name], allowed):
            raise OptionError(f"kaflet {what}: column '{name}' must be of type {wanted}, got {fields[name].simpleString()}")

    if "value" not in fields:
        raise OptionError(f"kaflet {what}: required column 'value' not found (columns: {', '.join(fields) or 'none'})")
    kind("value", (BinaryType, StringType), "binary or string")
    kind("key", (BinaryType, StringType), "binary or string")
    kind("topic", (StringType,), "string")
    kind("partition", (IntegerType,), "int")
    if opts.topic is None and "topic" not in fields:
        raise OptionError(f"kaflet {what}: no column 'topic' and no option 'topic': set the option 'topic' or add a topic column")
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, StringType)
            and isinstance(h.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(f"kaflet {what}: column 'headers' must be array<struct<key: string, value: binary>>, got {h.simpleString()}")


def _check_reachable(opts: WriteOptions) -> None:
    """Fail on the driver, naming the address, rather than in every task after message.timeout.ms."""
    admin = Admin(
        opts.bootstrap, {k: v for k, v in opts.kafka.items() if not _producer_only(k)}, "kaflet-sink-check", opts.driver_timeout_ms
    )
    try:
        admin.topics()
    finally:
        admin.close()


def _producer_only(key: str) -> bool:
    # Settings a consumer handle rejects; the reachability check uses a consumer.
    return key in {"acks", "enable.idempotence", "linger.ms", "batch.size", "compression.type", "retries", "message.timeout.ms"} or (
        key.startswith(("queue.buffering", "batch.num", "transactional", "delivery.", "request.required", "compression"))
    )


def _bytes(values: list[Any]) -> list[bytes | None]:
    return [v.encode() if isinstance(v, str) else v for v in values]


class _Partitions:
    """Partition counts of the topics a task writes to, from the producer's metadata (once per topic)."""

    def __init__(self, producer: Any, timeout_s: float) -> None:
        self.producer, self.timeout_s, self.counts = producer, timeout_s, {}

    def count(self, topic: str) -> int | None:
        if topic not in self.counts:
            md = self.producer.list_topics(topic, timeout=self.timeout_s).topics.get(topic)
            self.counts[topic] = len(md.partitions) if md is not None and md.error is None else None
        return self.counts[topic]


def produce_batches(opts: WriteOptions, batches: Iterator[Any]) -> int:
    """Produce every row of `batches`; return the count once all are acknowledged, or raise naming
    the topic and partition, and how many of the task's records were written before."""
    from confluent_kafka import KafkaException, Producer

    failures: list[str] = []
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")

    conf: dict[str, Any] = {
        "bootstrap.servers": opts.bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        # Only failures come back: a callback per acknowledged record would cost more than the produce.
        "delivery.report.only.error": True,
        "on_delivery": delivered,
        "error_cb": lambda e: errors.append(str(e)),
        "logger": LOG,
    }
    conf.update(opts.kafka)
    try:
        producer = Producer(conf)
    except Exception as e:
        raise SourceError(
            f"kaflet sink: bad Kafka client option: {e} (options 'kafka.*' are librdkafka's settings, or the Java client's common names)"
        ) from None
    count = 0
    partitions = _Partitions(producer, opts.driver_timeout_ms / 1000)

    def written_so_far() -> str:
        # Everything handed over before is flushed, so what was written is known exactly.
        while producer.flush(1.0) > 0:
            pass
        done = count - len(failures)
        return f"{done} record(s) of this task were written before it stopped" + (
            " (the sink is at-least-once: a retried task writes them again)" if done else ""
        )

    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        names = batch.schema.names
        values = _bytes(batch.column(names.index("value")).to_pylist())
        keys = _bytes(batch.column(names.index("key")).to_pylist()) if "key" in names else [None] * n
        if opts.topic is not None:
            topics: list[Any] = [opts.topic] * n
        else:
            topics = batch.column(names.index("topic")).to_pylist()
            if None in topics:
                raise SourceError(
                    f"kaflet sink: a row has a null topic; set the option 'topic' or fill the topic column; {written_so_far()}"
                )
        parts = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        heads = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
        if parts is not None:
            # Checked before any row of the batch is produced: a partition that does not exist
            # fails the task naming it, without writing part of the batch.
            for topic, part in sorted({(t, p) for t, p in zip(topics, parts, strict=True) if p is not None}):
                have = partitions.count(topic)
                if part < 0 or (have is not None and part >= have):
                    where = f"topic '{topic}' has {have} partition(s), 0 to {have - 1}" if have else f"topic '{topic}' is not there"
                    raise SourceError(f"kaflet sink: cannot write to partition {part} of topic '{topic}': {where}; {written_so_far()}")
        produce = producer.produce
        try:
            if parts is None and heads is None:
                for topic, value, key in zip(topics, values, keys, strict=True):
                    while True:
                        try:
                            produce(topic, value, key)
                            break
                        except BufferError:  # the local queue is full: serve callbacks, then retry
                            producer.poll(0.05)
                    count += 1
            else:
                parts = parts or [None] * n
                heads = heads or [None] * n
                for topic, value, key, part, head in zip(topics, values, keys, parts, heads, strict=True):
                    # partition -1: the producer's partitioner chooses (librdkafka's RD_KAFKA_PARTITION_UA)
                    hs = [(h["key"], h["value"]) for h in head] if head else None
                    while True:
                        try:
                            produce(topic, value, key, -1 if part is None else part, headers=hs)
                            break
                        except BufferError:
                            producer.poll(0.05)
                    count += 1
        except KafkaException as e:  # refused before sending (unknown partition, record too large, ...)
            which = "a partition of the partitioner's choice" if parts is None or part is None else f"partition {part}"
            raise SourceError(
                f"kaflet sink: cannot write a record to {which} of topic '{topic}': {e.args[0].str()}; {written_so_far()}"
            ) from None
        producer.poll(0)
        if failures:
            break
    while producer.flush(1.0) > 0 and not failures:
        pass
    if failures:
        seen = "; ".join(dict.fromkeys(errors[-3:]))
        raise SourceError(
            f"kaflet sink: {len(failures)} record(s) not delivered to kafka.bootstrap.servers={opts.bootstrap}: {failures[0]}"
            + (f" (client errors: {seen})" if seen else "")
            + f"; {written_so_far()}"
        )
    return count


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError('kaflet sink: save mode Overwrite is not allowed for Kafka topics; use .mode("append")')
        self.opts = parse_write(options, streaming=False)
        _check_schema(schema, self.opts, "sink")
        _check_reachable(self.opts)

    def write(self, iterator: Iterator[Any]) -> Written:
        return Written(produce_batches(self.opts, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts = parse_write(options, streaming=True)
        _check_schema(schema, self.opts, "streaming sink")
        _check_reachable(self.opts)

    def write(self, iterator: Iterator[Any]) -> Written:
        return Written(produce_batches(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every record was acknowledged before its task succeeded

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # acknowledged records cannot be taken back (at-least-once, as the connector)
