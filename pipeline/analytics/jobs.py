"""What the analytics commands share: reading `__consumer_offsets` through the kaflet source or Spark's
own Kafka connector (`--connector`),
and running a streaming query either until stopped or over what is there (`--once`)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.analytics.offsets_log import OFFSETS_TOPIC
from pipeline.spark import retry_worker_start

CONNECTORS = ("kaflet", "kafka")


class AnalyticsError(RuntimeError):
    """What stops a command before Spark runs anything (the CLI prints it, without a traceback)."""


@dataclass
class JobOptions:
    bootstrap: str
    out: str
    once: bool = False
    interval_s: float = 10.0
    checkpoint: str | None = None
    # Passed to the data source as "kafka.<key>" options, and (translated to librdkafka's names where
    # they are the Java client's) to the lookups' confluent-kafka clients.
    client_config: dict[str, str] = field(default_factory=dict)
    # The data source that reads the topics: the kaflet source, or Spark's own Kafka connector.
    connector: str = "kaflet"
    # Set to stop a running (not --once) job; SIGINT and SIGTERM set it when run from the main thread.
    stop: threading.Event = field(default_factory=threading.Event)

    def librdkafka(self) -> dict[str, str]:
        """client_config for confluent-kafka clients (Java names translated, see pipeline.source.client_options)."""
        from pipeline.source.client_options import librdkafka_config
        from pipeline.source.options import OptionError

        try:
            return librdkafka_config({k.lower(): v for k, v in self.client_config.items()}, "analytics", "consumer")
        except OptionError as exc:
            raise AnalyticsError(f"--client-config: {exc}") from None

    def path(self, name: str) -> str:
        return str(Path(self.out) / name)

    def checkpoint_for(self, name: str) -> str:
        return str(Path(self.checkpoint) / name) if self.checkpoint else self.path(f"_checkpoints/{name}")


def read_topic(spark: Any, opts: JobOptions, topics: str, *, streaming: bool, **options: str) -> Any:
    """A batch or streaming DataFrame of `topics` (or of the partitions of an `assign` option) in
    the connector's schema, from the earliest offsets: an analytics job's first run sees every
    record that is still in the log."""
    reader = spark.readStream if streaming else spark.read
    reader = reader.format(opts.connector).option("kafka.bootstrap.servers", opts.bootstrap)
    if "assign" not in options:
        reader = reader.option("subscribe", topics)
    # Committed data only, whichever the connector: a commit or an output of an aborted
    # transaction never happened.
    reader = reader.option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed")
    for key, value in opts.client_config.items():
        reader = reader.option(f"kafka.{key}", value)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def offsets_partitions(opts: JobOptions) -> int:
    """How many partitions `__consumer_offsets` has (fixed for a cluster's life)."""
    from confluent_kafka import Consumer, KafkaException

    c = Consumer({"bootstrap.servers": opts.bootstrap, "group.id": "kaflet-pipeline-metadata", **opts.librdkafka()})
    try:
        topic = c.list_topics(OFFSETS_TOPIC, timeout=30).topics.get(OFFSETS_TOPIC)
    except KafkaException as exc:
        raise AnalyticsError(f"cannot read the metadata of {OFFSETS_TOPIC} from {opts.bootstrap}: {exc.args[0].str()}") from None
    finally:
        c.close()
    if topic is None or topic.error is not None or not topic.partitions:
        raise AnalyticsError(f"{OFFSETS_TOPIC} is not there on {opts.bootstrap} (no group has committed yet?): {topic and topic.error}")
    return len(topic.partitions)


def read_offsets_log(spark: Any, opts: JobOptions, *, streaming: bool) -> Any:
    """`__consumer_offsets`, its partitions assigned by number: an internal topic is not matched
    by subscriptions, and its partition count never changes."""
    assign = json.dumps({OFFSETS_TOPIC: list(range(offsets_partitions(opts)))})
    # A compacted topic has holes in its offsets by design: not data loss.
    return read_topic(spark, opts, OFFSETS_TOPIC, streaming=streaming, assign=assign, failOnDataLoss="false")


def _say_retry(attempt: int, exc: BaseException) -> None:
    print(f"Spark's Python worker did not connect back in time (attempt {attempt}); starting the query again", file=sys.stderr)


def run(writer: Any, opts: JobOptions, name: str) -> None:
    """Start `writer` (a DataStreamWriter) with its checkpoint; with `once`, process what is
    there and return (availableNow), else run every `interval_s` until SIGINT or SIGTERM."""
    writer = writer.option("checkpointLocation", opts.checkpoint_for(name)).queryName(f"kaflet-{name}")
    writer = writer.trigger(availableNow=True) if opts.once else writer.trigger(processingTime=f"{opts.interval_s} seconds")
    if opts.once:
        # Started again from its checkpoint when Spark's Python worker failed to connect back in time.
        retry_worker_start(lambda: writer.start().awaitTermination(), on_retry=_say_retry)
        return
    query = retry_worker_start(writer.start, on_retry=_say_retry)
    stop = opts.stop
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.is_set() and query.isActive:
            stop.wait(0.5)
        if query.exception() is not None:
            raise query.exception()
    finally:
        query.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# Spark's Kafka connector lists partitions through the Admin client and drops internal topics
# (ConsumerStrategy.retrieveAllPartitions filters TopicDescription.isInternal), even under
# `assign`: `__consumer_offsets` would read as no partition at all. Its consumer-based offset
# reader assigns the partitions as given; the analytics switch to it for their own commands.
CONSUMER_OFFSET_READER = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"


@contextlib.contextmanager
def connector_settings(spark: Any, opts: JobOptions) -> Iterator[None]:
    """The session settings a command needs for its connector, restored afterwards."""
    if opts.connector != "kafka":
        yield
        return
    before = spark.conf.get(CONSUMER_OFFSET_READER, None)
    spark.conf.set(CONSUMER_OFFSET_READER, "true")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(CONSUMER_OFFSET_READER)
        else:
            spark.conf.set(CONSUMER_OFFSET_READER, before)
