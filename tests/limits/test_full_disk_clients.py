"""Scenario (issue 11): the data dir's disk fills to the last byte while a librdkafka producer
produces and a consumer group commits. Errors are answered (Produce KAFKA_STORAGE_ERROR, which
the producer retries; commits NOT_COORDINATOR), nothing acknowledged is lost, and both carry on
once space is freed, without a restart."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker import Config
from tests.support.metrics import scrape
from tests.support.small_fs import Disk
from tests.support.threaded import BrokerThread
from tests.support.waiting import wait_until

TOPIC = "events"


DISK_SIZE = "24m"  # the disk fixture (tests/limits/conftest.py) mounts a tmpfs this large


def test_disk_full_while_producing_and_committing(disk: Disk) -> None:
    config = Config(port=0, metrics=True, metrics_port=0, data_dir=str(disk.path / "data"), offsets_partitions=3)
    with BrokerThread(config) as b:
        b.run(lambda broker: broker.topics.create(TOPIC, 2))
        acked: dict[tuple[int, int], bytes] = {}
        failed_deliveries: list[str] = []
        stop = threading.Event()

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                failed_deliveries.append(str(err))

        producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})

        def produce() -> None:
            i = 0
            while not stop.is_set():
                producer.produce(TOPIC, value=b"%08d" % i + bytes(2000), partition=i % 2, on_delivery=on_delivery)
                producer.poll(0)
                i += 1
                time.sleep(0.002)

        committer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "auditors", "enable.auto.commit": False})
        acked_commits: list[int] = []
        commit_errors: list[str] = []

        def commit(offset: int) -> None:
            try:
                committer.commit(offsets=[TopicPartition(TOPIC, 0, offset), TopicPartition(TOPIC, 1, offset)], asynchronous=False)
                acked_commits.append(offset)
            except KafkaException as exc:
                commit_errors.append(exc.args[0].name())

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        try:
            wait_until(lambda: len(acked) > 200, timeout=30, message="the producer under way")
            for offset in range(1, 20):
                commit(offset)
            disk.fill(b.broker)
            deadline = time.monotonic() + 4
            offset = 20
            while time.monotonic() < deadline:  # keep committing while the disk is full
                commit(offset)
                offset += 1
            acked_while_full = len(acked)
            disk.free(b.broker)
            wait_until(lambda: len(acked) > acked_while_full + 200, timeout=60, message="produce going on once space is freed")

            def commit_accepted() -> bool:
                before = len(acked_commits)
                commit(10_000 + len(commit_errors))
                return len(acked_commits) > before

            wait_until(commit_accepted, timeout=30, message="a commit accepted once space is freed")
        finally:
            stop.set()
            thread.join(10)
        assert producer.flush(60) == 0
        assert not failed_deliveries, failed_deliveries[:3]  # retried through the full disk, none given up

        # Errors were answered: Produce got KAFKA_STORAGE_ERROR, commits got errors (no closed connections needed).
        assert b.metrics_address is not None
        errors = scrape(b.metrics_address).series("kaflet_request_errors_total", error="KAFKA_STORAGE_ERROR")
        assert sum(errors.values()) > 0, "no Produce was refused: the disk never filled"
        assert commit_errors, "no commit was refused while the disk was full"
        assert set(commit_errors) <= {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "_TIMED_OUT"}

        # Nothing acknowledged is lost: every acked record is at its offset, and the last acked commit reads back.
        reader = Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "reader", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
        reader.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
        seen: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 60
        while not set(acked) <= set(seen) and time.monotonic() < deadline:
            for msg in reader.consume(500, timeout=1):
                if msg.error() is None:
                    seen[(msg.partition(), msg.offset())] = msg.value()
        reader.close()
        missing = [k for k in acked if seen.get(k) != acked[k]]
        assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:3]}"
        committed = committer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)
        assert [tp.offset for tp in committed] == [acked_commits[-1]] * 2
        committer.close()
