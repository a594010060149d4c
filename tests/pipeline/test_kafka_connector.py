"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10 with the Java client inside)
against a real kaflet process: what a Structured Streaming job's tests do when they point at kaflet.

Every scenario runs on the suite's one SparkSession, which carries the connector's jars (conftest).
Where both connectors can read the same thing, the `kaflet` source must give the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.pipeline.conftest import create_topic, produce
from tests.support.waiting import wait_until


def _read(spark: Any, fmt: str, bootstrap: str, **options: str) -> Any:
    return spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    """Rows as plain tuples (headers as (key, value) pairs), in (topic, partition, offset) order."""
    rows = [tuple([(h.key, h.value) for h in v] if isinstance(v, list) else v for v in r) for r in df.collect()]
    return sorted(rows, key=lambda r: (r[2], r[3], r[4]))


def test_batch_read_equals_what_was_produced_and_the_kaflet_source(spark: Any, kafka_connector: str, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 3)
    base = 1_700_000_000_000
    records = [
        {
            "key": f"k{i}".encode(),
            "value": f"v{i}".encode() * (i % 5),
            "partition": i % 3,
            "timestamp": base + i,
            "headers": [("h", f"{i}".encode()), ("n", None)] if i % 4 == 0 else None,
        }
        for i in range(60)
    ]
    records.append({"key": None, "value": None, "partition": 1})  # a tombstone
    produce(kaflet.bootstrap, topic_name, records)

    official = _read(spark, kafka_connector, kaflet.bootstrap, subscribe=topic_name, includeHeaders="true")
    ours = _read(spark, "kaflet", kaflet.bootstrap, subscribe=topic_name, includeHeaders="true")
    assert official.schema == ours.schema
    got = _rows(official)
    assert got == _rows(ours)
    assert len(got) == 61
    by_key = {r[0]: r for r in got}
    for i in (0, 4, 7):
        r = by_key[f"k{i}".encode()]
        assert r[1] == f"v{i}".encode() * (i % 5) and r[3] == i % 3 and round(r[5].timestamp() * 1000) == base + i and r[6] == 0
        assert r[7] == ([("h", f"{i}".encode()), ("n", None)] if i % 4 == 0 else None)
    # assign, JSON offsets and minPartitions are planned the same way by both.
    opts = {
        "assign": json.dumps({topic_name: [0, 2]}),
        "startingOffsets": json.dumps({topic_name: {"0": 3, "2": -2}}),
        "endingOffsets": json.dumps({topic_name: {"0": 15, "2": -1}}),
        "minPartitions": "5",
    }
    official = _read(spark, kafka_connector, kaflet.bootstrap, **opts)
    ours = _read(spark, "kaflet", kaflet.bootstrap, **opts)
    assert official.rdd.getNumPartitions() == ours.rdd.getNumPartitions()
    assert _rows(official) == _rows(ours) and len(_rows(ours)) == 12 + 20


def _stream(spark: Any, fmt: str, bootstrap: str, topic: str, out: Path, ck: Path, **options: str) -> Any:
    df = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
    )
    return df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))


def test_streaming_read_resumes_from_its_checkpoint_exactly_once(
    spark: Any, kafka_connector: str, kaflet: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    produce(kaflet.bootstrap, topic_name, [{"value": f"a{i}".encode(), "partition": i % 2} for i in range(60)])
    out, ck = tmp_path / "out", tmp_path / "ck"
    # First run: batches of 20 records every 0.2 s, stopped once the first batch is in the sink.
    first = _stream(spark, kafka_connector, kaflet.bootstrap, topic_name, out, ck, maxOffsetsPerTrigger="20")
    query = first.trigger(processingTime="200 milliseconds").start()
    try:
        wait_until(
            lambda: query.exception() is None and query.lastProgress is not None and query.lastProgress["batchId"] >= 0,
            timeout=120,
            message="the first micro-batch",
        )
    finally:
        query.stop()
    assert query.exception() is None
    done_first = spark.read.parquet(str(out)).count()
    assert 20 <= done_first < 60
    # More records while it is stopped; the restart reads on from the checkpoint, up to now.
    produce(kaflet.bootstrap, topic_name, [{"value": f"b{i}".encode(), "partition": i % 2} for i in range(40)])
    again = _stream(spark, kafka_connector, kaflet.bootstrap, topic_name, out, ck).trigger(availableNow=True).start()
    again.awaitTermination(120)
    assert again.exception() is None
    rows = [(r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect()]
    # Exactly once: every record, none twice.
    assert len(rows) == len(set(rows)) == 100
    assert sorted(v for _, _, v in rows) == sorted([f"a{i}" for i in range(60)] + [f"b{i}" for i in range(40)])


def test_read_committed_over_transactions(spark: Any, kafka_connector: str, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    p = Producer({"bootstrap.servers": kaflet.bootstrap, "transactional.id": f"{topic_name}-tx"})
    p.init_transactions(30)
    for prefix, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(6):
            p.produce(topic_name, f"{prefix}-{i}".encode(), partition=i % 2)
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    # A transaction still open: read_committed stops at the last stable offset before it.
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, f"open-{i}".encode(), partition=i % 2)
    p.flush(30)

    def values(fmt: str, isolation: str) -> list[str]:
        df = _read(spark, fmt, kaflet.bootstrap, subscribe=topic_name, **{"kafka.isolation.level": isolation})
        return sorted(r.value.decode() for r in df.collect())

    committed = sorted(f"{c}-{i}" for c in ("c1", "c2") for i in range(6))
    assert values(kafka_connector, "read_committed") == committed
    assert values("kaflet", "read_committed") == committed
    everything = sorted(committed + [f"ab-{i}" for i in range(6)] + [f"open-{i}" for i in range(4)])
    assert values(kafka_connector, "read_uncommitted") == everything
    p.commit_transaction(30)
    assert values(kafka_connector, "read_committed") == sorted(committed + [f"open-{i}" for i in range(4)])


def test_batch_and_streaming_writes(spark: Any, kafka_connector: str, kaflet: Any, topic_name: str, tmp_path: Path) -> None:
    dst, copy = f"{topic_name}-dst", f"{topic_name}-copy"
    create_topic(kaflet.bootstrap, dst, 3)
    create_topic(kaflet.bootstrap, copy, 3)
    rows = [(f"k{i}", f"v{i}", i % 3, [("h", f"{i}".encode())]) for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value string, partition int, headers array<struct<key: string, value: binary>>")
    df.write.format(kafka_connector).option("kafka.bootstrap.servers", kaflet.bootstrap).option("topic", dst).save()
    got = _read(spark, "kaflet", kaflet.bootstrap, subscribe=dst, includeHeaders="true").collect()
    assert sorted((r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers]) for r in got) == sorted(
        (k.encode(), v.encode(), p, h) for k, v, p, h in rows
    )
    # A stream that copies the topic (key, value, partition) with the connector's sink.
    query = (
        spark.readStream.format(kafka_connector)
        .option("kafka.bootstrap.servers", kaflet.bootstrap)
        .option("subscribe", dst)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format(kafka_connector)
        .option("kafka.bootstrap.servers", kaflet.bootstrap)
        .option("topic", copy)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = _read(spark, kafka_connector, kaflet.bootstrap, subscribe=copy).collect()
    assert sorted((r.key, r.value, r.partition) for r in copied) == sorted((k.encode(), v.encode(), p) for k, v, p, _ in rows)


def test_kafka_group_id_names_the_consumers_which_never_join(
    spark: Any, kafka_connector: str, kaflet: Any, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    produce(kaflet.bootstrap, topic_name, [{"value": b"%d" % i, "partition": i % 2} for i in range(20)])
    group = f"{topic_name}-group"
    assert _read(spark, kafka_connector, kaflet.bootstrap, subscribe=topic_name, **{"kafka.group.id": group}).count() == 20
    query = _stream(spark, kafka_connector, kaflet.bootstrap, topic_name, tmp_path / "out", tmp_path / "ck", **{"kafka.group.id": group})
    query = query.trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None and spark.read.parquet(str(tmp_path / "out")).count() == 20
    # Assign mode: the group id is carried, never joined and never committed to.
    admin = AdminClient({"bootstrap.servers": kaflet.bootstrap})
    offsets = admin.list_consumer_group_offsets([__import__("confluent_kafka").ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert all(tp.offset < 0 for tp in offsets.topic_partitions)
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.members == []


def test_starting_offsets_by_timestamp(spark: Any, kafka_connector: str, kaflet: Any, topic_name: str, tmp_path: Path) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    base = 1_700_000_000_000
    produce(kaflet.bootstrap, topic_name, [{"value": b"%d" % i, "partition": i % 2, "timestamp": base + i * 1000} for i in range(10)])
    by_partition = json.dumps({topic_name: {"0": base + 4000, "1": base}})
    for fmt in (kafka_connector, "kaflet"):
        rows = _read(spark, fmt, kaflet.bootstrap, subscribe=topic_name, startingOffsetsByTimestamp=by_partition).collect()
        assert sorted(int(r.value) for r in rows) == [1, 3, 4, 5, 6, 7, 8, 9], fmt
        later = _read(spark, fmt, kaflet.bootstrap, subscribe=topic_name, startingTimestamp=str(base + 6000)).collect()
        assert sorted(int(r.value) for r in later) == [6, 7, 8, 9], fmt
        ending = json.dumps({topic_name: {"0": base + 2000, "1": base + 6000}})
        rows = _read(spark, fmt, kaflet.bootstrap, subscribe=topic_name, endingOffsetsByTimestamp=ending).collect()
        assert sorted(int(r.value) for r in rows) == [0, 1, 3, 5], fmt
    # A stream starts there too.
    query = _stream(
        spark, kafka_connector, kaflet.bootstrap, topic_name, tmp_path / "out", tmp_path / "ck", startingOffsetsByTimestamp=by_partition
    )
    query = query.trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(int(r.value) for r in spark.read.parquet(str(tmp_path / "out")).collect()) == [1, 3, 4, 5, 6, 7, 8, 9]
