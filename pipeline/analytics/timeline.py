"""rebalance-timeline: every generation of every classic group, from its GroupMetadata records.

Kafka's coordinator writes a group's GroupMetadata record (`storage/offsets_records.py`) when
a generation's assignment is stored (the leader's SyncGroup; the group turns Stable once the
write is durable), when a rebalance ends with no members (the group turns Empty, a new
generation with no members), when a static member is replaced, and a tombstone when the group
is deleted or expires. The log cleaner keeps only the last one per group, so the events are
taken by a streaming query over `__consumer_offsets` (checkpointed, like lag-history) and kept
in Parquet (`group_events`, one directory per micro-batch, rewritten whole if a batch is
replayed: exactly-once). After every micro-batch the timeline is derived again from all events
(`rebalance_timeline`, one row per group incarnation and generation):

- `start_time`: the record's currentStateTimestamp, when the coordinator entered the state the
  record was written in: the end of the join phase (CompletingRebalance) for a generation with
  members, the moment the group went Empty for one without;
- `stable_time`: the time of the first record of the generation with members (the stored
  assignment), null for an Empty generation or one whose SyncGroup never completed;
- `sync_ms` = stable_time - start_time: the CompletingRebalance phase, exact;
- `not_stable_ms`: how long the group was not stable before this generation, as far as the log
  shows. Kafka records no time for the start of PreparingRebalance (the join phase), so for a
  generation that follows a stable one this is `sync_ms`, a lower bound; the upper bound is
  `since_previous_stable_ms` (from the previous generation's stable time). A generation that
  follows an Empty one counts from the moment the group went Empty (no member, nothing stable);
- `members`, `protocol`, `leader`, each member's subscription and assignment (decoded for the
  "consumer" protocol type), `joined` and `left` (member ids against the previous generation);
- `incarnation`: how many times the group was deleted before (generations restart then).
"""

from __future__ import annotations

from typing import Any

from pipeline.analytics import offsets_log
from pipeline.analytics.jobs import JobOptions, read_offsets_log, run

EVENTS = "group_events"
NAME = "rebalance_timeline"


def group_events(raw: Any) -> Any:
    """GroupMetadata rows (offsets_log.group_schema()) of a `__consumer_offsets` DataFrame."""
    return raw.select("key", "value", "partition", "offset", "timestamp").mapInArrow(
        offsets_log.group_records_of, offsets_log.group_schema()
    )


def derive_timeline(events: Any) -> Any:
    """The timeline (module docstring) from group events, batch."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    log_order = Window.partitionBy("group").orderBy("offsets_partition", "offsets_offset")
    ev = events.withColumn(
        "incarnation", F.coalesce(F.sum(F.col("deleted").cast("int")).over(log_order.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))
    )
    deletions = ev.filter("deleted").select(
        "group", (F.col("incarnation")).alias("incarnation"), F.col("record_time").alias("deleted_time")
    )
    live = ev.filter(~F.col("deleted"))
    last_of_gen = Window.partitionBy("group", "incarnation", "generation").orderBy(F.desc("offsets_partition"), F.desc("offsets_offset"))
    gens = (
        live.withColumn(
            "_first_time",
            F.min(F.coalesce("current_state_time", "record_time")).over(
                last_of_gen.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
            ),
        )
        .withColumn(
            "_stable",
            F.min(F.when(F.size("members") > 0, F.col("record_time"))).over(
                last_of_gen.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
            ),
        )
        .withColumn("_rank", F.row_number().over(last_of_gen))
        .filter("_rank = 1")
        .select(
            "group",
            "incarnation",
            "generation",
            F.when(F.size("members") > 0, F.lit("Stable")).otherwise(F.lit("Empty")).alias("state"),
            "protocol_type",
            "protocol",
            "leader",
            "members",
            F.size("members").alias("member_count"),
            F.col("_first_time").alias("start_time"),
            F.col("_stable").alias("stable_time"),
        )
    )
    seq = Window.partitionBy("group", "incarnation").orderBy("generation")
    prev_members = F.lag(F.col("members.member_id")).over(seq)
    ms = lambda a, b: (F.unix_micros(a) - F.unix_micros(b)) / F.lit(1000.0)  # noqa: E731
    timeline = (
        gens.withColumn("_prev_state", F.lag("state").over(seq))
        .withColumn("_prev_start", F.lag("start_time").over(seq))
        .withColumn("_prev_stable", F.lag("stable_time").over(seq))
        .withColumn("end_time", F.lead("start_time").over(seq))
        .withColumn("joined", F.array_except(F.col("members.member_id"), F.coalesce(prev_members, F.array().cast("array<string>"))))
        .withColumn("left", F.array_except(F.coalesce(prev_members, F.array().cast("array<string>")), F.col("members.member_id")))
        .withColumn("sync_ms", ms(F.col("stable_time"), F.col("start_time")))
        .withColumn(
            "not_stable_ms",
            F.when(F.col("stable_time").isNull(), F.lit(None))
            .when(F.col("_prev_state") == "Empty", ms(F.col("stable_time"), F.col("_prev_start")))
            .otherwise(F.col("sync_ms")),
        )
        .withColumn("since_previous_stable_ms", ms(F.col("stable_time"), F.col("_prev_stable")))
        .join(deletions, ["group", "incarnation"], "left")
        .withColumn("end_time", F.coalesce("end_time", "deleted_time"))
        .drop("_prev_state", "_prev_start", "_prev_stable")
    )
    return timeline.select(
        "group",
        "incarnation",
        "generation",
        "state",
        "start_time",
        "stable_time",
        "end_time",
        "sync_ms",
        "not_stable_ms",
        "since_previous_stable_ms",
        "protocol_type",
        "protocol",
        "leader",
        "member_count",
        "members",
        "joined",
        "left",
        "deleted_time",
    ).orderBy("group", "incarnation", "generation")


def read_events(spark: Any, opts: JobOptions) -> Any:
    return spark.read.schema(offsets_log.group_schema()).parquet(opts.path(EVENTS))


def write_timeline(spark: Any, opts: JobOptions) -> None:
    derive_timeline(read_events(spark, opts)).write.mode("overwrite").parquet(opts.path(NAME))


def run_rebalance_timeline(spark: Any, opts: JobOptions) -> None:
    from pathlib import Path

    def batch(df: Any, batch_id: int) -> None:
        # A replayed batch (a restart after a failure) overwrites its own directory.
        df.write.mode("overwrite").parquet(f"{opts.path(EVENTS)}/batch={batch_id}")
        write_timeline(df.sparkSession, opts)

    writer = group_events(read_offsets_log(spark, opts, streaming=True)).writeStream.foreachBatch(batch)
    run(writer, opts, NAME)
    if not Path(opts.path(NAME)).exists() and Path(opts.path(EVENTS)).exists():
        write_timeline(spark, opts)
