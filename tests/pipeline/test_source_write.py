"""Writes with `df.write.format("kaflet")` round-trip through a real kaflet; failures fail the job."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline.conftest import create_topic


def _read(spark: Any, bootstrap: str, topic: str, headers: bool = False) -> list[Any]:
    df = spark.read.format("kaflet").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    return df.option("includeHeaders", str(headers).lower()).load().collect()


def test_write_round_trips_key_value_partition_and_headers(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 3)
    rows = [(f"k{i}", f"v{i}".encode(), i % 3, [(f"h{i}", b"x")] if i % 2 else []) for i in range(60)]
    rows.append((None, None, 1, None))  # a tombstone with no key
    df = spark.createDataFrame(rows, "key string, value binary, partition int, headers array<struct<key: string, value: binary>>")
    # One task, so the order of rows is defined (tasks write in parallel).
    df.coalesce(1).write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("topic", topic_name).mode(
        "append"
    ).save()

    got = _read(spark, kaflet.bootstrap, topic_name, headers=True)
    assert len(got) == 61
    assert sorted(
        ((r.key.decode() if r.key else None, r.value, r.partition, [(h.key, h.value) for h in r.headers or []] or None) for r in got),
        key=repr,
    ) == sorted(((k, v, p, h or None) for k, v, p, h in rows), key=repr)
    # Within each partition the task's order is kept (the idempotent producer never reorders).
    for p in range(3):
        offsets = sorted((r.offset, r.value) for r in got if r.partition == p and r.value is not None)
        assert [v for _, v in offsets] == sorted((v for _, v, pp, _ in rows if pp == p and v is not None), key=lambda v: int(v[1:]))


def test_the_topic_column_routes_rows_and_the_topic_option_overrides_it(spark: Any, kaflet: Any, topic_name: str) -> None:
    a, b, c = f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-c"
    for t in (a, b, c):
        create_topic(kaflet.bootstrap, t, 1)
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic string, value string")
    df.write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).mode("append").save()
    assert sorted(r.value for r in _read(spark, kaflet.bootstrap, a)) == [b"1", b"3"]
    assert [r.value for r in _read(spark, kaflet.bootstrap, b)] == [b"2"]
    df.write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("topic", c).mode("append").save()
    assert sorted(r.value for r in _read(spark, kaflet.bootstrap, c)) == [b"1", b"2", b"3"]


def test_bad_write_schemas_name_the_column(spark: Any, kaflet: Any, topic_name: str) -> None:
    def save(df: Any, **options: str) -> None:
        df.write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).options(**options).mode("append").save()

    with pytest.raises(Exception, match=r"required column 'value' not found"):
        save(spark.createDataFrame([("k",)], "key string"), topic=topic_name)
    with pytest.raises(Exception, match=r"column 'value' must be of type binary or string, got int"):
        save(spark.createDataFrame([(1,)], "value int"), topic=topic_name)
    with pytest.raises(Exception, match=r"column 'partition' must be of type int, got string"):
        save(spark.createDataFrame([("v", "0")], "value string, partition string"), topic=topic_name)
    with pytest.raises(Exception, match=r"no column 'topic' and no option 'topic'"):
        save(spark.createDataFrame([("v",)], "value string"))
    with pytest.raises(Exception, match=r"column 'headers' must be array<struct<key: string, value: binary>>"):
        save(spark.createDataFrame([("v", ["h"])], "value string, headers array<string>"), topic=topic_name)
    with pytest.raises(Exception, match=r"save mode Overwrite is not allowed for Kafka topics"):
        spark.createDataFrame([("v",)], "value string").write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option(
            "topic", topic_name
        ).mode("overwrite").save()


def test_a_write_to_a_missing_partition_names_it_and_what_was_written(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    # One task: 1,000 good rows, then a row for partition 7 of a 2-partition topic, then more.
    rows = [("ok", i % 2) for i in range(1000)] + [("nowhere", 7)] + [("late", 0)] * 10
    df = spark.createDataFrame(rows, "value string, partition int").coalesce(1)
    with pytest.raises(
        Exception,
        match=rf"cannot write to partition 7 of topic '{topic_name}': topic '{topic_name}' has 2 partition\(s\), 0 to 1; \d+ record\(s\) of this task were written before it stopped",
    ):
        df.write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("topic", topic_name).mode("append").save()
    # What the message counted is what is in the topic: nothing of the failing batch.
    written = _read(spark, kaflet.bootstrap, topic_name)
    assert {r.value for r in written} <= {b"ok"}
    df = spark.createDataFrame([("ok", None)], "value string, topic string")
    with pytest.raises(Exception, match=r"a row has a null topic"):
        df.write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).mode("append").save()


def test_an_undeliverable_record_names_its_partition_and_what_was_written(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 1)
    big = "x" * 200_000  # over the producer's message.max.bytes set below: refused by the client
    df = spark.createDataFrame([("small",), (big,)], "value string").coalesce(1)
    with pytest.raises(
        Exception,
        match=rf"cannot write a record to a partition of the partitioner's choice of topic '{topic_name}': .*size.*; 1 record\(s\) of this task were written",
    ):
        df.write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("topic", topic_name).option(
            "kafka.max.request.size", "100000"
        ).mode("append").save()
    assert [r.value for r in _read(spark, kaflet.bootstrap, topic_name)] == [b"small"]


def test_write_stream_copies_a_topic(spark: Any, kaflet: Any, topic_name: str, tmp_path: Any) -> None:
    src, dst = f"{topic_name}-src", f"{topic_name}-dst"
    create_topic(kaflet.bootstrap, src, 2)
    create_topic(kaflet.bootstrap, dst, 2)
    spark.createDataFrame([(f"v{i}", i % 2) for i in range(50)], "value string, partition int").write.format("kaflet").option(
        "kafka.bootstrap.servers", kaflet.bootstrap
    ).option("topic", src).mode("append").save()
    stream = (
        spark.readStream.format("kaflet")
        .option("kafka.bootstrap.servers", kaflet.bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value", "partition")
    )
    query = (
        stream.writeStream.format("kaflet")
        .option("kafka.bootstrap.servers", kaflet.bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = _read(spark, kaflet.bootstrap, dst)
    assert sorted((r.partition, r.value) for r in got) == sorted((i % 2, f"v{i}".encode()) for i in range(50))


def test_a_save_without_a_mode_is_refused_naming_append(spark: Any, kaflet: Any, topic_name: str) -> None:
    """Spark itself refuses its default mode, ErrorIfExists, for every Python data source before
    the source is asked (the connector, a JVM source, takes it as Append): the message must lead
    to `.mode("append")`, and Overwrite, which Spark's message also offers, is refused naming it."""
    create_topic(kaflet.bootstrap, topic_name, 1)
    writer = spark.createDataFrame([("v",)], "value string").write.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap)
    writer = writer.option("topic", topic_name)
    with pytest.raises(Exception, match=r'cannot be written in the "ErrorIfExists" mode. Please use either the "Append"'):
        writer.save()
    with pytest.raises(Exception, match=r'save mode Overwrite is not allowed for Kafka topics; use .mode\("append"\)'):
        writer.mode("overwrite").save()
    writer.mode("append").save()
    assert [r.value for r in _read(spark, kaflet.bootstrap, topic_name)] == [b"v"]
