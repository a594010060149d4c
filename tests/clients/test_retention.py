"""Retention deletes whole old segments; a consumer below the log start is told
OFFSET_OUT_OF_RANGE and resets."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.support.waiting import wait_until


def test_retention_removes_old_segments_and_consumers_reset(broker_thread: Callable[..., Any]) -> None:
    bt = broker_thread(log_retention_check_interval_ms=100)
    bt.run(lambda b: b.topics.create("ret", 1, {"segment.bytes": "2000", "retention.bytes": "6000"}))
    producer = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(200):
        producer.produce("ret", value=b"%04d" % i + b"x" * 100, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    log = bt.run(lambda b: b.logs.get("ret", 0))
    segment_dir = log.dir
    # The retention task deletes whole segments until what is left is just above retention.bytes.
    start = wait_until(lambda: bt.run(lambda b: log.log_start_offset), message="retention to advance the log start")
    wait_until(lambda: bt.run(lambda b: log.size_bytes) < 6000 + 2000)
    files = sorted(p.name for p in segment_dir.glob("*.log"))
    assert files[0] != "00000000000000000000.log" and int(files[0].split(".")[0]) >= start
    start = bt.run(lambda b: log.log_start_offset)
    end = bt.run(lambda b: log.log_end_offset)
    assert 0 < start < end == 200

    strict = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "unused", "enable.auto.commit": False, "auto.offset.reset": "error"})
    strict.assign([TopicPartition("ret", 0, 0)])
    errors: list[Any] = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        errors = [m.error() for m in strict.consume(10, 0.5) if m.error()]
    strict.close()
    assert errors and errors[0].code() == KafkaError._AUTO_OFFSET_RESET and "out of range" in errors[0].str()

    resetting = Consumer(
        {"bootstrap.servers": bt.bootstrap, "group.id": "unused", "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    resetting.assign([TopicPartition("ret", 0, 0)])
    offsets: list[int] = []
    deadline = time.monotonic() + 20
    while len(offsets) < end - start and time.monotonic() < deadline:
        offsets += [m.offset() for m in resetting.consume(100, 0.5) if not m.error()]
    resetting.close()
    assert offsets == list(range(start, end))
