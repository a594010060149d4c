"""`__consumer_offsets` rows (the connector's schema) decoded with kaflet's record formats.

The formats are Kafka's own (`storage/offsets_records.py`), so the analytics read a Kafka
cluster's `__consumer_offsets` as well as kaflet's. The decoders here are plain functions of
one record; `commits_of` and `group_records_of` apply them to Arrow batches for Spark's
`mapInArrow`, so the decoding runs on the executors and never collects to the driver.

A record that does not decode (a future record version, a corrupt value) is skipped, never
fatal: an analytics job must keep running over a log another broker version wrote.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from storage import offsets_records as orec

OFFSETS_TOPIC = "__consumer_offsets"


def _schemas() -> tuple[Any, Any]:
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    def f(name: str, kind: Any) -> Any:
        return StructField(name, kind, True)

    where = [f("offsets_partition", IntegerType()), f("offsets_offset", LongType()), f("record_time", TimestampType())]
    # One row per OffsetCommitValue: a group's commit of one partition's offset.
    commit = StructType(
        [
            f("group", StringType()),
            f("topic", StringType()),
            f("partition", IntegerType()),
            f("committed_offset", LongType()),
            f("leader_epoch", IntegerType()),
            f("metadata", StringType()),
            f("commit_time", TimestampType()),
            *where,
        ]
    )
    tp = StructType([f("topic", StringType()), f("partition", IntegerType())])
    member = StructType(
        [
            f("member_id", StringType()),
            f("group_instance_id", StringType()),
            f("client_id", StringType()),
            f("client_host", StringType()),
            f("rebalance_timeout_ms", IntegerType()),
            f("session_timeout_ms", IntegerType()),
            f("subscription", ArrayType(StringType())),
            f("assignment", ArrayType(tp)),
        ]
    )
    # One row per GroupMetadataValue (a classic group's generation as the coordinator stored it),
    # tombstones included (`deleted`: the group was deleted or expired).
    group = StructType(
        [
            f("group", StringType()),
            f("deleted", BooleanType()),
            f("protocol_type", StringType()),
            f("generation", IntegerType()),
            f("protocol", StringType()),
            f("leader", StringType()),
            f("current_state_time", TimestampType()),
            f("members", ArrayType(member)),
            *where,
        ]
    )
    return commit, group


def commit_schema() -> Any:
    return _schemas()[0]


def group_schema() -> Any:
    return _schemas()[1]


def arrow_schema(schema: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


_H = struct.Struct(">h")
_I = struct.Struct(">i")


def decode_commit(key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """An offset commit's fields, or None for anything else (other record types, tombstones of
    deleted or expired offsets, records that do not decode)."""
    if key is None or value is None or len(key) < 2:
        return None
    try:
        if orec.key_type(key) not in (orec.OFFSET_COMMIT_KEY_V0, orec.OFFSET_COMMIT_KEY):
            return None
        group, topic, partition = orec.parse_offset_commit_key(key)
        v = orec.parse_offset_commit_value(value)
    except orec.RecordFormatError:
        return None
    return {
        "group": group,
        "topic": topic,
        "partition": partition,
        "committed_offset": v.offset,
        "leader_epoch": v.leader_epoch,
        "metadata": v.metadata,
        "commit_time_ms": v.commit_timestamp,
    }


def decode_group(key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """A GroupMetadata record's fields (members with their subscriptions and assignments decoded
    when the protocol type is "consumer"), or None for other record types and bad records."""
    if key is None or len(key) < 2:
        return None
    try:
        if orec.key_type(key) != orec.GROUP_METADATA_KEY:
            return None
        group = orec.parse_group_metadata_key(key)
        if value is None:
            return {"group": group, "deleted": True, "members": []}
        v = orec.parse_group_metadata_value(value)
    except orec.RecordFormatError:
        return None
    consumer = v.protocol_type == "consumer"
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "rebalance_timeout_ms": m.rebalance_timeout,
            "session_timeout_ms": m.session_timeout,
            "subscription": subscription_topics(m.subscription) if consumer else None,
            "assignment": assignment_partitions(m.assignment) if consumer else None,
        }
        for m in v.members
    ]
    return {
        "group": group,
        "deleted": False,
        "protocol_type": v.protocol_type,
        "generation": v.generation,
        "protocol": v.protocol,
        "leader": v.leader,
        "current_state_time_ms": v.current_state_timestamp,
        "members": members,
    }


def subscription_topics(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (every version starts with v0's layout)."""
    try:
        pos = 2
        (count,) = _I.unpack_from(data, pos)
        pos += 4
        topics = []
        for _ in range(max(count, 0)):
            (n,) = _H.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topics.append(data[pos : pos + n].decode("utf-8"))
            pos += n
        return sorted(topics)
    except (struct.error, UnicodeDecodeError):
        return None


def assignment_partitions(data: bytes) -> list[dict[str, Any]] | None:
    """(topic, partition) pairs of a ConsumerProtocolAssignment (v0's layout leads every version);
    empty bytes (a member whose assignment was not stored) give an empty list."""
    if not data:
        return []
    try:
        pos = 2
        (count,) = _I.unpack_from(data, pos)
        pos += 4
        out = []
        for _ in range(max(count, 0)):
            (n,) = _H.unpack_from(data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topic = data[pos : pos + n].decode("utf-8")
            pos += n
            (parts,) = _I.unpack_from(data, pos)
            pos += 4
            for _ in range(max(parts, 0)):
                out.append({"topic": topic, "partition": _I.unpack_from(data, pos)[0]})
                pos += 4
        return sorted(out, key=lambda tp: (tp["topic"], tp["partition"]))
    except (struct.error, UnicodeDecodeError):
        return None


def ms_to_datetime(ms: int) -> datetime | None:
    return None if ms < 0 else datetime.fromtimestamp(ms / 1000, tz=UTC)


def _rows(batches: Iterator[Any], decode: Any, finish: Any, schema: Any) -> Iterator[Any]:
    """Apply `decode` to (key, value) of each row of Arrow batches of the connector's schema."""
    import pyarrow as pa

    arrow = arrow_schema(schema)
    for batch in batches:
        cols = batch.to_pydict()
        out = []
        for key, value, partition, offset, ts in zip(
            cols["key"], cols["value"], cols["partition"], cols["offset"], cols["timestamp"], strict=True
        ):
            row = decode(key, value)
            if row is not None:
                row["offsets_partition"] = partition
                row["offsets_offset"] = offset
                row["record_time"] = ts
                out.append(finish(row))
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=arrow)


def _finish_commit(row: dict[str, Any]) -> dict[str, Any]:
    ms = row.pop("commit_time_ms")
    # A v1 value may carry -1 where the client left the time to the broker: the record's time is the commit's.
    row["commit_time"] = ms_to_datetime(ms) if ms >= 0 else row["record_time"]
    return row


def _finish_group(row: dict[str, Any]) -> dict[str, Any]:
    row["current_state_time"] = ms_to_datetime(row.pop("current_state_time_ms", -1))
    return row


def commits_of(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow: `__consumer_offsets` rows -> commit_schema() rows."""
    return _rows(batches, decode_commit, _finish_commit, commit_schema())


def group_records_of(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow: `__consumer_offsets` rows -> group_schema() rows."""
    return _rows(batches, decode_group, _finish_group, group_schema())


# -- consumer-group (KIP-848) records, types 3-8 ------------------------------------------


def consumer_group_schema() -> Any:
    """One row per consumer-group record (types 3-8), tombstones included (`deleted`)."""
    from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

    def f(name: str, kind: Any) -> Any:
        return StructField(name, kind, True)

    parts = ArrayType(StructType([f("topic_id", StringType()), f("partition", IntegerType())]))
    return StructType(
        [
            f("group", StringType()),
            f("record_type", IntegerType()),
            f("member_id", StringType()),
            f("deleted", BooleanType()),
            f("epoch", IntegerType()),  # types 3 and 6: the group's / the assignment's; type 8: the member's
            f("instance_id", StringType()),
            f("client_id", StringType()),
            f("client_host", StringType()),
            f("subscription", ArrayType(StringType())),
            f("subscription_regex", StringType()),
            f("rebalance_timeout_ms", IntegerType()),
            f("server_assignor", StringType()),
            f("member_state", IntegerType()),
            f("assigned", parts),
            f("pending_revocation", parts),
            f("topics", ArrayType(StructType([f("topic_id", StringType()), f("name", StringType())]))),
            f("offsets_partition", IntegerType()),
            f("offsets_offset", LongType()),
            f("record_time", TimestampType()),
        ]
    )


def _parts(items: Any) -> list[dict[str, Any]]:
    return [{"topic_id": str(topic_id), "partition": p} for topic_id, partitions in items for p in sorted(partitions)]


def decode_consumer_group(key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """A consumer-group record's fields (module docstring), or None for other types and bad records."""
    if key is None or len(key) < 2:
        return None
    try:
        kind = orec.key_type(key)
        if kind not in orec.CONSUMER_GROUP_RECORD_TYPES:
            return None
        _, group, member = orec.parse_consumer_group_key(key)
        row: dict[str, Any] = {"group": group, "record_type": kind, "member_id": member, "deleted": value is None}
        if value is None:
            return row
        if kind in (orec.CONSUMER_GROUP_METADATA_KEY, orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY):
            row["epoch"] = orec.parse_consumer_group_epoch_value(value)
        elif kind == orec.CONSUMER_GROUP_PARTITION_METADATA_KEY:
            row["topics"] = [
                {"topic_id": str(t.topic_id), "name": t.name} for t in orec.parse_consumer_group_partition_metadata_value(value)
            ]
        elif kind == orec.CONSUMER_GROUP_MEMBER_METADATA_KEY:
            m = orec.parse_consumer_member_metadata_value(value)
            row.update(
                instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscription=sorted(m.subscribed_topic_names),
                subscription_regex=m.subscribed_topic_regex,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                server_assignor=m.server_assignor,
            )
        elif kind == orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            row["assigned"] = _parts(orec.parse_consumer_target_assignment_value(value))
        else:
            v = orec.parse_consumer_current_assignment_value(value)
            row.update(
                epoch=v.member_epoch, member_state=v.state, assigned=_parts(v.assigned), pending_revocation=_parts(v.pending_revocation)
            )
        return row
    except orec.RecordFormatError:
        return None


def consumer_group_records_of(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow: `__consumer_offsets` rows -> consumer_group_schema() rows."""
    return _rows(batches, decode_consumer_group, lambda row: row, consumer_group_schema())
