"""Committed offsets through real clients (issue 4): confluent-kafka, kafka-python and aiokafka
commit manually (with metadata) and through auto-commit, read the offsets back with
committed(), list and describe the groups and their offsets with their admin clients, and find
every offset again after the broker process restarts. The confluent-kafka and kafka-python admin
clients also meet NON_EMPTY_GROUP and GROUP_SUBSCRIBED_TO_TOPIC while a member is live, then
alter an empty group's offsets, delete some (OffsetDelete) and delete the group.

Each test uses two groups on one topic of three partitions holding ten records each: a
"manual" group whose consumer commits explicit offsets (the positions minus one per partition,
so they differ from what auto-commit would store) and an "auto" group whose consumer
auto-commits every 100 ms until its committed offsets reach the end of every partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiokafka
import kafka.errors as kerrors
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.structs import OffsetAndMetadata as AioOffsetAndMetadata
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata
from kafka.structs import TopicPartition as KpTopicPartition

from broker.embed import BrokerProcess
from tests.support.waiting import wait_until

PARTITIONS = 3
RECORDS = 10  # per partition
ENDS = dict.fromkeys(range(PARTITIONS), RECORDS)
MANUAL = {p: RECORDS - 1 - p for p in range(PARTITIONS)}  # 9, 8, 7: not what auto-commit would store
TIMEOUT = 30


def prepare(broker_proc: Callable[..., BrokerProcess], topic: str) -> BrokerProcess:
    bp = broker_proc()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bp.bootstrap})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, value=b"v%d" % i, partition=p)
    assert producer.flush(TIMEOUT) == 0
    return bp


# -- confluent-kafka ---------------------------------------------------------------------------


def ck_consumer(bp: BrokerProcess, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bp.bootstrap,
            "group.id": group,
            "client.id": f"{group}-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **conf,
        }
    )


def ck_consume_all(consumer: Consumer, topic: str) -> None:
    """Poll until every record of `topic` was delivered (auto-commit happens while polling)."""
    counts = dict.fromkeys(range(PARTITIONS), 0)

    def done() -> bool:
        for msg in consumer.consume(100, 0.1):
            assert not msg.error(), msg.error()
            counts[msg.partition()] += 1
        return counts == ENDS

    wait_until(done, TIMEOUT, message="every record consumed")


def ck_committed(consumer: Consumer, topic: str) -> dict[int, tuple[int, str | None]]:
    tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], TIMEOUT)
    return {tp.partition: (tp.offset, tp.metadata) for tp in tps}


def test_confluent_kafka_commits_reads_lists_and_describes(broker_proc: Callable[..., BrokerProcess]) -> None:
    topic = "ck-offsets"
    bp = prepare(broker_proc, topic)
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})

    manual = ck_consumer(bp, "ck-manual")
    manual.subscribe([topic])
    ck_consume_all(manual, topic)
    manual.commit(offsets=[TopicPartition(topic, p, o, metadata=f"m{p}") for p, o in MANUAL.items()], asynchronous=False)
    assert ck_committed(manual, topic) == {p: (o, f"m{p}") for p, o in MANUAL.items()}

    auto = ck_consumer(bp, "ck-auto", **{"enable.auto.commit": True, "auto.commit.interval.ms": 100})
    auto.subscribe([topic])
    ck_consume_all(auto, topic)
    wait_until(lambda: auto.consume(10, 0.1) == [] and ck_committed(auto, topic) == {p: (RECORDS, None) for p in range(PARTITIONS)})

    # Both groups are live: listed, and described with their one member owning every partition.
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert {g: (listed[g].state, listed[g].is_simple_consumer_group) for g in ("ck-manual", "ck-auto")} == {
        "ck-manual": (ConsumerGroupState.STABLE, False),
        "ck-auto": (ConsumerGroupState.STABLE, False),
    }
    described = admin.describe_consumer_groups(["ck-manual"])["ck-manual"].result(TIMEOUT)
    assert (described.state, described.partition_assignor, described.is_simple_consumer_group) == (
        ConsumerGroupState.STABLE,
        "range",
        False,
    )
    (member,) = described.members
    assert member.client_id == "ck-manual-client" and member.member_id == manual.memberid()
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == list(range(PARTITIONS))

    def admin_offsets(group: str) -> dict[int, tuple[int, str]]:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT)
        return {tp.partition: (tp.offset, tp.metadata) for tp in result.topic_partitions if tp.topic == topic}

    assert admin_offsets("ck-manual") == {p: (o, f"m{p}") for p, o in MANUAL.items()}
    assert admin_offsets("ck-auto") == {p: (RECORDS, None) for p in range(PARTITIONS)}  # librdkafka shows "" as None
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups(["ck-manual"])["ck-manual"].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

    manual.close()
    auto.close()
    assert admin.describe_consumer_groups(["ck-manual"])["ck-manual"].result(TIMEOUT).state == ConsumerGroupState.EMPTY

    bp.restart()
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    listed = {g.group_id: g.state for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert {g: listed.get(g) for g in ("ck-manual", "ck-auto")} == {
        "ck-manual": ConsumerGroupState.EMPTY,
        "ck-auto": ConsumerGroupState.EMPTY,
    }
    assert admin_offsets("ck-manual") == {p: (o, f"m{p}") for p, o in MANUAL.items()}
    assert admin_offsets("ck-auto") == {p: (RECORDS, None) for p in range(PARTITIONS)}  # librdkafka shows "" as None
    again = ck_consumer(bp, "ck-manual")
    assert ck_committed(again, topic) == {p: (o, f"m{p}") for p, o in MANUAL.items()}
    # The group's next consumer resumes at the committed offsets.
    again.subscribe([topic])
    first: dict[int, int] = {}

    def resumed() -> bool:
        for msg in again.consume(100, 0.1):
            first.setdefault(msg.partition(), msg.offset())
        return len(first) == PARTITIONS

    wait_until(resumed, TIMEOUT, message="a record from every partition")
    assert first == MANUAL
    again.close()

    # An empty group's offsets can be altered by the admin client, and the group deleted.
    moved = [TopicPartition(topic, p, 5) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("ck-auto", moved)])["ck-auto"].result(TIMEOUT)
    assert admin_offsets("ck-auto") == {p: (5, None) for p in range(PARTITIONS)}
    assert admin.delete_consumer_groups(["ck-auto"])["ck-auto"].result(TIMEOUT) is None
    assert "ck-auto" not in {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert admin_offsets("ck-auto") == {}


# -- kafka-python ------------------------------------------------------------------------------


def kp_consumer(bp: BrokerProcess, group: str, **conf: Any) -> KafkaConsumer:
    settings = {"group_id": group, "client_id": f"{group}-client", "auto_offset_reset": "earliest", "enable_auto_commit": False}
    consumer = KafkaConsumer(bootstrap_servers=bp.bootstrap, **{**settings, **conf})
    # kafka-python 3.0.12 sometimes stops (no heartbeat, no OffsetFetch, every request answered)
    # when its first join is followed at once by the leader's rejoin for new topic metadata, a
    # sequence a 0 ms group.initial.rebalance.delay.ms makes likely. Knowing the topics before
    # subscribing makes the first assignment final.
    consumer.topics()
    return consumer


def kp_consume_all(consumer: KafkaConsumer) -> None:
    counts = dict.fromkeys(range(PARTITIONS), 0)

    def done() -> bool:
        for tp, msgs in consumer.poll(timeout_ms=100).items():
            counts[tp.partition] += len(msgs)
        return counts == ENDS

    wait_until(done, TIMEOUT, message="every record consumed")


def kp_committed(consumer: KafkaConsumer, topic: str) -> dict[int, tuple[int, str] | None]:
    out: dict[int, tuple[int, str] | None] = {}
    for p in range(PARTITIONS):
        committed = consumer.committed(KpTopicPartition(topic, p), metadata=True)
        out[p] = None if committed is None else (committed.offset, committed.metadata)
    return out


def test_kafka_python_commits_reads_lists_and_describes(broker_proc: Callable[..., BrokerProcess]) -> None:
    topic = "kp-offsets"
    bp = prepare(broker_proc, topic)

    manual = kp_consumer(bp, "kp-manual")
    manual.subscribe([topic])
    kp_consume_all(manual)
    manual.commit({KpTopicPartition(topic, p): KpOffsetAndMetadata(o, f"m{p}", -1) for p, o in MANUAL.items()})
    assert kp_committed(manual, topic) == {p: (o, f"m{p}") for p, o in MANUAL.items()}

    auto = kp_consumer(bp, "kp-auto", enable_auto_commit=True, auto_commit_interval_ms=100)
    auto.subscribe([topic])
    kp_consume_all(auto)
    wait_until(lambda: auto.poll(timeout_ms=100) == {} and kp_committed(auto, topic) == {p: (RECORDS, "") for p in range(PARTITIONS)})

    admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert {g: (listed[g]["protocol_type"], listed[g]["group_state"]) for g in ("kp-manual", "kp-auto")} == {
        "kp-manual": ("consumer", "Stable"),
        "kp-auto": ("consumer", "Stable"),
    }
    described = admin.describe_groups(["kp-manual"])["kp-manual"]
    assert (described["error"], described["group_state"], described["protocol_type"], described["protocol_data"]) == (
        None,
        "Stable",
        "consumer",
        "range",
    )
    (member,) = described["members"]
    assert member["client_id"] == "kp-manual-client"
    assert member["member_metadata"]["topics"] == [topic]
    assigned = member["member_assignment"]["assigned_partitions"]
    assert [(t["topic"], sorted(t["partitions"])) for t in assigned] == [(topic, list(range(PARTITIONS)))]

    def admin_offsets(group: str) -> dict[int, tuple[int, str]]:
        offsets = admin.list_group_offsets(group)[group]
        return {tp.partition: (om.offset, om.metadata) for tp, om in offsets.items() if tp.topic == topic}

    assert admin_offsets("kp-manual") == {p: (o, f"m{p}") for p, o in MANUAL.items()}
    assert admin_offsets("kp-auto") == {p: (RECORDS, "") for p in range(PARTITIONS)}
    assert admin.delete_groups(["kp-manual"]) == {"kp-manual": "NonEmptyGroupError"}
    subscribed = admin.delete_group_offsets("kp-manual", [KpTopicPartition(topic, 0)])
    assert subscribed == {KpTopicPartition(topic, 0): kerrors.GroupSubscribedToTopicError}

    manual.close()
    auto.close()
    assert admin.describe_groups(["kp-manual"])["kp-manual"]["group_state"] == "Empty"
    admin.close()

    bp.restart()
    admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    listed = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
    assert {g: listed.get(g) for g in ("kp-manual", "kp-auto")} == {"kp-manual": "Empty", "kp-auto": "Empty"}
    assert admin_offsets("kp-manual") == {p: (o, f"m{p}") for p, o in MANUAL.items()}
    again = kp_consumer(bp, "kp-auto")
    assert kp_committed(again, topic) == {p: (RECORDS, "") for p in range(PARTITIONS)}
    again.close()

    # An empty group's offsets can be altered and deleted (OffsetDelete), and the group deleted.
    altered = admin.alter_group_offsets("kp-auto", {KpTopicPartition(topic, p): KpOffsetAndMetadata(4, "x", -1) for p in range(PARTITIONS)})
    assert set(altered.values()) == {kerrors.NoError}
    assert admin.delete_group_offsets("kp-auto", [KpTopicPartition(topic, 0)]) == {KpTopicPartition(topic, 0): kerrors.NoError}
    assert admin_offsets("kp-auto") == {1: (4, "x"), 2: (4, "x")}
    assert admin.delete_groups(["kp-auto"]) == {"kp-auto": "OK"}
    assert "kp-auto" not in {g["group_id"] for g in admin.list_groups()}
    with pytest.raises(kerrors.GroupIdNotFoundError):
        admin.delete_group_offsets("kp-auto", [KpTopicPartition(topic, 1)])
    admin.close()


# -- aiokafka ----------------------------------------------------------------------------------


def test_aiokafka_commits_reads_lists_and_describes(broker_proc: Callable[..., BrokerProcess]) -> None:
    topic = "aio-offsets"
    bp = prepare(broker_proc, topic)
    tps = [aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)]

    def consumer(group: str, **conf: Any) -> aiokafka.AIOKafkaConsumer:
        settings = {"group_id": group, "client_id": f"{group}-client", "auto_offset_reset": "earliest", "enable_auto_commit": False}
        return aiokafka.AIOKafkaConsumer(bootstrap_servers=bp.bootstrap, **{**settings, **conf})

    async def consume_all(c: aiokafka.AIOKafkaConsumer) -> None:
        counts = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + TIMEOUT
        while counts != ENDS:
            assert time.monotonic() < deadline, counts
            for tp, msgs in (await c.getmany(timeout_ms=100)).items():
                counts[tp.partition] += len(msgs)

    async def committed(c: aiokafka.AIOKafkaConsumer) -> dict[int, int | None]:
        return {tp.partition: await c.committed(tp) for tp in tps}

    async def admin_offsets(admin: AIOKafkaAdminClient, group: str) -> dict[int, tuple[int, str]]:
        offsets = await admin.list_consumer_group_offsets(group)
        return {tp.partition: (om.offset, om.metadata) for tp, om in offsets.items() if tp.topic == topic}

    async def before_restart() -> None:
        manual = consumer("aio-manual")
        manual.subscribe([topic])
        await manual.start()
        auto = consumer("aio-auto", enable_auto_commit=True, auto_commit_interval_ms=100)
        auto.subscribe([topic])
        await auto.start()
        admin = AIOKafkaAdminClient(bootstrap_servers=bp.bootstrap)
        await admin.start()
        try:
            await consume_all(manual)
            await manual.commit({tps[p]: AioOffsetAndMetadata(o, f"m{p}") for p, o in MANUAL.items()})
            assert await committed(manual) == MANUAL
            await consume_all(auto)
            deadline = time.monotonic() + TIMEOUT
            while await committed(auto) != ENDS:
                assert time.monotonic() < deadline, await committed(auto)
                await auto.getmany(timeout_ms=100)

            listed = dict(await admin.list_consumer_groups())
            assert {g: listed.get(g) for g in ("aio-manual", "aio-auto")} == {"aio-manual": "consumer", "aio-auto": "consumer"}
            (response,) = await admin.describe_consumer_groups(["aio-manual"])
            # aiokafka returns the raw DescribeGroups response (v2 here: tuples).
            ((error, group_id, state, protocol_type, protocol, members),) = response.groups
            assert (error, group_id, state, protocol_type, protocol) == (
                0,
                "aio-manual",
                "Stable",
                "consumer",
                "roundrobin",
            )  # aiokafka's default
            ((member_id, client_id, _host, _metadata, assignment),) = members
            assert (member_id, client_id) == (manual._coordinator.member_id, "aio-manual-client")
            decoded = ConsumerProtocolMemberAssignment.decode(assignment)
            assert [(t, sorted(ps)) for t, ps in decoded.assignment] == [(topic, list(range(PARTITIONS)))]
            assert await admin_offsets(admin, "aio-manual") == {p: (o, f"m{p}") for p, o in MANUAL.items()}
            assert await admin_offsets(admin, "aio-auto") == {p: (RECORDS, "") for p in range(PARTITIONS)}
        finally:
            await manual.stop()
            await auto.stop()
            await admin.close()

    async def after_restart() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bp.bootstrap)
        await admin.start()
        manual = consumer("aio-manual")
        await manual.start()
        try:
            assert await admin_offsets(admin, "aio-manual") == {p: (o, f"m{p}") for p, o in MANUAL.items()}
            assert await admin_offsets(admin, "aio-auto") == {p: (RECORDS, "") for p in range(PARTITIONS)}
            (response,) = await admin.describe_consumer_groups(["aio-auto"])
            assert [(g[2], g[5]) for g in response.groups] == [("Empty", [])]
            assert await committed(manual) == MANUAL
        finally:
            await manual.stop()
            await admin.close()

    asyncio.run(before_restart())
    bp.restart()
    asyncio.run(after_restart())
