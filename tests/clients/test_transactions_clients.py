"""Transactions through real clients against a broker process (issue 16).

- confluent-kafka's transactional producer commits and aborts; a read_committed consumer sees
  only the committed records, a read_uncommitted one all of them, and both positions end past
  the markers (control records are skipped, not delivered).
- A zombie: a second producer with the same transactional id fences the first and aborts its
  open transaction.
- The exactly-once loop (tests/support/eos_loop.py) in two processes of one group, one of them
  killed with SIGKILL inside a transaction and restarted with the same transactional id while
  the group rebalances: every record of the source is in the sink exactly once under
  read_committed, and the group's committed offsets are the source's ends.
- The broker SIGKILLed with a transaction open: after the restart the transaction is aborted
  when it times out, and read_committed readers never see its records.
- aiokafka's and kafka-python's transactional producers commit and abort.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.procs import BrokerProcess
from tests.support.waiting import wait_until

TIMEOUT = 30


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT)


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int | None = None) -> tuple[list[bytes], list[int]]:
    """Every record value of `topic` from the start, and the positions once the ends are reached."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader-" + uuid.uuid4().hex[:6],
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT)[1] for p in range(partitions)]
    values: list[bytes] = []

    def at_end() -> bool:
        for m in consumer.consume(num_messages=500, timeout=0.2):
            if m.error() is None:
                values.append(m.value())
        positions = [tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions)])]
        done = all(pos >= end for pos, end in zip(positions, ends, strict=True))
        return done and (expect is None or len(values) >= expect)

    wait_until(at_end, timeout=TIMEOUT, message=f"{isolation} reader at the ends {ends}")
    positions = [tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions)])]
    consumer.close()
    return values, positions


def txn_producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})
    producer.init_transactions(TIMEOUT)
    return producer


def test_confluent_commit_abort_and_isolation_levels(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc("--log-level", "debug")
    create(bp.bootstrap, "tx", 2)
    producer = txn_producer(bp.bootstrap, "ck-1")
    producer.begin_transaction()
    for i in range(6):
        producer.produce("tx", b"commit-%d" % i, partition=i % 2)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("tx", b"abort-%d" % i, partition=i % 2)
    assert producer.flush(TIMEOUT) == 0  # the records reach the log before the abort
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    producer.produce("tx", b"commit-last", partition=0)
    producer.commit_transaction(TIMEOUT)
    committed, committed_pos = consume_all(bp.bootstrap, "tx", 2, "read_committed")
    everything, all_pos = consume_all(bp.bootstrap, "tx", 2, "read_uncommitted", expect=11)
    assert sorted(committed) == sorted([b"commit-%d" % i for i in range(6)] + [b"commit-last"])
    assert sorted(everything) == sorted(committed + [b"abort-%d" % i for i in range(4)])
    # Partition 0: 3 committed + marker, 2 aborted + marker, 1 + marker = 9; partition 1: 3 + 1, 2 + 1 = 7.
    assert committed_pos == all_pos == [9, 7]
    # The transaction API versions librdkafka chose: Transaction V1 (EndTxn below v5, Produce below v12).
    used = {(r.get("api"), r.get("api_version")) for r in bp.records if r.get("event") == "request"}
    assert {api for api, _v in used} >= {"INIT_PRODUCER_ID", "ADD_PARTITIONS_TO_TXN", "END_TXN", "PRODUCE"}
    assert all(v < 5 for api, v in used if api == "END_TXN") and all(v < 12 for api, v in used if api == "PRODUCE")


def test_confluent_zombie_is_fenced_and_its_transaction_aborted(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc()
    create(bp.bootstrap, "zombie", 1)
    old = txn_producer(bp.bootstrap, "ck-zombie")
    old.begin_transaction()
    old.produce("zombie", b"from-the-zombie")
    assert old.flush(TIMEOUT) == 0
    new = txn_producer(bp.bootstrap, "ck-zombie")  # fences `old` and aborts its transaction
    new.begin_transaction()
    new.produce("zombie", b"from-the-successor")
    new.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(TIMEOUT)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    values, _ = consume_all(bp.bootstrap, "zombie", 1, "read_committed")
    assert values == [b"from-the-successor"]


class Loop:
    """A tests.support.eos_loop process and its events."""

    def __init__(self, spec: dict[str, Any], log_path: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._log = open(log_path, "wb")  # closed by _pump when the process ends
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.eos_loop", json.dumps(spec)], stdout=subprocess.PIPE, stderr=self._log
        )
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                continue
        self.proc.stdout.close()
        self._log.close()

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e["event"] == kind)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_exactly_once_loop_survives_kill_9_and_a_rebalance(broker_proc: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    bp = broker_proc()
    create(bp.bootstrap, "src", 2)
    create(bp.bootstrap, "dst", 2)
    total = 300
    producer = Producer({"bootstrap.servers": bp.bootstrap})
    for i in range(total):
        producer.produce("src", key=b"%d" % i, value=b"record-%d" % i, partition=i % 2)
    assert producer.flush(TIMEOUT) == 0
    base = {"bootstrap": bp.bootstrap, "group": "eos", "source": "src", "sink": "dst", "pause_s": 0.05, "batch": 10}
    loops = [Loop({**base, "transactional_id": "eos-1"}, tmp_path / "loop-1a.log")]
    try:
        wait_until(lambda: loops[0].count("committed") >= 2, timeout=TIMEOUT, message="the first loop commits")
        loops.append(Loop({**base, "transactional_id": "eos-2"}, tmp_path / "loop-2.log"))  # the group rebalances
        wait_until(lambda: loops[1].count("committed") >= 1 or loops[0].count("committed") >= 8, timeout=TIMEOUT, message="progress")
        # Kill the first loop inside a transaction: after its records are produced, before its commit.
        mark = loops[0].count("produced")
        wait_until(
            lambda: loops[0].count("produced") > mark and loops[0].events[-1]["event"] == "produced",
            timeout=TIMEOUT,
            interval=0.005,
            message="the first loop inside a transaction",
        )
        loops[0].kill()
        loops.append(Loop({**base, "transactional_id": "eos-1"}, tmp_path / "loop-1b.log"))  # same id: fences the dead one
        values: list[bytes] = []

        def all_copied() -> bool:
            nonlocal values
            values, _pos = consume_all(bp.bootstrap, "dst", 2, "read_committed")
            return len(values) >= total

        wait_until(all_copied, timeout=90, interval=0.5, message="every source record in the sink")
        for loop in loops[1:]:
            loop.stop()
        assert not [e for loop in loops for e in loop.events if e["event"] == "fatal"]
        assert sorted(values) == sorted(b"record-%d" % i for i in range(total))  # exactly once
        consumer = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "eos"})
        offsets = consumer.committed([TopicPartition("src", p) for p in range(2)], TIMEOUT)
        consumer.close()
        assert [tp.offset for tp in offsets] == [total // 2, total // 2]
        # The dead loop's open transaction was aborted: its records are in the log, never read.
        everything, _ = consume_all(bp.bootstrap, "dst", 2, "read_uncommitted")
        assert len(everything) > total
    finally:
        for loop in loops:
            loop.kill() if loop.proc.poll() is None else None


def test_broker_killed_with_open_transactions(broker_proc: Callable[..., BrokerProcess]) -> None:
    args = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200")
    bp = broker_proc(*args)
    create(bp.bootstrap, "crash", 2)
    done = txn_producer(bp.bootstrap, "crash-done")
    done.begin_transaction()
    done.produce("crash", b"committed", partition=0)
    done.commit_transaction(TIMEOUT)
    hanging = txn_producer(bp.bootstrap, "crash-open", **{"transaction.timeout.ms": 3000})
    hanging.begin_transaction()
    for p in range(2):
        hanging.produce("crash", b"half", partition=p)
    assert hanging.flush(TIMEOUT) == 0
    bp.kill()
    bp.restart()
    # Until the open transaction times out, read_committed readers stop before it.
    early, _ = consume_all(bp.bootstrap, "crash", 2, "read_committed")
    assert b"half" not in early
    # A read_committed consumer's ListOffsets(latest) is the last stable offset: it reaches the
    # log end once the abort markers are written (partition 0: record, marker, half, marker).
    consumer = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    lso = [consumer.get_watermark_offsets(TopicPartition("crash", p), TIMEOUT)[1] for p in range(2)]
    assert lso in ([2, 0], [4, 2])  # (the timeout may already have passed)
    wait_until(
        lambda: [consumer.get_watermark_offsets(TopicPartition("crash", p), TIMEOUT)[1] for p in range(2)] == [4, 2],
        timeout=TIMEOUT,
        interval=0.2,
        message="the open transaction aborted on timeout",
    )
    consumer.close()
    values, positions = consume_all(bp.bootstrap, "crash", 2, "read_committed")
    assert values == [b"committed"] and positions == [4, 2]
    with pytest.raises(KafkaException):
        hanging.commit_transaction(10)


async def _aiokafka_round(bootstrap: str) -> None:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait("aio", b"aio-commit", partition=0)
        await producer.begin_transaction()
        await producer.send_and_wait("aio", b"aio-abort", partition=0)
        await producer.abort_transaction()
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        "aio", bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        got = await consumer.getmany(timeout_ms=3000)
        values = [m.value for msgs in got.values() for m in msgs]
        assert values == [b"aio-commit"]
    finally:
        await consumer.stop()


def test_aiokafka_and_kafka_python_transactional_producers(broker_proc: Callable[..., BrokerProcess]) -> None:
    bp = broker_proc()
    create(bp.bootstrap, "aio", 1)
    create(bp.bootstrap, "kp", 1)
    asyncio.run(_aiokafka_round(bp.bootstrap))
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bp.bootstrap, transactional_id="kp-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp", b"kp-commit", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("kp", b"kp-abort", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(
        "kp", bootstrap_servers=bp.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"kp-commit"]
    values, positions = consume_all(bp.bootstrap, "aio", 1, "read_uncommitted")
    assert sorted(values) == [b"aio-abort", b"aio-commit"] and positions == [4]
