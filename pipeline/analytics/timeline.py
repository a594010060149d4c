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
        F.lit("classic").alias("group_type"),
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
    )


def group_records(raw: Any) -> Any:
    """The GroupMetadata and consumer-group records (key type 2-8) of a `__consumer_offsets`
    DataFrame, filtered in the JVM so that the commits (most of the log) never reach Python."""
    from pyspark.sql import functions as F

    kind = F.conv(F.hex(F.substring("key", 1, 2)), 16, 10).cast("int")
    return raw.select("key", "value", "partition", "offset", "timestamp").filter(kind.between(2, 8))


def _read(spark: Any, path: str, schema: Any) -> Any:
    from pathlib import Path

    if not Path(path).exists() and "://" not in path:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(path)


def derive_all(classic_events: Any, consumer_events: Any, names: dict[str, str] | None = None) -> Any:
    # Unordered: a reader sorts (the report does); one shuffle less per micro-batch.
    return derive_timeline(classic_events).unionByName(derive_consumer_timeline(consumer_events, names))


def write_timeline(spark: Any, opts: JobOptions) -> None:
    classic = _read(spark, opts.path(EVENTS), offsets_log.group_schema())
    consumer = _read(spark, opts.path(CONSUMER_EVENTS), offsets_log.consumer_group_schema())
    derive_all(classic, consumer, topic_names(opts)).write.mode("overwrite").parquet(opts.path(NAME))


def topic_names(opts: JobOptions) -> dict[str, str]:
    """{topic id: name} of the cluster's topics now. Kafka 4.4 writes no ConsumerGroupPartitionMetadata
    records (a group keeps a hash of its topics' metadata instead), so a KIP-848 group's assignments,
    which name topic ids, are named from the cluster; a deleted topic keeps its id."""
    import uuid

    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": opts.bootstrap, **opts.librdkafka()})
    names = [n for n in admin.list_topics(timeout=30).topics if not n.startswith("__")]
    if not names:
        return {}
    out = {}
    for future in admin.describe_topics(TopicCollection(names)).values():
        d = future.result(30)
        bits = (d.topic_id.get_most_significant_bits() % (1 << 64)) << 64 | d.topic_id.get_least_significant_bits() % (1 << 64)
        out[str(uuid.UUID(int=bits))] = d.name
    return out


def run_rebalance_timeline(spark: Any, opts: JobOptions) -> None:
    def batch(df: Any, batch_id: int) -> None:
        # A replayed batch (a restart after a failure) overwrites its own directories.
        df.persist()
        try:
            group_events(df).write.mode("overwrite").parquet(f"{opts.path(EVENTS)}/batch={batch_id}")
            consumer_group_events(df).write.mode("overwrite").parquet(f"{opts.path(CONSUMER_EVENTS)}/batch={batch_id}")
        finally:
            df.unpersist()
        write_timeline(df.sparkSession, opts)

    writer = group_records(read_offsets_log(spark, opts, streaming=True)).writeStream.foreachBatch(batch)
    run(writer, opts, NAME)


# -- consumer groups (KIP-848): generations are group epochs -----------------------------

CONSUMER_EVENTS = "consumer_group_events"


def timeline_schema() -> Any:
    from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StringType, StructField, StructType, TimestampType

    member = next(f.dataType.elementType for f in offsets_log.group_schema().fields if f.name == "members")

    def f(name: str, kind: Any) -> Any:
        return StructField(name, kind, True)

    return StructType(
        [
            f("group", StringType()),
            f("group_type", StringType()),
            f("incarnation", IntegerType()),
            f("generation", IntegerType()),
            f("state", StringType()),
            f("start_time", TimestampType()),
            f("stable_time", TimestampType()),
            f("end_time", TimestampType()),
            f("sync_ms", DoubleType()),
            f("not_stable_ms", DoubleType()),
            f("since_previous_stable_ms", DoubleType()),
            f("protocol_type", StringType()),
            f("protocol", StringType()),
            f("leader", StringType()),
            f("member_count", IntegerType()),
            f("members", ArrayType(member)),
            f("joined", ArrayType(StringType())),
            f("left", ArrayType(StringType())),
            f("deleted_time", TimestampType()),
        ]
    )


def _ms_between(a: Any, b: Any) -> float | None:
    return None if a is None or b is None else round((a - b).total_seconds() * 1000, 3)


class _ConsumerGroup:
    """One consumer group's state, replayed record by record in log order (as the coordinator
    replays it), emitting a row per group epoch. An epoch's group is stable once every member's
    current assignment (type 8) is at that epoch or later, in state STABLE with nothing pending
    revocation, and equal to its target assignment (type 7)."""

    def __init__(self, group: str, names: dict[str, str] | None = None) -> None:
        self.group = group
        self.known_names = dict(names or {})
        self.incarnation = 0
        self.reset()
        self.out: list[dict[str, Any]] = []

    def reset(self) -> None:
        self.members: dict[str, dict[str, Any]] = {}
        self.target: dict[str, list[dict[str, Any]]] = {}
        self.current: dict[str, dict[str, Any]] = {}
        self.names: dict[str, str] = dict(self.known_names)
        self.gen: dict[str, Any] | None = None
        self.previous_ids: list[str] = []
        self.previous_stable: Any = None

    def member_rows(self) -> list[dict[str, Any]]:
        rows = []
        for mid in sorted(self.members):
            m = self.members[mid]
            parts = [{"topic": self.names.get(p["topic_id"], p["topic_id"]), "partition": p["partition"]} for p in self.target.get(mid, [])]
            rows.append(
                {
                    "member_id": mid,
                    "group_instance_id": m.get("instance_id"),
                    "client_id": m.get("client_id"),
                    "client_host": m.get("client_host"),
                    "rebalance_timeout_ms": m.get("rebalance_timeout_ms"),
                    "session_timeout_ms": None,
                    "subscription": m.get("subscription"),
                    "assignment": sorted(parts, key=lambda tp: (tp["topic"], tp["partition"])),
                }
            )
        return rows

    def close(self, when: Any, deleted: bool = False) -> None:
        g = self.gen
        if g is None:
            return
        ids = [m["member_id"] for m in g["members"]]
        state = "Stable" if g["stable_time"] is not None else ("Empty" if not ids else "Reconciling")
        sync = _ms_between(g["stable_time"], g["start_time"])
        self.out.append(
            {
                "group": self.group,
                "group_type": "consumer",
                "incarnation": self.incarnation,
                "generation": g["epoch"],
                "state": state,
                "start_time": g["start_time"],
                "stable_time": g["stable_time"],
                "end_time": when,
                "sync_ms": sync,
                "not_stable_ms": sync,
                "since_previous_stable_ms": _ms_between(g["stable_time"], self.previous_stable),
                "protocol_type": "consumer",
                "protocol": g["assignor"],
                "leader": None,
                "member_count": len(ids),
                "members": g["members"],
                "joined": [m for m in ids if m not in self.previous_ids],
                "left": [m for m in self.previous_ids if m not in ids],
                "deleted_time": when if deleted else None,
            }
        )
        self.previous_ids = ids
        if g["stable_time"] is not None:
            self.previous_stable = g["stable_time"]
        self.gen = None

    def snapshot(self, g: dict[str, Any]) -> None:
        """The generation's members and assignor as they are now (its stable moment, or its end)."""
        g["members"] = self.member_rows()
        # The assignor most members named (the coordinator's choice, KA-1); None: the broker's default.
        named = [m["server_assignor"] for m in self.members.values() if m.get("server_assignor")]
        g["assignor"] = max(sorted(set(named)), key=named.count) if named else None

    def converged(self) -> bool:
        g = self.gen
        if g is None or not self.members:
            return False
        for mid in self.members:
            cur = self.current.get(mid)
            if cur is None or (cur["epoch"] or 0) < g["epoch"] or cur["member_state"] != 0 or cur["pending_revocation"]:
                return False
            if sorted((p["topic_id"], p["partition"]) for p in cur["assigned"] or []) != sorted(
                (p["topic_id"], p["partition"]) for p in self.target.get(mid, [])
            ):
                return False
        return True

    def apply(self, row: dict[str, Any]) -> None:
        kind, mid, t = row["record_type"], row["member_id"], row["record_time"]
        if kind == 3:
            if row["deleted"]:
                self.close(t, deleted=True)
                self.incarnation += 1
                self.reset()
                return
            self.close(t)
            self.gen = {"epoch": row["epoch"], "start_time": t, "stable_time": None, "members": [], "assignor": None}
        elif kind == 4 and not row["deleted"]:
            self.names.update({x["topic_id"]: x["name"] for x in row["topics"] or []})
        elif kind == 5:
            if row["deleted"]:
                self.members.pop(mid, None)
            else:
                self.members[mid] = row
        elif kind == 7:
            if row["deleted"]:
                self.target.pop(mid, None)
            else:
                self.target[mid] = row["assigned"] or []
        elif kind == 8:
            if row["deleted"]:
                self.current.pop(mid, None)
            else:
                self.current[mid] = row
        g = self.gen
        if g is None or g["stable_time"] is not None:
            return
        # Members and assignments as they stand: at the stable moment, or for a generation that
        # never becomes stable, as they were before the departures that end it.
        if not row["deleted"]:
            self.snapshot(g)
        if self.converged():
            g["stable_time"] = t
            self.snapshot(g)


def consumer_group_generations(batches: Any, names: dict[str, str] | None = None) -> Any:
    """mapInArrow over consumer-group events sorted by (group, log position) within each task;
    `names`: topic ids to names, where the log has no ConsumerGroupPartitionMetadata record."""
    import pyarrow as pa

    schema = offsets_log.arrow_schema(timeline_schema())
    current: _ConsumerGroup | None = None
    for batch in batches:
        for row in batch.to_pylist():
            if current is None or current.group != row["group"]:
                if current is not None:
                    current.close(None)
                    yield pa.RecordBatch.from_pylist(current.out, schema=schema)
                current = _ConsumerGroup(row["group"], names)
            current.apply(row)
    if current is not None:
        current.close(None)
        yield pa.RecordBatch.from_pylist(current.out, schema=schema)


def consumer_group_events(raw: Any) -> Any:
    return raw.select("key", "value", "partition", "offset", "timestamp").mapInArrow(
        offsets_log.consumer_group_records_of, offsets_log.consumer_group_schema()
    )


def derive_consumer_timeline(events: Any, names: dict[str, str] | None = None) -> Any:
    ordered = events.repartition("group").sortWithinPartitions("group", "offsets_partition", "offsets_offset")
    known = dict(names or {})
    return ordered.mapInArrow(lambda batches: consumer_group_generations(batches, known), timeline_schema())
