"""Batch reads with `spark.read.format("kaflet")` against a real kaflet process."""

from __future__ import annotations

from typing import Any

from tests.pipeline.conftest import create_topic, produce


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    return spark.read.format("kaflet").option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def test_batch_read_of_a_4_partition_topic_equals_what_was_produced(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 4)
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode() * (i % 7), "partition": i % 4} for i in range(400)]
    records.append({"key": None, "value": None, "partition": 2})  # a tombstone: null key and value
    produce(kaflet.bootstrap, topic_name, records)

    df = _read(spark, kaflet.bootstrap, subscribe=topic_name)
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.collect()

    got = sorted((r.partition, r.offset, r.key, r.value, r.topic) for r in rows)
    per_partition: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        per_partition.setdefault(r["partition"], []).append(r)
    want = sorted((p, offset, r["key"], r["value"], topic_name) for p, rs in per_partition.items() for offset, r in enumerate(rs))
    assert got == want
    assert {r.timestampType for r in rows} == {0}  # CreateTime
    assert all(r.timestamp is not None for r in rows)
