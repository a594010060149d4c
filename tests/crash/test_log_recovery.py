"""A killed broker loses nothing it acknowledged; a torn tail is cut at start-up; producer state
survives a kill."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from broker.embed import BrokerProcess
from tests.support import data as d
from tests.support.raw_client import RawClient


async def _request(bootstrap: str, *requests: object) -> list:
    client = await RawClient.connect(bootstrap)
    try:
        return [await client.request(req) for req in requests]
    finally:
        await client.close()


def request(bp: BrokerProcess, *requests: object) -> list:
    return asyncio.run(_request(bp.bootstrap, *requests))


def latest(bp: BrokerProcess, topic: str) -> int:
    return request(bp, d.list_offsets(topic, 0, -1))[0].topics[0].partitions[0].offset


def test_torn_tail_is_truncated_to_the_last_whole_batch(broker_proc: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    bp = broker_proc()
    for _ in range(5):
        res = d.produce_result(request(bp, d.produce("torn", 0, d.batch(3, value=b"x" * 200)))[0])
        assert res.error_code == 0
    bp.kill()
    segment = tmp_path / "data" / "torn-0" / "00000000000000000000.log"
    data = segment.read_bytes()
    batch_size = len(data) // 5
    cut = len(data) - batch_size // 2  # the middle of the fifth batch
    garbage = b"\x00\x00\x00\x00\x00\x00\x00\x0f\x00\x00\x01\x00garbage" * 3
    segment.write_bytes(data[:cut] + garbage)
    bp.start()
    warning = bp.wait_for(lambda rec: rec.get("event") == "truncated corrupt log tail")
    assert warning["level"] == "warning" and warning["partition"] == "torn-0"
    assert warning["bytes_dropped"] == len(data[:cut] + garbage) - 4 * batch_size
    assert segment.stat().st_size == 4 * batch_size
    assert latest(bp, "torn") == 12
    res = d.produce_result(request(bp, d.produce("torn", 0, d.batch(1)))[0])
    assert res.error_code == 0 and res.base_offset == 12
    fetched = request(bp, d.fetch([("torn", 0, 0)]))[0]
    assert d.fetched_offsets(fetched.responses[0].partitions[0]) == list(range(13))


@pytest.mark.parametrize("fsync", ["never", "always", "50"])
def test_killed_broker_keeps_every_acknowledged_record(broker_proc: Callable[..., BrokerProcess], fsync: str) -> None:
    bp = broker_proc("--fsync", fsync)
    acked: list[int] = []
    producer = Producer({"bootstrap.servers": bp.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2})

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.append(int(msg.value()))  # type: ignore[attr-defined]

    for i in range(2000):
        producer.produce("kill", value=b"%d" % i, on_delivery=on_delivery)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    bp.kill()
    bp.start()
    assert len(acked) == 2000
    consumer = Consumer(
        {"bootstrap.servers": bp.bootstrap, "group.id": "unused", "enable.auto.commit": False, "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition("kill", 0, OFFSET_BEGINNING)])
    got: list[int] = []
    eof = False
    deadline = time.monotonic() + 30
    while not eof and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF
                eof = True
            else:
                got.append(int(msg.value()))
    consumer.close()
    assert got == sorted(acked)


def test_producer_state_survives_a_kill(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc()
    init = request(bp, d.init_producer_id())[0]
    pid = init.producer_id
    batches = [d.batch(2, producer_id=pid, producer_epoch=0, base_sequence=seq) for seq in range(0, 12, 2)]
    offsets = [d.produce_result(r).base_offset for r in request(bp, *[d.produce("ps", 0, b) for b in batches])]
    assert offsets == list(range(0, 12, 2))
    bp.kill()
    bp.start()
    again = [d.produce_result(r) for r in request(bp, *[d.produce("ps", 0, b) for b in batches[1:]])]
    assert [(r.error_code, r.base_offset) for r in again] == [(0, o) for o in offsets[1:]]  # the last five: duplicates
    assert latest(bp, "ps") == 12
    nxt = d.produce_result(request(bp, d.produce("ps", 0, d.batch(1, producer_id=pid, producer_epoch=0, base_sequence=12)))[0])
    assert (nxt.error_code, nxt.base_offset) == (0, 12)
    gap = d.produce_result(request(bp, d.produce("ps", 0, d.batch(1, producer_id=pid, producer_epoch=0, base_sequence=20)))[0])
    assert gap.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    bp.stop()
    bp.start()  # and after a clean shutdown
    dup = d.produce_result(request(bp, d.produce("ps", 0, d.batch(1, producer_id=pid, producer_epoch=0, base_sequence=12)))[0])
    assert (dup.error_code, dup.base_offset) == (0, 12)
