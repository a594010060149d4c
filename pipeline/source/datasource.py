"""`spark.read.format("kaflet")`: Spark's Kafka connector's interface on Spark 4's Python data source API.

Register it with `pipeline.register(spark)`. Batch and streaming reads and writes; options and
schema are the connector's, so switching between `format("kafka")` (the JVM connector, a jar a pip
PySpark lacks) and `format("kaflet")` is a change of the format name. See options.py for the options
and where kaflet decides, read.py for data loss, stream.py for streaming offsets, write.py for writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import StructType

from pipeline.source.kafka import SourceError, admin_for
from pipeline.source.options import ReadOptions, parse_read, spelt
from pipeline.source.ranges import OffsetRange, plan
from pipeline.source.read import read_range, spark_schema


class KafletDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kaflet"

    def schema(self) -> str:
        # includeHeaders decides the schema; anything else wrong is reported by reader()/streamReader().
        raw = str(self.options.get("includeHeaders", "false")).strip().lower()
        return spark_schema(raw == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_read(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from pipeline.source.stream import StreamReader

        return StreamReader(parse_read(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pipeline.source.write import BatchWriter

        return BatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pipeline.source.write import StreamWriter

        return StreamWriter(self.options, schema, overwrite)


def executor_group(opts: ReadOptions) -> str:
    """The group.id executors' consumers carry (they never join it: assign mode, no commits)."""
    return opts.group_id or f"{opts.group_id_prefix}-{uuid.uuid4()}-executor"


class BatchReader(DataSourceReader):
    """A batch read: offsets resolved once, on the driver, when Spark plans the partitions."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.group = executor_group(opts)

    def partitions(self) -> list[OffsetRange]:
        opts = self.opts
        admin = admin_for(opts, "driver")
        try:
            tps = admin.partitions(opts.subscription)
            start = admin.resolve(opts.starting, tps, "startingoffsets", opts.by_timestamp_strategy)
            end = admin.resolve(opts.ending, tps, "endingoffsets")
            ranges = []
            for tp in tps:
                if start[tp] > end[tp]:
                    raise SourceError(
                        f"kaflet source: the starting offset {start[tp]} of {tp[0]}-{tp[1]} is after its ending offset {end[tp]} "
                        f"(options '{spelt('startingoffsets')}' / '{spelt('endingoffsets')}')"
                    )
                ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        finally:
            admin.close()
        return plan(ranges, opts.min_partitions, opts.max_records_per_partition)

    def read(self, partition: Any) -> Iterator[Any]:
        o = self.opts
        yield from read_range(partition, o.bootstrap, o.kafka, self.group, o.include_headers, o.fail_on_data_loss, o.poll_timeout_ms)
