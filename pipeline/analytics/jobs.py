"""What the analytics commands share: reading `__consumer_offsets` through the kaflet source,
and running a streaming query either until stopped or over what is there (`--once`)."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.analytics.offsets_log import OFFSETS_TOPIC

FORMAT = "kaflet"


@dataclass
class JobOptions:
    bootstrap: str
    out: str
    once: bool = False
    interval_s: float = 10.0
    checkpoint: str | None = None
    # Passed to the kaflet source as "kafka.<key>" options and to the lag lookups' client.
    client_config: dict[str, str] = field(default_factory=dict)

    def path(self, name: str) -> str:
        return str(Path(self.out) / name)

    def checkpoint_for(self, name: str) -> str:
        return str(Path(self.checkpoint) / name) if self.checkpoint else self.path(f"_checkpoints/{name}")


def read_topic(spark: Any, opts: JobOptions, topics: str, *, streaming: bool, **options: str) -> Any:
    """A batch or streaming DataFrame of `topics` in the connector's schema, from the earliest
    offsets: an analytics job's first run sees every record that is still in the log."""
    reader = spark.readStream if streaming else spark.read
    reader = reader.format(FORMAT).option("kafka.bootstrap.servers", opts.bootstrap).option("subscribe", topics)
    reader = reader.option("startingOffsets", "earliest")
    for key, value in opts.client_config.items():
        reader = reader.option(f"kafka.{key}", value)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def read_offsets_log(spark: Any, opts: JobOptions, *, streaming: bool) -> Any:
    # A compacted topic has holes in its offsets by design: not data loss.
    return read_topic(spark, opts, OFFSETS_TOPIC, streaming=streaming, failOnDataLoss="false")


def run(writer: Any, opts: JobOptions, name: str, after_batch: Any = None) -> None:
    """Start `writer` (a DataStreamWriter) with its checkpoint; with `once`, process what is
    there and return (availableNow), else run every `interval_s` until SIGINT or SIGTERM."""
    writer = writer.option("checkpointLocation", opts.checkpoint_for(name)).queryName(f"kaflet-{name}")
    writer = writer.trigger(availableNow=True) if opts.once else writer.trigger(processingTime=f"{opts.interval_s} seconds")
    query = writer.start()
    if opts.once:
        query.awaitTermination()
        return
    stop = threading.Event()
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
