"""The Prometheus endpoint while real clients work: lag, members, group counts, rebalances.

Every scrape is parsed with prometheus_client's parser; values are checked against what the
clients themselves see (watermarks, committed offsets, their assignments).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer

from broker.embed import BrokerThread
from tests.support.metrics import Scrape, scrape
from tests.support.waiting import wait_until

TOPIC = "metrics-t"
PARTITIONS = 3


def start(broker_thread: Callable[..., BrokerThread], **overrides: Any) -> tuple[BrokerThread, str]:
    bt = broker_thread(metrics=True, metrics_port=0, default_partitions=PARTITIONS, **overrides)
    assert bt.broker.metrics is not None and bt.broker.metrics.address is not None
    return bt, bt.broker.metrics.address


def produce(bootstrap: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def assigned(*consumers: Consumer) -> bool:
    """Poll each consumer once (that serves its rebalance) and say whether all have partitions."""
    for c in consumers:
        c.poll(0.05)
    return all(c.assignment() for c in consumers)


def test_lag_is_high_watermark_minus_committed_for_every_partition(broker_thread: Callable[..., BrokerThread]) -> None:
    bt, address = start(broker_thread)
    produce(bt.bootstrap, {0: 10, 1: 20, 2: 30})
    c = consumer(bt.bootstrap, "lag-group")
    c.subscribe([TOPIC])
    wait_until(lambda: assigned(c), timeout=20, message="assignment")
    # A member commits partitions 0 and 1; partition 2 keeps no committed offset.
    c.commit(offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 20)], asynchronous=False)
    produce(bt.bootstrap, {0: 5, 2: 1})  # the log moves on after the commits

    parts = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=10)}
    marks = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10) for p in range(PARTITIONS)}
    assert committed[0] == 4 and committed[1] == 20 and committed[2] < 0  # librdkafka: OFFSET_INVALID
    s = scrape(address)
    lag_sum = 0
    for p in range(PARTITIONS):
        labels = {"consumergroup": "lag-group", "topic": TOPIC, "partition": str(p)}
        low, high = marks[p]
        assert s.value("kafka_topic_partition_current_offset", topic=TOPIC, partition=str(p)) == high
        assert s.value("kafka_topic_partition_oldest_offset", topic=TOPIC, partition=str(p)) == low
        if committed[p] >= 0:
            assert s.value("kafka_consumergroup_current_offset", **labels) == committed[p]
            assert s.value("kafka_consumergroup_lag", **labels) == high - committed[p]
            lag_sum += high - committed[p]
        else:  # kafka_exporter: -1 for both when the group has no offset for the partition
            assert s.value("kafka_consumergroup_current_offset", **labels) == -1
            assert s.value("kafka_consumergroup_lag", **labels) == -1
    assert s.value("kafka_consumergroup_lag_sum", consumergroup="lag-group", topic=TOPIC) == lag_sum == (15 - 4) + 0
    # The exporter's sum adds every partition's value, -1 included.
    assert s.value("kafka_consumergroup_current_offset_sum", consumergroup="lag-group", topic=TOPIC) == 4 + 20 - 1
    assert s.value("kafka_consumergroup_members", consumergroup="lag-group") == 1
    assert s.value("kafka_topic_partitions", topic=TOPIC) == PARTITIONS
    c.close()


def test_members_and_group_counts_follow_joins_and_leaves(broker_thread: Callable[..., BrokerThread]) -> None:
    bt, address = start(broker_thread)
    produce(bt.bootstrap, {0: 1})

    def groups(s: Scrape) -> tuple[float | None, float | None, float | None, float | None]:
        return (
            s.value("kafka_consumergroup_members", consumergroup="members-group"),
            s.value("kaflet_groups", protocol="classic"),
            s.value("kaflet_classic_groups", state="Stable"),
            s.value("kaflet_classic_groups", state="Empty"),
        )

    assert groups(scrape(address)) == (None, 0, 0, 0)
    first = consumer(bt.bootstrap, "members-group")
    first.subscribe([TOPIC])
    wait_until(lambda: assigned(first) and groups(scrape(address)) == (1, 1, 1, 0), timeout=20, message="one member, Stable")
    second = consumer(bt.bootstrap, "members-group")
    second.subscribe([TOPIC])
    wait_until(lambda: assigned(first, second) and groups(scrape(address)) == (2, 1, 1, 0), timeout=30, message="two members")
    second.close()  # LeaveGroup
    wait_until(lambda: assigned(first) and groups(scrape(address))[0] == 1, timeout=30, message="one member left")
    first.close()
    wait_until(lambda: groups(scrape(address)) == (0, 1, 0, 1), timeout=30, message="no member, Empty")


def test_rebalance_counter_and_histogram_move_when_a_member_joins(broker_thread: Callable[..., BrokerThread]) -> None:
    bt, address = start(broker_thread)
    produce(bt.bootstrap, {0: 1})

    def rebalances() -> tuple[float, float, float]:
        s = scrape(address)
        return (
            s.value("kaflet_group_rebalances_total") or 0,
            s.value("kaflet_group_rebalance_duration_seconds_count") or 0,
            s.value("kaflet_group_rebalance_duration_seconds_bucket", le="+Inf") or 0,
        )

    def kafka_python_member() -> KafkaConsumer:
        # Metadata first: kafka-python 3.0.12 joining before it knows the topic rejoins when the
        # metadata arrives, and sometimes stalls after that second SyncGroup (no heartbeat, no
        # OffsetFetch; every request it sent was answered).
        c = KafkaConsumer(bootstrap_servers=bt.bootstrap, group_id="rebalance-group", enable_auto_commit=False)
        assert TOPIC in c.topics()
        c.subscribe([TOPIC])
        return c

    first = kafka_python_member()
    second: KafkaConsumer | None = None
    try:
        wait_until(lambda: first.poll(50) is not None and bool(first.assignment()), timeout=30, message="first member assigned")
        wait_until(lambda: rebalances()[0] >= 1, timeout=10, message="first rebalance counted")
        before = rebalances()
        assert before[0] == before[1] == before[2]  # one observation per completed rebalance
        second = kafka_python_member()
        joined = second

        def both_assigned() -> bool:
            # Polls long enough for a whole rejoin: with 50 ms polls on a busy machine (the suite
            # in three processes), kafka-python 3.0.12 once left a member unassigned for 30 s
            # while its selector reported tasks blocked for up to 0.9 s.
            first.poll(500)
            joined.poll(500)
            return bool(first.assignment()) and bool(joined.assignment())

        wait_until(lambda: both_assigned() and rebalances()[0] > before[0], timeout=30, message="rebalance after the join")
        after = rebalances()
        assert after[0] == after[1] == after[2] > before[0]
        s = scrape(address)
        assert (s.value("kaflet_group_rebalance_duration_seconds_sum") or 0) > 0
        assert s.value("kafka_consumergroup_members", consumergroup="rebalance-group") == 2
    finally:
        first.close()
        if second is not None:
            second.close()


def test_request_and_storage_metrics_move_with_client_traffic(broker_thread: Callable[..., BrokerThread]) -> None:
    bt, address = start(broker_thread, fsync="always")
    produce(bt.bootstrap, {0: 3, 1: 3})
    c = consumer(bt.bootstrap, "traffic-group")
    c.assign([TopicPartition(TOPIC, 0, 0)])
    wait_until(lambda: c.poll(0.2) is not None, timeout=20, message="a record")
    c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    c.close()
    s = scrape(address)
    requests = s.series("kaflet_requests_total")
    apis = {dict(k)["api"] for k in requests}
    assert {"ApiVersions", "Metadata", "Produce", "Fetch", "OffsetCommit", "FindCoordinator"} <= apis
    for api in ("Produce", "OffsetCommit"):
        count = sum(v for k, v in requests.items() if dict(k)["api"] == api)
        assert s.value("kaflet_request_duration_seconds_count", api=api) == count
    assert (s.value("kaflet_offset_commits_total") or 0) >= 1
    assert (s.value("kaflet_committed_offsets") or 0) >= 1
    assert (s.value("kaflet_log_append_duration_seconds_count") or 0) >= 3  # produce batches and the commit
    assert (s.value("kaflet_log_fsync_duration_seconds_count") or 0) >= 1  # --fsync always
    sizes = bt.run(lambda b: {p: (b.logs.get(TOPIC, p).size_bytes, len(b.logs.get(TOPIC, p).segments)) for p in range(PARTITIONS)})
    for p, (size, segments) in sizes.items():
        assert s.value("kaflet_log_size_bytes", topic=TOPIC, partition=str(p)) == size
        assert s.value("kaflet_log_segments", topic=TOPIC, partition=str(p)) == segments
    host, port = bt.bootstrap.rsplit(":", 1)
    held = [socket.create_connection((host, int(port))) for _ in range(3)]
    try:
        # Clients close in the background; the gauge converges on the broker's own count.
        wait_until(
            lambda: scrape(address).value("kaflet_open_connections") == bt.run(lambda b: len(b.connections)) >= 3,
            timeout=10,
            message="open connections counted",
        )
    finally:
        for sock in held:
            sock.close()
    assert s.value("kafka_brokers") == 1
    assert s.value("kafka_broker_info", id="1", address=bt.bootstrap) == 1


def test_no_group_metrics_drops_per_group_series_only(broker_thread: Callable[..., BrokerThread]) -> None:
    bt, address = start(broker_thread, group_metrics=False)
    produce(bt.bootstrap, {0: 2})
    c = consumer(bt.bootstrap, "quiet-group")
    c.subscribe([TOPIC])
    wait_until(lambda: assigned(c), timeout=20, message="assignment")
    c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    s = scrape(address)
    c.close()
    for name in ("kafka_consumergroup_members", "kafka_consumergroup_lag", "kafka_consumergroup_current_offset"):
        assert s.samples(name) == [], name
    assert s.value("kaflet_groups", protocol="classic") == 1
    assert s.value("kafka_topic_partition_current_offset", topic=TOPIC, partition="0") == 2


def test_scrapes_are_quick_to_repeat(broker_thread: Callable[..., BrokerThread]) -> None:
    """Scrapes run on the broker's loop between requests: many in a row leave clients served."""
    bt, address = start(broker_thread)
    produce(bt.bootstrap, {0: 1})
    deadline = time.monotonic() + 30
    for _ in range(20):
        scrape(address)
        assert time.monotonic() < deadline
    produce(bt.bootstrap, {0: 1})
    assert scrape(address).value("kafka_topic_partition_current_offset", topic=TOPIC, partition="0") == 2


def test_consumer_protocol_group_counts_and_counters(broker_thread: Callable[..., BrokerThread]) -> None:
    """KIP-848 groups: kaflet_groups{protocol="consumer"}, kaflet_consumer_groups{state}, the
    heartbeat and epoch-bump counters, and kafka_consumergroup_members."""
    bt, address = start(broker_thread)
    produce(bt.bootstrap, {0: 1})

    def seen(s: Scrape) -> tuple[Any, ...]:
        return (
            s.value("kaflet_groups", protocol="consumer"),
            s.value("kaflet_consumer_groups", state="Stable"),
            s.value("kafka_consumergroup_members", consumergroup="kip848-metrics"),
        )

    member = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "kip848-metrics", "group.protocol": "consumer"})
    member.subscribe([TOPIC])
    try:
        wait_until(lambda: assigned(member) and seen(scrape(address)) == (1, 1, 1), timeout=30, message="a Stable consumer group")
        s = scrape(address)
        assert (s.value("kaflet_consumer_group_heartbeats_total") or 0) >= 1
        assert s.value("kaflet_consumer_group_rebalances_total") == 1
        assert s.value("kaflet_consumer_group_reconciliations_total") == 1  # Empty -> Stable at the first heartbeat
    finally:
        member.close()
    wait_until(lambda: scrape(address).value("kaflet_consumer_groups", state="Empty") == 1, timeout=30, message="Empty")
