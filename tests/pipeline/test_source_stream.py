"""Streaming reads: checkpointed offsets, exactly once into a file sink across a restart, read limits, group commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.pipeline.conftest import create_topic, produce
from tests.support.waiting import wait_until


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    return spark.readStream.format("kaflet").option("kafka.bootstrap.servers", bootstrap).options(**options).load()


def _fill(bootstrap: str, topic: str, partitions: int, first: int, count: int) -> None:
    produce(bootstrap, topic, [{"value": b"%d" % i, "partition": i % partitions} for i in range(first, first + count)])


def _sink(spark: Any, path: Path) -> list[tuple[int, int, bytes]]:
    if not path.exists():
        return []
    return sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(path)).collect())


def test_a_stopped_and_restarted_query_delivers_each_record_exactly_once(spark: Any, kaflet: Any, topic_name: str, tmp_path: Path) -> None:
    create_topic(kaflet.bootstrap, topic_name, 2)
    _fill(kaflet.bootstrap, topic_name, 2, 0, 200)
    out, ck = tmp_path / "out", tmp_path / "ck"

    def start(trigger: dict[str, Any]) -> Any:
        df = _stream(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="60")
        writer = df.select("partition", "offset", "value").writeStream.format("parquet").option("path", str(out))
        return writer.option("checkpointLocation", str(ck)).trigger(**trigger).start()

    # Run, and stop in the middle of the backlog (60 records a batch, 200 waiting).
    query = start({"processingTime": "200 milliseconds"})
    wait_until(lambda: query.lastProgress is not None and query.lastProgress["batchId"] >= 1, timeout=120, message="two batches")
    query.stop()
    first_run = _sink(spark, out)
    assert 0 < len(first_run) < 200
    _fill(kaflet.bootstrap, topic_name, 2, 200, 100)

    # Restart on the checkpoint: it resumes where the last committed batch ended.
    query = start({"availableNow": True})
    query.awaitTermination(120)
    assert query.exception() is None
    rows = _sink(spark, out)
    assert len(rows) == 300 and len(set(rows)) == 300  # every record once, none twice
    assert sorted(int(v) for _, _, v in rows) == list(range(300))
    assert {(p, o) for p, o, _ in rows} == {(p, o) for p in range(2) for o in range(150)}
    assert set(first_run) <= set(rows)
    # maxOffsetsPerTrigger held in every batch of the second run, shared by the two partitions.
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes and max(sizes) <= 60 and sum(sizes) == 300 - len(first_run)


def test_commit_offsets_to_group_shows_progress_as_group_offsets(spark: Any, kaflet: Any, topic_name: str, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(kaflet.bootstrap, topic_name, 3)
    _fill(kaflet.bootstrap, topic_name, 3, 0, 31)
    group = f"{topic_name}-etl"
    df = _stream(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets="earliest", commitOffsetsToGroup=group)
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None
    probe = Consumer({"bootstrap.servers": kaflet.bootstrap, "group.id": group})
    try:
        committed = probe.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=10)
    finally:
        probe.close()
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 11), (1, 10), (2, 10)]


def test_latest_start_and_a_pattern_that_picks_up_a_new_topic_from_its_beginning(spark: Any, kaflet: Any, topic_name: str) -> None:
    first, later = f"{topic_name}-1", f"{topic_name}-2"
    create_topic(kaflet.bootstrap, first, 1)
    _fill(kaflet.bootstrap, first, 1, 0, 2)  # before the start: not read (startingOffsets defaults to latest)
    df = _stream(spark, kaflet.bootstrap, subscribePattern=f"{topic_name}-[0-9]")
    query = df.writeStream.format("memory").queryName("pattern_new_topic").start()
    try:
        wait_until(lambda: query.lastProgress is not None, timeout=60, message="the first (empty) batch")
        _fill(kaflet.bootstrap, first, 1, 2, 1)
        create_topic(kaflet.bootstrap, later, 1)
        _fill(kaflet.bootstrap, later, 1, 3, 3)  # a topic new since the start: read from offset 0
        wait_until(lambda: spark.sql("select count(*) c from pattern_new_topic").first().c >= 4, timeout=60, message="the new records")
        rows = spark.sql("select topic, offset, value from pattern_new_topic").collect()
        assert sorted((r.topic, r.offset, int(r.value)) for r in rows) == [(first, 2, 2), (later, 0, 3), (later, 1, 4), (later, 2, 5)]
    finally:
        query.stop()


def test_fail_on_data_loss_when_a_restarted_stream_finds_its_offsets_deleted(
    spark: Any, kaflet: Any, topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(kaflet.bootstrap, topic_name, 1)
    _fill(kaflet.bootstrap, topic_name, 1, 0, 3)
    out, ck = tmp_path / "out", tmp_path / "ck"

    def run(**options: str) -> Any:
        df = _stream(spark, kaflet.bootstrap, subscribe=topic_name, startingOffsets="earliest", **options)
        writer = df.select("partition", "offset", "value").writeStream.format("parquet").option("path", str(out))
        query = writer.option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
        try:
            query.awaitTermination(120)
        except Exception as e:
            return e
        return query.exception()

    assert run() is None
    assert [o for _, o, _ in _sink(spark, out)] == [0, 1, 2]
    _fill(kaflet.bootstrap, topic_name, 1, 3, 5)  # offsets 3..7; then 3..5 are deleted before the stream reads them
    admin = AdminClient({"bootstrap.servers": kaflet.bootstrap})
    admin.delete_records([TopicPartition(topic_name, 0, 6)])[TopicPartition(topic_name, 0, 6)].result(timeout=10)

    error = run()
    assert error is not None and "cannot fetch offsets [3, 6)" in str(error) and "failOnDataLoss" in str(error)
    assert run(failOnDataLoss="false") is None  # the same checkpoint, going on from what is there
    assert [o for _, o, _ in _sink(spark, out)] == [0, 1, 2, 6, 7]


def test_a_broker_that_goes_away_fails_the_running_stream_naming_its_address(spark: Any, broker_proc: Any, topic_name: str) -> None:
    broker = broker_proc()
    create_topic(broker.bootstrap, topic_name, 1)
    _fill(broker.bootstrap, topic_name, 1, 0, 3)
    df = _stream(spark, broker.bootstrap, subscribe=topic_name, startingOffsets="earliest", **{"kafka.default.api.timeout.ms": "1000"})
    query = df.writeStream.format("noop").trigger(processingTime="100 milliseconds").start()
    try:
        wait_until(lambda: sum(p["numInputRows"] for p in query.recentProgress) == 3, timeout=60, message="the records")
        broker.kill()
        wait_until(lambda: not query.isActive, timeout=60, message="the query to fail")
        assert f"cannot reach Kafka at kafka.bootstrap.servers={broker.bootstrap}" in str(query.exception())
    finally:
        query.stop()
