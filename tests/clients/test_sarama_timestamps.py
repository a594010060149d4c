"""Sarama 1.22 writes maxTimestamp -1 in its record batches: kaflet takes the
batch's largest timestamp from its records, as Kafka's log validation does, so that ListOffsets by
timestamp (here through confluent-kafka's offsets_for_times) and the pipeline's lag history,
which asks it, answer as they would for any other producer. The Go program is tests/go/sarama_produce
(Sarama v1.22.1 from the Go module proxy, built by tests/support/go.py).
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import go

STEP = 1000  # ms between the records' timestamps


def sarama_produce(bootstrap: str, topic: str, stamps: list[int], compression: str = "none") -> list[int]:
    program = go.binary("sarama_produce")  # GoUnavailable (a failure, with why) when it cannot be built
    done = subprocess.run(
        [str(program), "-brokers", bootstrap, "-topic", topic, "-timestamps", ",".join(map(str, stamps)), "-compression", compression],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [int(line.split()[1]) for line in done.stdout.splitlines()]


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def offsets_for_times(bootstrap: str, topic: str, times: list[int]) -> list[int]:
    """One ListOffsets per time (a request names each partition once)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sarama-lookups"})
    try:
        found = [consumer.offsets_for_times([TopicPartition(topic, 0, t)], timeout=15)[0] for t in times]
    finally:
        consumer.close()
    assert all(tp.error is None for tp in found), found
    return [tp.offset for tp in found]


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_list_offsets_by_timestamp_finds_sarama_records(broker_thread: Any, compression: str) -> None:
    bt = broker_thread()
    topic = f"sarama-{compression}"
    create(bt.bootstrap, topic)
    t0 = int(time.time() * 1000) - 600_000
    stamps = [t0 + i * STEP for i in range(4)]
    assert sarama_produce(bt.bootstrap, topic, stamps, compression) == [0, 1, 2, 3]
    # The stored batch carries the records' largest timestamp (Sarama sent -1).
    log = bt.broker.logs.get(topic, 0)
    assert log is not None and log.active.max_timestamp == stamps[-1]
    # The first record at or after each time; -1 (latest) where none is that late.
    asked = [t0 - 1, t0 + 500, t0 + 2 * STEP, t0 + 2500, t0 + 3 * STEP, t0 + 3 * STEP + 1]
    assert offsets_for_times(bt.bootstrap, topic, asked) == [0, 1, 2, 3, 3, -1]


def test_lag_history_of_a_topic_sarama_writes(broker_thread: Any) -> None:
    """lag-history's per-commit columns (pipeline/analytics/lag.py, the function its executors run)
    for commits made while Sarama's records arrived: the log end at each commit time comes from
    ListOffsets by timestamp, so it reads max timestamps."""
    pa = pytest.importorskip("pyarrow", reason="the pipeline extra is not installed")
    from pipeline.analytics import offsets_log
    from pipeline.analytics.lag import AddLag
    from pipeline.analytics.lookups import Lookups

    bt = broker_thread()
    topic = "sarama-lag"
    create(bt.bootstrap, topic)
    t0 = int(time.time() * 1000) - 600_000
    stamps = [t0 + i * STEP for i in range(4)]
    assert sarama_produce(bt.bootstrap, topic, stamps) == [0, 1, 2, 3]
    # Commits at t0 + 1.5 s: offset 1 (one record behind: the log then ended at 2), and offset 2 (caught up).
    commit_ms = t0 + 1500
    rows: dict[str, list[Any]] = {field.name: [] for field in offsets_log.commit_schema().fields}
    for committed in (1, 2):
        for name in rows:
            rows[name].append(None)
        rows["group"][-1], rows["topic"][-1], rows["partition"][-1] = "readers", topic, 0
        rows["committed_offset"][-1] = committed
        rows["commit_time"][-1] = dt.datetime.fromtimestamp(commit_ms / 1000, tz=dt.UTC)
    batch = pa.RecordBatch.from_pydict(rows, schema=offsets_log.arrow_schema(offsets_log.commit_schema()))
    with Lookups(bt.bootstrap) as client:
        out = AddLag(bt.bootstrap, {}).add_lag(client, batch)
    assert out["log_end_offset"] == [2, 2]
    assert out["lag_records"] == [1, 0]
    assert out["lag_seconds"] == [0.5, 0.0]  # the record at offset 1, stamped t0 + 1 s, was 0.5 s old
    assert out["oldest_unconsumed_time"] == [offsets_log.ms_to_datetime(stamps[1]), None]
