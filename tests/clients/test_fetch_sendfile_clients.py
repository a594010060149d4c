"""Real consumers read large records answered with sendfile (broker/network/connection.py): every byte
arrives, in order, through answers of tens of MB that fill the socket mid-range, and across
segment boundaries (segment.bytes 1 MiB)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from broker.embed import BrokerProcess

PARTITIONS = 4
PER_PARTITION = 120  # records of 40 KB: ~4.8 MB a partition, five segments of 1 MiB
SIZE = 40_000


def value(p: int, i: int) -> bytes:
    return hashlib.sha256(b"%d-%d" % (p, i)).digest() * (SIZE // 32)


def fill(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"segment.bytes": "1048576"})])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "message.max.bytes": 2_000_000})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, key=b"%d" % i, value=value(p, i), partition=p)
    assert producer.flush(30) == 0


def test_confluent_kafka_and_kafka_python_read_every_byte(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc()
    fill(bp.bootstrap, "big")
    consumer = Consumer(
        {"bootstrap.servers": bp.bootstrap, "group.id": "unused", "enable.auto.commit": False, "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition("big", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while len(eof) < PARTITIONS and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                eof.add(msg.partition())
            else:
                got[msg.partition()].append((msg.offset(), msg.value()))
    consumer.close()
    for p in range(PARTITIONS):
        assert [o for o, _ in got[p]] == list(range(PER_PARTITION))
        assert all(v == value(p, i) for i, (_, v) in enumerate(got[p])), p

    kp = KafkaConsumer(bootstrap_servers=bp.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_bytes=50 << 20)
    kp.assign([KpTopicPartition("big", p) for p in range(PARTITIONS)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(map(len, seen.values())) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
        for tp, records in kp.poll(timeout_ms=500).items():
            seen[tp.partition].extend(r.value for r in records)
    kp.close()
    for p in range(PARTITIONS):
        assert seen[p] == [value(p, i) for i in range(PER_PARTITION)], p
