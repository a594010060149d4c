"""Real clients move real data through kaflet and find all of it again after a broker restart.

Each client produces N keyed records over three partitions with every compression codec it
supports, the broker process is restarted, and the client consumes exactly N records, in
order per partition, in assign mode.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable

import aiokafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from broker.embed import BrokerProcess

N = 300
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def expected(topic: str) -> dict[int, list[tuple[bytes, bytes]]]:
    """What was produced to each partition, in order: record i goes to partition i % 3."""
    out: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for i in range(N):
        out[i % PARTITIONS].append((b"key-%d" % (i % 17), b"%s-value-%d" % (topic.encode(), i)))
    return out


def start(broker_proc: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_proc("--default-partitions", str(PARTITIONS))


def test_confluent_kafka_idempotent_every_codec_survives_restart(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = start(broker_proc)
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bp.bootstrap, "enable.idempotence": True, "linger.ms": 5, "compression.type": codec})
        topic = f"ck-{codec}"
        for p, items in expected(topic).items():
            for key, value in items:
                producer.produce(topic, key=key, value=value, partition=p)
        assert producer.flush(30) == 0
    bp.restart()
    consumer = Consumer(
        {"bootstrap.servers": bp.bootstrap, "group.id": "unused", "enable.auto.commit": False, "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(f"ck-{codec}", p, OFFSET_BEGINNING) for codec in CODECS for p in range(PARTITIONS)])
    got: dict[str, dict[int, list[tuple[bytes, bytes]]]] = {f"ck-{c}": {p: [] for p in range(PARTITIONS)} for c in CODECS}
    eof: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 30
    while len(eof) < len(CODECS) * PARTITIONS and time.monotonic() < deadline:
        for msg in consumer.consume(500, 0.5):
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                eof.add((msg.topic(), msg.partition()))
            else:
                got[msg.topic()][msg.partition()].append((msg.key(), msg.value()))
    consumer.close()
    for codec in CODECS:
        assert got[f"ck-{codec}"] == expected(f"ck-{codec}"), codec


def test_kafka_python_every_codec_survives_restart(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = start(broker_proc)
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=bp.bootstrap, compression_type=None if codec == "none" else codec, linger_ms=5)
        topic = f"kp-{codec}"
        for p, items in expected(topic).items():
            for key, value in items:
                producer.send(topic, key=key, value=value, partition=p)
        producer.flush(30)
        producer.close()
    bp.restart()
    for codec in CODECS:
        topic = f"kp-{codec}"
        consumer = KafkaConsumer(bootstrap_servers=bp.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        parts = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(parts)
        got: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in parts) and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend((m.key, m.value) for m in msgs)
        consumer.close()
        assert got == expected(topic), codec


def test_aiokafka_every_codec_survives_restart(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = start(broker_proc)

    async def produce() -> None:
        for codec in CODECS:
            producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bp.bootstrap, compression_type=None if codec == "none" else codec)
            await producer.start()
            topic = f"aio-{codec}"
            try:
                for p, items in expected(topic).items():
                    for key, value in items:
                        await producer.send(topic, key=key, value=value, partition=p)
                await producer.flush()
            finally:
                await producer.stop()

    async def consume(topic: str) -> dict[int, list[tuple[bytes, bytes]]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bp.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        got: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
        try:
            parts = [aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(parts)
            await consumer.seek_to_beginning()
            ends = await consumer.end_offsets(parts)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                positions = [await consumer.position(tp) for tp in parts]
                if all(pos >= ends[tp] for pos, tp in zip(positions, parts, strict=True)):
                    break
                for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                    got[tp.partition].extend((m.key, m.value) for m in msgs)
        finally:
            await consumer.stop()
        return got

    asyncio.run(produce())
    bp.restart()
    for codec in CODECS:
        assert asyncio.run(consume(f"aio-{codec}")) == expected(f"aio-{codec}"), codec


def test_kcat_produces_and_consumes(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = start(broker_proc)
    lines = [f"key-{i}:value-{i}" for i in range(50)]
    for p in range(PARTITIONS):
        part_lines = [line for i, line in enumerate(lines) if i % PARTITIONS == p]
        run = subprocess.run(
            ["kcat", "-b", bp.bootstrap, "-P", "-t", "kc", "-p", str(p), "-K:", "-z", "lz4" if p else "none"],
            input="\n".join(part_lines).encode() + b"\n",
            capture_output=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
    bp.restart()
    for p in range(PARTITIONS):
        run = subprocess.run(
            ["kcat", "-b", bp.bootstrap, "-C", "-t", "kc", "-p", str(p), "-o", "beginning", "-e", "-f", "%k:%s:%o\\n"],
            capture_output=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        got = run.stdout.decode().splitlines()
        want = [f"{line}:{o}" for o, line in enumerate(line for i, line in enumerate(lines) if i % PARTITIONS == p)]
        assert got == want
