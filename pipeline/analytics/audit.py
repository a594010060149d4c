"""audit: which source records a consume-transform-produce pipeline lost or duplicated.

The pipeline under audit stamps every output record with where its input came from, in
record headers (values are UTF-8 text):

| header | value |
|---|---|
| `kaflet.source.topic` | the source record's topic |
| `kaflet.source.partition` | its partition, in decimal |
| `kaflet.source.offset` | its offset, in decimal |
| `kaflet.source.index` | optional: the n-th output of that source record (0, 1, ...) for a transform that emits several; absent means 0 |

An output is a copy of (source topic, partition, offset, index). A source record is
**duplicated** when some (offset, index) of it has more than one copy, and **lost** when it has
no output at all. With `--group` (the pipeline's consumer group), only source records below the
group's committed offset count as lost (the rest are not processed yet), and each extra copy is
attributed to the generation of the group in force when it was written (its timestamp; the
generation whose start is the latest at or before it, from `rebalance_timeline`, derived anew
from `__consumer_offsets` when that table is not in `--out`): the at-least-once cost of each
rebalance. The first copy (earliest timestamp, then output position) is the original; every
later one is an extra copy.

Outputs (Parquet under `--out`): `audit_lost` and `audit_duplicates` (one row per extra copy),
`audit_by_partition` and `audit_by_generation`. Output records without the headers (or with
unparsable ones) are counted in `audit_by_partition` as `unattributed` of no source partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.analytics.jobs import AnalyticsError, JobOptions, read_topic

HEADER_TOPIC = "kaflet.source.topic"
HEADER_PARTITION = "kaflet.source.partition"
HEADER_OFFSET = "kaflet.source.offset"
HEADER_INDEX = "kaflet.source.index"


def source_headers(topic: str, partition: int, offset: int, index: int | None = None) -> list[tuple[str, bytes]]:
    """The headers an output record of the pipeline under audit carries (for producers in Python)."""
    headers = [(HEADER_TOPIC, topic.encode()), (HEADER_PARTITION, str(partition).encode()), (HEADER_OFFSET, str(offset).encode())]
    if index is not None:
        headers.append((HEADER_INDEX, str(index).encode()))
    return headers


def outputs_frame(raw: Any) -> Any:
    """Output records -> (source_topic, source_partition, source_offset, source_index, output coordinates)."""
    from pyspark.sql import functions as F

    return raw.select(
        F.expr(_sql_header(HEADER_TOPIC)).alias("source_topic"),
        F.expr(f"try_cast({_sql_header(HEADER_PARTITION)} AS INT)").alias("source_partition"),
        F.expr(f"try_cast({_sql_header(HEADER_OFFSET)} AS BIGINT)").alias("source_offset"),
        F.coalesce(F.expr(f"try_cast({_sql_header(HEADER_INDEX)} AS INT)"), F.lit(0)).alias("source_index"),
        F.col("topic").alias("output_topic"),
        F.col("partition").alias("output_partition"),
        F.col("offset").alias("output_offset"),
        F.col("timestamp").alias("output_time"),
    )


def _sql_header(name: str) -> str:
    # The last header of that name wins, as with Kafka's Headers.lastHeader().
    return f"cast(try_element_at(filter(headers, h -> h.key = '{name}'), -1).value AS STRING)"


def audit_frames(sources: Any, outputs: Any, committed: Any | None, timeline: Any | None, group: str | None) -> dict[str, Any]:
    """The four audit tables from source records, output records (connector's schema), the
    group's committed offsets (topic, partition, committed_offset) and its timeline."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    src = sources.select(
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.col("timestamp").alias("source_time"),
    )
    if committed is not None:
        bound = committed.select(
            F.col("topic").alias("source_topic"), F.col("partition").alias("source_partition"), F.col("committed_offset")
        )
        src = src.join(bound, ["source_topic", "source_partition"], "left").withColumn(
            "processed", F.col("source_offset") < F.coalesce(F.col("committed_offset"), F.lit(0))
        )
    else:
        src = src.withColumn("processed", F.lit(True))
    # Each source is read once (every table below is computed from these two).
    src = src.cache()
    outs = outputs_frame(outputs).cache()
    attributed = outs.filter(F.col("source_topic").isNotNull() & F.col("source_partition").isNotNull() & F.col("source_offset").isNotNull())
    unattributed = outs.filter(F.col("source_topic").isNull() | F.col("source_partition").isNull() | F.col("source_offset").isNull())
    key = ["source_topic", "source_partition", "source_offset"]
    copy_order = Window.partitionBy(*key, "source_index").orderBy("output_time", "output_topic", "output_partition", "output_offset")
    copies = attributed.withColumn("copy", F.row_number().over(copy_order)).withColumn(
        "copies", F.count(F.lit(1)).over(Window.partitionBy(*key, "source_index"))
    )
    extra = copies.filter("copy > 1")
    if timeline is not None and group is not None:
        gens = timeline.filter(F.col("group") == group).select("incarnation", "generation", F.col("start_time").alias("generation_start"))
        cand = extra.join(gens, extra["output_time"] >= gens["generation_start"], "left")
        best = Window.partitionBy("output_topic", "output_partition", "output_offset").orderBy(F.desc_nulls_last("generation_start"))
        extra = cand.withColumn("_r", F.row_number().over(best)).filter("_r = 1").drop("_r", "incarnation")
    else:
        extra = extra.withColumn("generation", F.lit(None).cast("int")).withColumn("generation_start", F.lit(None).cast("timestamp"))
    first = copies.filter("copy = 1").select(*key, "source_index", F.col("output_time").alias("first_output_time"))
    duplicates = extra.join(first, [*key, "source_index"]).select(
        *key,
        "source_index",
        "copies",
        "copy",
        "first_output_time",
        F.col("output_time").alias("duplicate_output_time"),
        "output_topic",
        "output_partition",
        "output_offset",
        "generation",
        "generation_start",
    )
    produced = attributed.select(*key).distinct()
    lost = src.filter("processed").join(produced, key, "left_anti").select(*key, "source_time")
    # Written, then summed up twice: computed once.
    duplicates, lost = duplicates.cache(), lost.cache()

    per_src = src.groupBy("source_topic", "source_partition").agg(
        F.count(F.lit(1)).alias("source_records"), F.sum(F.col("processed").cast("int")).alias("processed_records")
    )
    per_out = attributed.groupBy("source_topic", "source_partition").agg(F.count(F.lit(1)).alias("output_records"))
    per_lost = lost.groupBy("source_topic", "source_partition").agg(F.count(F.lit(1)).alias("lost"))
    per_dup = duplicates.groupBy("source_topic", "source_partition").agg(
        F.countDistinct(*key).alias("duplicated"), F.count(F.lit(1)).alias("extra_copies")
    )
    unattr = unattributed.agg(F.count(F.lit(1)).alias("unattributed")).select(
        F.lit(None).cast("string").alias("source_topic"), F.lit(None).cast("int").alias("source_partition"), "unattributed"
    )
    by_partition = (
        per_src.join(per_out, ["source_topic", "source_partition"], "full")
        .join(per_lost, ["source_topic", "source_partition"], "left")
        .join(per_dup, ["source_topic", "source_partition"], "left")
        .unionByName(unattr.filter("unattributed > 0"), allowMissingColumns=True)
        .fillna(0, ["source_records", "processed_records", "output_records", "lost", "duplicated", "extra_copies", "unattributed"])
        .orderBy("source_topic", "source_partition")
    )
    by_generation = (
        duplicates.groupBy("generation", "generation_start")
        .agg(F.countDistinct(*key).alias("duplicated"), F.count(F.lit(1)).alias("extra_copies"))
        .withColumn("group", F.lit(group))
        .select("group", "generation", "generation_start", "duplicated", "extra_copies")
        .orderBy("generation")
    )
    return {"audit_lost": lost, "audit_duplicates": duplicates, "audit_by_partition": by_partition, "audit_by_generation": by_generation}


def committed_offsets(spark: Any, opts: JobOptions, group: str, topics: list[str]) -> Any:
    """The group's committed offsets now (OffsetFetch), as (topic, partition, committed_offset)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": opts.bootstrap, **opts.librdkafka()})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    rows = [(tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions if tp.topic in topics and tp.offset >= 0]
    return spark.createDataFrame(rows, "topic string, partition int, committed_offset long")


def check_names(opts: JobOptions, topics: list[str], group: str | None) -> None:
    """A misspelt topic or group would audit nothing and find everything clean: refuse it."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": opts.bootstrap, **opts.librdkafka()})
    try:
        known = admin.list_topics(timeout=30).topics
    except KafkaException as exc:
        raise AnalyticsError(f"cannot list the topics of {opts.bootstrap}: {exc.args[0].str()}") from None
    missing = [t for t in topics if t not in known]
    if missing:
        raise AnalyticsError(f"no topic {', '.join(repr(t) for t in missing)} on {opts.bootstrap}")
    if group is None:
        return
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    if not any(tp.offset >= 0 for tp in offsets.topic_partitions):
        raise AnalyticsError(f"group {group!r} has no committed offsets on {opts.bootstrap} (is the name right?)")


def run_audit(spark: Any, opts: JobOptions, sources: list[str], outputs: list[str], group: str | None) -> dict[str, Any]:
    from pipeline.analytics import timeline as tl

    check_names(opts, [*sources, *outputs], group)

    src = read_topic(spark, opts, ",".join(sources), streaming=False)
    out = read_topic(spark, opts, ",".join(outputs), streaming=False, includeHeaders="true")
    committed = committed_offsets(spark, opts, group, sources) if group else None
    timeline = None
    if group:
        if Path(opts.path(tl.NAME)).exists():
            timeline = spark.read.parquet(opts.path(tl.NAME))
        else:
            from pipeline.analytics.jobs import read_offsets_log

            records = tl.group_records(read_offsets_log(spark, opts, streaming=False)).cache()
            timeline = tl.derive_all(tl.group_events(records), tl.consumer_group_events(records), tl.topic_names(opts))
    frames = audit_frames(src, out, committed, timeline, group)
    for name, df in frames.items():
        df.write.mode("overwrite").parquet(opts.path(name))
    return frames
