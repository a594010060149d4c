"""lag-history: every offset commit of every group, with the group's lag at that moment.

A streaming query over `__consumer_offsets` (through the kaflet source, from the earliest
offset, checkpointed): each commit record becomes one row, appended to Parquet, so the history
keeps every commit even after the log cleaner has compacted the topic down to the last commit
per partition. The file sink and the checkpoint make the appends exactly-once across restarts.

Per (group, topic, partition, commit time T, committed offset C):

- `log_end_offset`: the partition's log end offset at T, from ListOffsets by timestamp: the
  first offset whose record timestamp is later than T (records stamped up to T were in the log
  at T), or the current log end offset when no record is later. This reads history as well as
  the present, so a `--once` run over an old log gives the lag as it was, not as it is now. It
  is exact with LogAppendTime topics and as good as the producers' clocks with CreateTime.
- `lag_records` = max(0, log_end_offset - C); null, like `lag_seconds`, when the partition
  is gone (its topic deleted since the commit).
- `lag_seconds`: the age at T of the oldest unconsumed record, T - timestamp(record at C), 0
  when caught up. kafka-lag-exporter estimates the same quantity by interpolating, in its table
  of (log end offset, time it was sampled), the time at which the log end offset passed C;
  lag-history has the log itself, so it reads the record at C (or the first one after it, if
  C was compacted away) and takes its timestamp.

The lookups run on the executors (`mapInArrow` after partitioning by topic-partition), batched
per task into one request per round (see lookups.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline.analytics import offsets_log
from pipeline.analytics.jobs import JobOptions, read_offsets_log, run
from pipeline.analytics.lookups import Lookups

NAME = "lag_history"


def lag_schema() -> Any:
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType, TimestampType

    base = offsets_log.commit_schema()
    extra = [
        StructField("log_end_offset", LongType(), True),
        StructField("lag_records", LongType(), True),
        StructField("oldest_unconsumed_time", TimestampType(), True),
        StructField("lag_seconds", DoubleType(), True),
    ]
    return StructType(list(base.fields) + extra)


class AddLag:
    """mapInArrow: commit rows -> the same rows with the lag columns (see the module docstring).
    Arrow rather than pandas: timestamps stay instants whatever the session's time zone."""

    def __init__(self, bootstrap: str, client_config: dict[str, str]) -> None:
        self.bootstrap = bootstrap
        self.client_config = client_config

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        schema = offsets_log.arrow_schema(lag_schema())
        client: Lookups | None = None
        try:
            for batch in batches:
                if batch.num_rows:
                    client = client or Lookups(self.bootstrap, self.client_config)
                    yield pa.RecordBatch.from_pydict(self.add_lag(client, batch), schema=schema)
        finally:
            if client is not None:
                client.consumer.close()

    def add_lag(self, client: Lookups, batch: Any) -> dict[str, list[Any]]:
        import pyarrow as pa

        cols = batch.to_pydict()
        commit_ms = [v // 1000 for v in batch.column("commit_time").cast(pa.int64()).to_pylist()]
        tps = list(zip(cols["topic"], cols["partition"], strict=True))
        committed = cols["committed_offset"]
        at = client.offsets_at([(tp, t + 1) for tp, t in zip(tps, commit_ms, strict=True)])
        need_end = {tp for tp, t in zip(tps, commit_ms, strict=True) if at[(tp, t + 1)] < 0}
        ends = client.log_end_offsets(need_end) if need_end else {}
        leo = [at[(tp, t + 1)] if at[(tp, t + 1)] >= 0 else ends[tp] for tp, t in zip(tps, commit_ms, strict=True)]
        lag = [None if e is None else max(0, e - c) for e, c in zip(leo, committed, strict=True)]
        behind = [(tp, c) for tp, c, n in zip(tps, committed, lag, strict=True) if n]
        stamps = client.timestamps_at(behind) if behind else {}
        oldest: list[Any] = []
        seconds: list[float | None] = []
        for tp, c, n, t in zip(tps, committed, lag, commit_ms, strict=True):
            ts = stamps.get((tp, c)) if n else None
            oldest.append(offsets_log.ms_to_datetime(ts) if ts is not None else None)
            # Unknown where the log end is unknown (the partition is gone), 0 when caught up.
            seconds.append(None if n is None else max(0, t - ts) / 1000.0 if ts is not None else 0.0)
        cols.update(log_end_offset=leo, lag_records=lag, oldest_unconsumed_time=oldest, lag_seconds=seconds)
        return cols


def lag_frame(spark: Any, opts: JobOptions, source: Any | None = None) -> Any:
    """The lag-history rows of `source` (the streaming `__consumer_offsets` read by default)."""
    raw = source if source is not None else read_offsets_log(spark, opts, streaming=True)
    commits = raw.select("key", "value", "partition", "offset", "timestamp").mapInArrow(offsets_log.commits_of, offsets_log.commit_schema())
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    return commits.repartition(parallelism, "topic", "partition").mapInArrow(AddLag(opts.bootstrap, opts.librdkafka()), lag_schema())


def run_lag_history(spark: Any, opts: JobOptions) -> None:
    writer = lag_frame(spark, opts).writeStream.format("parquet").option("path", opts.path(NAME)).outputMode("append")
    run(writer, opts, NAME)
