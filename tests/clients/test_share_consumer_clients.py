"""Share groups (KIP-932) with a real client: confluent-kafka's `ShareConsumer` (librdkafka) against
one broker process shared by every scenario, each scenario with its own topic and group, its
short locks and limits set as group configs the way a user sets them.

Scenarios: implicit acknowledgement, explicit ACCEPT/RELEASE/REJECT, four consumers sharing one
partition (every record delivered once), a SIGKILLed consumer whose held records go to another at
once (and whose accepted ones never come again), a consumer that stops polling (its locks time
out), a poison record archived at the delivery limit, read_committed skipping aborted
transactions, and a broker SIGKILLed mid-stream (its own broker process) that neither redelivers
an acknowledged record nor loses one."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from broker.embed import BrokerProcess
from tests.support import share
from tests.support.kafka_reference import free_port
from tests.support.raw_client import RawClient
from tests.support.waiting import wait_until

QUIET = {"log_level": 3}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(
        tmp_path_factory.mktemp("share-clients") / "data",
        "--offsets-partitions",
        "5",
        "--group-share-min-record-lock-duration-ms",
        "1000",
        "--group-share-min-session-timeout-ms",
        "6000",
    ).start()
    try:
        yield bp
    finally:
        bp.stop()


@pytest.fixture
def bootstrap(broker: BrokerProcess) -> str:
    return broker.bootstrap


def _setup(bootstrap: str, configs: dict[str, str], partitions: int = 1) -> tuple[str, str]:
    """A fresh topic and group; the group reads from the earliest offset, with `configs`."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in {"share.auto.offset.reset": "earliest", **configs}.items()
    ]
    for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]).values():
        f.result()
    return topic, group


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0, batch: int = 0) -> None:
    """`values` in one batch, or in batches of `batch` records."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for i, v in enumerate(values, 1):
        p.produce(topic, value=v, partition=partition)
        if batch and i % batch == 0:
            assert p.flush(10) == 0
    assert p.flush(10) == 0


def _consumer(bootstrap: str, group: str, topic: str, explicit: bool = False, **extra: Any) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, **QUIET, **extra}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(config)
    c.subscribe([topic])
    return c


def _drain(c: ShareConsumer, want: int, timeout: float = 30.0, ack: Any = None) -> list[Any]:
    """Poll until `want` records came (acknowledging each with `ack(message)` in explicit mode)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want:
        assert time.monotonic() < deadline, f"{len(got)} of {want} records after {timeout}s"
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
            if ack is not None:
                c.acknowledge(m, ack(m))
    return got


def _quiet(c: ShareConsumer, seconds: float, ack: Any = None) -> list[Any]:
    """What still arrives over `seconds` of polling (nothing, when every record is done)."""
    got: list[Any] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in c.poll(0.3):
            got.append(m)
            if ack is not None:
                c.acknowledge(m, ack(m))
    return got


def test_implicit_acknowledgement_delivers_each_record_once(bootstrap: str) -> None:
    topic, group = _setup(bootstrap, {})
    _produce(bootstrap, topic, [b"v%d" % i for i in range(50)])
    c = _consumer(bootstrap, group, topic)
    try:
        got = _drain(c, 50)
        assert sorted(m.offset() for m in got) == list(range(50)) and {m.delivery_count() for m in got} == {1}
        assert c.commit_sync(10) is not None
    finally:
        c.close()
    again = _consumer(bootstrap, group, topic)
    try:
        assert _quiet(again, 2.0) == []  # all were accepted
    finally:
        again.close()


def test_explicit_accept_release_reject(bootstrap: str) -> None:
    topic, group = _setup(bootstrap, {})
    _produce(bootstrap, topic, [b"accept", b"release", b"reject", b"accept-2"])
    decide = {b"accept": AcknowledgeType.ACCEPT, b"release": AcknowledgeType.RELEASE, b"reject": AcknowledgeType.REJECT}
    c = _consumer(bootstrap, group, topic, explicit=True)
    try:
        first = _drain(
            c, 4, ack=lambda m: decide.get(m.value(), AcknowledgeType.ACCEPT) if m.delivery_count() == 1 else AcknowledgeType.ACCEPT
        )
        assert [(m.offset(), m.delivery_count()) for m in first] == [(0, 1), (1, 1), (2, 1), (3, 1)]
        (redelivered,) = _drain(c, 1, ack=lambda m: AcknowledgeType.ACCEPT)
        assert (redelivered.value(), redelivered.delivery_count()) == (b"release", 2)
        assert _quiet(c, 1.5, ack=lambda m: AcknowledgeType.ACCEPT) == []  # the rejected one never comes back
    finally:
        c.close()


def test_four_consumers_share_one_partition(bootstrap: str) -> None:
    topic, group = _setup(bootstrap, {"share.partition.max.record.locks": "100"})
    total = 600
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def run(name: str) -> None:
        c = _consumer(bootstrap, group, topic)
        try:
            while not stop.is_set():
                for m in c.poll(0.2):
                    assert m.error() is None
                    with lock:
                        seen.setdefault(name, []).append((m.offset(), m.delivery_count()))
                    time.sleep(0.005)  # some work per record, so the others get their share
            c.commit_sync(10)  # accepts what the last poll gave (librdkafka's close would release it)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(f"c{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        # the four are members with the partition before the records come
        wait_until(lambda: _assigned_members(bootstrap, group) == 4, timeout=30, message="four members assigned")
        # in batches of 10: a share partition acquires whole batches, up to 100 records in flight
        _produce(bootstrap, topic, [b"%d" % i for i in range(total)], batch=10)
        wait_until(
            lambda: sum(len(v) for v in seen.values()) >= total, timeout=60, message=lambda: f"{ {k: len(v) for k, v in seen.items()} }"
        )
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    delivered = sorted(o for v in seen.values() for o in v)
    assert delivered == [(o, 1) for o in range(total)]  # each record to exactly one consumer, once
    assert len([v for v in seen.values() if v]) >= 2, {k: len(v) for k, v in seen.items()}


def _assigned_members(bootstrap: str, group: str) -> int:
    """Members of a share group that have partitions, as ShareGroupDescribe tells."""

    async def describe() -> Any:
        client = await RawClient.connect(bootstrap)
        try:
            return (await share.describe(client, group)).groups[0]
        finally:
            await client.close()

    described = asyncio.run(describe())
    return len([m for m in described.members if m.assignment.topic_partitions]) if described.error_code == 0 else 0


_HOLDER = """
import json, sys, time
from confluent_kafka import AcknowledgeType, ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "share.acknowledgement.mode": "explicit", "log_level": 3})
c.subscribe([sys.argv[3]])
while True:
    msgs = sorted(c.poll(0.5), key=lambda m: m.offset())
    if len(msgs):
        half = len(msgs) // 2
        for m in msgs[:half]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        results = c.commit_sync(10)
        ok = bool(results) and all(v is None for v in results.values())
        print(json.dumps({"accepted": [m.offset() for m in msgs[:half]] if ok else "failed", "held": [m.offset() for m in msgs[half:]]}), flush=True)
        while True:
            time.sleep(1)  # holds the rest, never acknowledges them
"""


def test_a_killed_consumers_records_go_to_another_at_once(bootstrap: str, tmp_path: Path) -> None:
    topic, group = _setup(bootstrap, {"share.record.lock.duration.ms": "60000"})
    _produce(bootstrap, topic, [b"v%d" % i for i in range(10)])
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, bootstrap, group, topic], stdout=subprocess.PIPE, text=True)
    try:
        holder = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        assert holder == {"accepted": [0, 1, 2, 3, 4], "held": [5, 6, 7, 8, 9]}
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        c = _consumer(bootstrap, group, topic)
        try:
            got = _drain(c, 5, timeout=30)
            # released when the connection closed, long before the 60 s lock would run out
            assert time.monotonic() - killed_at < 30
            assert sorted((m.offset(), m.delivery_count()) for m in got) == [(o, 2) for o in range(5, 10)]
            assert [m.offset() for m in _quiet(c, 1.5)] == []  # the accepted ones never come again
        finally:
            c.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_locks_of_a_consumer_that_stops_polling_time_out(bootstrap: str) -> None:
    topic, group = _setup(bootstrap, {"share.record.lock.duration.ms": "1000"})
    _produce(bootstrap, topic, [b"v%d" % i for i in range(5)])
    slow = _consumer(bootstrap, group, topic, explicit=True)
    fast = _consumer(bootstrap, group, topic)
    try:
        held = _drain(slow, 5)  # and then it neither acknowledges nor polls
        assert {m.delivery_count() for m in held} == {1}
        got = _drain(fast, 5, timeout=20)
        assert sorted((m.offset(), m.delivery_count()) for m in got) == [(o, 2) for o in range(5)]
    finally:
        fast.close()
        slow.close()


def test_a_poison_record_is_archived_at_the_delivery_limit(bootstrap: str) -> None:
    topic, group = _setup(bootstrap, {"share.delivery.count.limit": "3"})
    _produce(bootstrap, topic, [b"ok-1", b"poison", b"ok-2"])
    c = _consumer(bootstrap, group, topic, explicit=True)
    poison: list[int] = []

    def ack(m: Any) -> Any:
        if m.value() == b"poison":
            poison.append(m.delivery_count())
            return AcknowledgeType.RELEASE  # the application fails on it every time
        return AcknowledgeType.ACCEPT

    try:
        _drain(c, 5, ack=ack)  # ok-1, ok-2 and three deliveries of the poison record
        assert _quiet(c, 1.5, ack=ack) == []
        assert poison == [1, 2, 3]
    finally:
        c.close()
    _produce(bootstrap, topic, [b"after"])
    later = _consumer(bootstrap, group, topic)
    try:
        (m,) = _drain(later, 1)
        assert (m.value(), m.offset()) == (b"after", 3)
    finally:
        later.close()


def test_read_committed_skips_aborted_transactions(bootstrap: str) -> None:
    topic, group = _setup(bootstrap, {"share.isolation.level": "read_committed"})
    _, uncommitted_group = _setup(bootstrap, {})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}", **QUIET})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, value=b"aborted", partition=0)
    assert p.flush(10) == 0  # written, then aborted (an abort drops what is still queued)
    p.abort_transaction(10)
    p.begin_transaction()
    p.produce(topic, value=b"committed", partition=0)
    p.commit_transaction(10)
    c = _consumer(bootstrap, group, topic)
    try:
        got = _drain(c, 1)
        assert [m.value() for m in got] == [b"committed"]
        assert _quiet(c, 1.0) == []
    finally:
        c.close()
    c = _consumer(bootstrap, uncommitted_group, topic)
    try:
        assert sorted(m.value() for m in _drain(c, 2)) == [b"aborted", b"committed"]
    finally:
        c.close()


def test_group_events_are_logged(broker: BrokerProcess) -> None:
    topic, group = _setup(broker.bootstrap, {})
    _produce(broker.bootstrap, topic, [b"v"])
    c = _consumer(broker.bootstrap, group, topic)
    try:
        _drain(c, 1)
        c.commit_sync(10)
    finally:
        c.close()

    def event(name: str) -> dict[str, Any]:
        return broker.wait_for(lambda r: r.get("event") == name and r.get("group") == group, timeout=10)

    assert event("member joined")["protocol"] == "share"
    assert event("share partitions initialized")["partitions"] == {topic: [0]}
    assert event("target assignment computed")["assignor"] == "simple"
    assert event("member left")["protocol"] == "share"


def test_acknowledged_records_stay_done_across_a_broker_sigkill(tmp_path: Path) -> None:
    """The broker dies (SIGKILL) under a consumer acknowledging batch by batch and comes back on the
    same port and data dir: no record whose acknowledgement commit_sync reported done comes again,
    every record is delivered, and the batch held unacknowledged at the kill comes again."""
    port = free_port()
    args = ("--port", str(port), "--offsets-partitions", "5", "--group-share-min-session-timeout-ms", "6000")
    bp = BrokerProcess(tmp_path / "data", *args).start()
    try:
        # at most 100 records in flight (the least Kafka allows): the 600 come in many polls, so the kill falls mid-stream
        topic, group = _setup(bp.bootstrap, {"share.session.timeout.ms": "6000", "share.partition.max.record.locks": "100"})
        _produce(bp.bootstrap, topic, [b"v%d" % i for i in range(600)], batch=10)
        c = _consumer(bp.bootstrap, group, topic, explicit=True)
        done: set[int] = set()  # offsets whose ACCEPT commit_sync answered without error
        seen: set[int] = set()
        held: set[int] = set()  # polled just before the kill, acknowledged only after it
        after_kill: list[int] = []
        delivered_after_done: list[int] = []
        killed = False
        seen_at_kill = 0
        deadline = time.monotonic() + 120
        try:
            while len(seen) < 600 or not held <= set(after_kill) | done:
                assert time.monotonic() < deadline, f"{len(seen)} of 600 delivered; held {sorted(held)}, after the kill {after_kill}"
                batch = [m for m in c.poll(0.5) if m.error() is None]
                offsets = [m.offset() for m in batch]
                delivered_after_done += [o for o in offsets if o in done]
                seen.update(offsets)
                if killed:
                    after_kill += offsets
                elif len(done) >= 200 and batch:
                    held, seen_at_kill = set(offsets), len(seen)
                    bp.kill()  # SIGKILL, with this batch acquired and not yet acknowledged
                    killed = True
                    bp = BrokerProcess(tmp_path / "data", *args).start()
                for m in batch:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if batch:
                    try:
                        results = c.commit_sync(10)
                    except Exception:  # no answer: nothing of this batch is known done
                        results = {}
                    if results and all(v is None for v in results.values()):
                        done.update(offsets)
        finally:
            c.close()
        assert killed and 0 < len(held) <= 100 and seen_at_kill < 600, (killed, len(held), seen_at_kill)  # mid-stream
        assert delivered_after_done == [], "acknowledged records delivered again after the broker restarted"
        assert seen == set(range(600)), f"lost: {sorted(set(range(600)) - seen)}"
        assert held - done <= set(after_kill)
    finally:
        bp.close()
