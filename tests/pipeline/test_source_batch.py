"""Batch reads with `spark.read.format("kaflet")` against a real kaflet process: every read option."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.pipeline.conftest import create_topic, produce


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    return spark.read.format("kaflet").option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int, **extra: Any) -> None:
    create_topic(bootstrap, topic, partitions)
    produce(
        bootstrap, topic, [{"value": f"{p}:{i}".encode(), "partition": p, **extra} for p in range(partitions) for i in range(per_partition)]
    )


def _po(rows: list[Any]) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in rows)


def test_batch_read_of_a_4_partition_topic_equals_what_was_produced(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 4)
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode() * (i % 7), "partition": i % 4} for i in range(400)]
    records.append({"key": None, "value": None, "partition": 2})  # a tombstone: null key and value
    produce(kaflet.bootstrap, topic_name, records)

    df = _read(spark, kaflet.bootstrap, subscribe=topic_name)
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert [f.dataType.simpleString() for f in df.schema.fields] == ["binary", "binary", "string", "int", "bigint", "timestamp", "int"]
    rows = df.collect()

    got = sorted((r.partition, r.offset, r.key, r.value, r.topic) for r in rows)
    per_partition: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        per_partition.setdefault(r["partition"], []).append(r)
    want = sorted((p, offset, r["key"], r["value"], topic_name) for p, rs in per_partition.items() for offset, r in enumerate(rs))
    assert got == want
    assert {r.timestampType for r in rows} == {0}  # CreateTime
    assert df.rdd.getNumPartitions() == 4  # one task per Kafka partition


def test_subscribe_several_topics_and_subscribe_pattern(spark: Any, kaflet: Any, topic_name: str) -> None:
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}-c"
    for t, n in ((a, 2), (b, 1), (other, 1)):
        _fill(kaflet.bootstrap, t, n, 3)
    both = _read(spark, kaflet.bootstrap, subscribe=f"{a},{b}").collect()
    assert sorted({(r.topic, r.partition) for r in both}) == [(a, 0), (a, 1), (b, 0)]
    assert len(both) == 9
    pattern = _read(spark, kaflet.bootstrap, subscribePattern=f"{topic_name}-.*").collect()
    assert sorted({r.topic for r in pattern}) == [a, b]  # the pattern matches whole names: x...-c is not in


def test_assign_reads_only_the_named_partitions(spark: Any, kaflet: Any, topic_name: str) -> None:
    _fill(kaflet.bootstrap, topic_name, 4, 5)
    rows = _read(spark, kaflet.bootstrap, assign=json.dumps({topic_name: [1, 3]})).collect()
    assert _po(rows) == [(p, o) for p in (1, 3) for o in range(5)]


def test_starting_and_ending_offsets_json_with_earliest_and_latest_sentinels(spark: Any, kaflet: Any, topic_name: str) -> None:
    _fill(kaflet.bootstrap, topic_name, 3, 10)
    starting = {topic_name: {"0": 3, "1": -2, "2": 9}}
    ending = {topic_name: {"0": 5, "1": 2, "2": -1}}
    rows = _read(
        spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending)
    ).collect()
    assert _po(rows) == [(0, 3), (0, 4), (1, 0), (1, 1), (2, 9)]
    assert [r.value for r in sorted(rows, key=lambda r: (r.partition, r.offset))][:2] == [b"0:3", b"0:4"]

    # The strings: earliest .. latest is everything.
    assert len(_read(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets="earliest", endingOffsets="latest").collect()) == 30


def test_json_offsets_must_name_every_subscribed_partition(spark: Any, kaflet: Any, topic_name: str) -> None:
    _fill(kaflet.bootstrap, topic_name, 2, 1)
    with pytest.raises(Exception, match=rf"startingOffsets.*every subscribed partition.*missing {topic_name}-1"):
        _read(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets=json.dumps({topic_name: {"0": 0}})).collect()


def test_starting_after_ending_is_an_error_naming_both_options(spark: Any, kaflet: Any, topic_name: str) -> None:
    _fill(kaflet.bootstrap, topic_name, 1, 5)
    with pytest.raises(Exception, match=r"starting offset 4 .* after its ending offset 2 .*startingOffsets.*endingOffsets"):
        _read(
            spark,
            kaflet.bootstrap,
            subscribe=topic_name,
            startingOffsets=json.dumps({topic_name: {"0": 4}}),
            endingOffsets=json.dumps({topic_name: {"0": 2}}),
        ).collect()


def test_timestamps_create_time_from_the_producer_and_starting_timestamp(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    base = 1_700_000_000_000
    produce(kaflet.bootstrap, topic_name, [{"value": b"%d" % i, "partition": i % 2, "timestamp": base + i * 1000} for i in range(10)])
    rows = _read(spark, kaflet.bootstrap, subscribe=topic_name).collect()
    stamps = sorted((int(r.timestamp.timestamp() * 1000), r.timestampType) for r in rows)
    assert stamps == [(base + i * 1000, 0) for i in range(10)]

    # startingTimestamp: every partition from its first record at or after the time.
    later = _read(spark, kaflet.bootstrap, subscribe=topic_name, startingTimestamp=str(base + 6000)).collect()
    assert sorted(r.value for r in later) == [b"6", b"7", b"8", b"9"]
    # startingOffsetsByTimestamp per partition, and endingTimestamp.
    by_partition = json.dumps({topic_name: {"0": base + 4000, "1": base}})
    rows = _read(
        spark, kaflet.bootstrap, subscribe=topic_name, startingOffsetsByTimestamp=by_partition, endingTimestamp=str(base + 8000)
    ).collect()
    assert sorted(int(r.value) for r in rows) == [1, 3, 4, 5, 6, 7]
    # endingOffsetsByTimestamp per partition (ends before the first record at or after the time).
    ending = json.dumps({topic_name: {"0": base + 2000, "1": base + 6000}})
    rows = _read(spark, kaflet.bootstrap, subscribe=topic_name, endingOffsetsByTimestamp=ending).collect()
    assert sorted(int(r.value) for r in rows) == [0, 1, 3, 5]


def test_starting_timestamp_past_every_record_fails_or_starts_at_latest(spark: Any, kaflet: Any, topic_name: str) -> None:
    _fill(kaflet.bootstrap, topic_name, 1, 3)
    future = str(int(time.time() * 1000) + 3_600_000)
    with pytest.raises(Exception, match=r"startingTimestamp.*no offset matched.*startingOffsetsByTimestampStrategy"):
        _read(spark, kaflet.bootstrap, subscribe=topic_name, startingTimestamp=future).collect()
    rows = _read(spark, kaflet.bootstrap, subscribe=topic_name, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest")
    assert rows.collect() == []


def test_log_append_time_topic_reports_timestamp_type_1(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    before = time.time()
    produce(kaflet.bootstrap, topic_name, [{"value": b"x", "timestamp": 1000}])
    [row] = _read(spark, kaflet.bootstrap, subscribe=topic_name).collect()
    assert row.timestampType == 1
    assert row.timestamp.timestamp() >= before - 1  # the broker's clock, not the producer's 1000 ms


def test_min_partitions_splits_a_partition_over_several_tasks(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    produce(kaflet.bootstrap, topic_name, [{"value": b"%d" % i, "partition": 0 if i < 90 else 1} for i in range(100)])
    df = _read(spark, kaflet.bootstrap, subscribe=topic_name, minPartitions="10")
    # The connector's proration: 90/100*10 = 9 pieces of partition 0, 1 of partition 1.
    assert df.rdd.getNumPartitions() == 10
    assert _po(df.collect()) == [(0, o) for o in range(90)] + [(1, o) for o in range(10)]
    # maxRecordsPerPartition caps each task.
    capped = _read(spark, kaflet.bootstrap, subscribe=topic_name, maxRecordsPerPartition="25")
    assert capped.rdd.getNumPartitions() == 4 + 1
    assert capped.count() == 100


def test_include_headers(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 1)
    produce(kaflet.bootstrap, topic_name, [{"value": b"a", "headers": [("h1", b"x"), ("h2", None), ("h1", b"y")]}, {"value": b"b"}])
    df = _read(spark, kaflet.bootstrap, subscribe=topic_name, includeHeaders="true")
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [(h.key, h.value) for h in rows[0].headers] == [("h1", b"x"), ("h2", None), ("h1", b"y")]
    assert rows[1].headers is None  # none: null, as the connector gives
    assert "headers" not in _read(spark, kaflet.bootstrap, subscribe=topic_name).columns


def test_fail_on_data_loss_when_the_log_start_moved_past_the_range(spark: Any, kaflet: Any, topic_name: str) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    _fill(kaflet.bootstrap, topic_name, 1, 10)
    admin = AdminClient({"bootstrap.servers": kaflet.bootstrap})
    admin.delete_records([TopicPartition(topic_name, 0, 6)])[TopicPartition(topic_name, 0, 6)].result(timeout=10)
    from_zero = json.dumps({topic_name: {"0": 0}})
    with pytest.raises(Exception, match=r"cannot fetch offsets \[0, 6\) of .*-0.*failOnDataLoss"):
        _read(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets=from_zero).collect()
    rows = _read(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets=from_zero, failOnDataLoss="false").collect()
    assert _po(rows) == [(0, o) for o in range(6, 10)]


def test_an_empty_or_missing_topic_reads_nothing(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    assert _read(spark, kaflet.bootstrap, subscribe=topic_name).collect() == []
    assert _read(spark, kaflet.bootstrap, subscribe=f"{topic_name}-never-created").collect() == []


def test_a_named_internal_topic_is_read_and_a_pattern_skips_internal_topics(spark: Any, kaflet: Any, topic_name: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    _fill(kaflet.bootstrap, topic_name, 1, 2)
    group = f"{topic_name}-g"
    consumer = Consumer({"bootstrap.servers": kaflet.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    # As the Java consumer does: a named internal topic is subscribed to (the analytics read
    # __consumer_offsets this way), while a pattern leaves internal topics out.
    rows = _read(spark, kaflet.bootstrap, subscribe="__consumer_offsets").collect()
    assert any(r.key is not None and group.encode() in r.key for r in rows)
    assert _read(spark, kaflet.bootstrap, subscribePattern="__consumer.*").collect() == []
