"""kafka_exporter's semantics, case by case, over the raw protocol (see broker/metrics/exporter.py).

Each case is what kafka_exporter (danielqsj/kafka_exporter, default flags) would export against
this broker: OffsetFetch for every partition of every topic, topics kept when some partition
has an offset other than -1, -1 for the others, sums as the exporter adds them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DeleteTopicsRequest

from tests.support import data as d
from tests.support import groups as g
from tests.support.coordinator import NONE, create_topic, serving
from tests.support.metrics import ascrape


def config(make_config: Callable[..., Any], **overrides: Any) -> Any:
    return make_config(metrics=True, metrics_port=0, **overrides)


async def produce(client: Any, topic: str, partition: int, n: int) -> None:
    resp = await client.request(d.produce(topic, partition, d.batch(n)))
    assert d.produce_result(resp).error_code == 0


async def test_partitions_without_commit_are_minus_one_and_sums_follow_the_exporter(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "t", 3)
        client = await served.ready()
        for p, n in ((0, 10), (1, 5), (2, 7)):
            await produce(client, "t", p, n)
        assert await g.commit(client, "grp", {("t", 0): 4, ("t", 1): 5}) == {("t", 0): NONE, ("t", 1): NONE}
        s = await ascrape(served.broker.metrics.address)
        series = s.series("kafka_consumergroup_current_offset", consumergroup="grp")
        assert {dict(k)["partition"]: v for k, v in series.items()} == {"0": 4, "1": 5, "2": -1}
        lags = s.series("kafka_consumergroup_lag", consumergroup="grp")
        assert {dict(k)["partition"]: v for k, v in lags.items()} == {"0": 6, "1": 0, "2": -1}
        assert s.value("kafka_consumergroup_lag_sum", consumergroup="grp", topic="t") == 6
        assert s.value("kafka_consumergroup_current_offset_sum", consumergroup="grp", topic="t") == 4 + 5 - 1
        assert s.value("kafka_consumergroup_members", consumergroup="grp") == 0  # a simple group: offsets only


async def test_only_topics_the_group_committed_to_are_exported(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "consumed", 1)
        create_topic(served.broker, "other", 2)
        client = await served.ready()
        await g.commit(client, "grp", {("consumed", 0): 0})
        await g.commit(client, "minus-one", {("other", 0): -1})  # an explicit -1 reads as "no offset"
        s = await ascrape(served.broker.metrics.address)
        assert {dict(k)["topic"] for k in s.series("kafka_consumergroup_current_offset")} == {"consumed"}
        assert s.series("kafka_consumergroup_lag_sum", consumergroup="minus-one") == {}
        assert s.value("kafka_consumergroup_members", consumergroup="minus-one") == 0  # listed all the same


async def test_a_commit_ahead_of_the_log_gives_a_negative_lag(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "t", 1)
        client = await served.ready()
        await produce(client, "t", 0, 3)
        await g.commit(client, "ahead", {("t", 0): 100})
        s = await ascrape(served.broker.metrics.address)
        assert s.value("kafka_consumergroup_lag", consumergroup="ahead", topic="t", partition="0") == 3 - 100
        assert s.value("kafka_consumergroup_lag_sum", consumergroup="ahead", topic="t") == 3 - 100


async def test_deleted_topics_leave_no_group_series(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "gone", 1)
        create_topic(served.broker, "kept", 1)
        client = await served.ready()
        await g.commit(client, "grp", {("gone", 0): 1, ("kept", 0): 0})
        resp = await client.request(DeleteTopicsRequest[4](topic_names=["gone"], timeout_ms=5000))
        assert resp.responses[0].error_code == 0
        s = await ascrape(served.broker.metrics.address)
        assert {dict(k)["topic"] for k in s.series("kafka_consumergroup_current_offset", consumergroup="grp")} == {"kept"}
        assert s.value("kafka_topic_partitions", topic="gone") is None


async def test_internal_topics_are_exported_as_sarama_lists_them(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        await served.ready()
        s = await ascrape(served.broker.metrics.address)
        assert s.value("kafka_topic_partitions", topic="__consumer_offsets") == 5
        for p in range(5):
            labels = {"topic": "__consumer_offsets", "partition": str(p)}
            assert s.value("kafka_topic_partition_leader", **labels) == 1
            assert s.value("kafka_topic_partition_replicas", **labels) == 1
            assert s.value("kafka_topic_partition_in_sync_replica", **labels) == 1
            assert s.value("kafka_topic_partition_leader_is_preferred", **labels) == 1
            assert s.value("kafka_topic_partition_under_replicated_partition", **labels) == 0


async def test_oldest_offset_is_the_log_start(make_config: Callable[..., Any]) -> None:
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "t", 1)
        client = await served.ready()
        await produce(client, "t", 0, 10)
        resp = await client.request(d.delete_records("t", 0, 6))
        assert resp.topics[0].partitions[0].error_code == 0
        s = await ascrape(served.broker.metrics.address)
        assert s.value("kafka_topic_partition_oldest_offset", topic="t", partition="0") == 6
        assert s.value("kafka_topic_partition_current_offset", topic="t", partition="0") == 10


async def test_pending_members_are_not_counted_and_odd_group_ids_are_escaped(make_config: Callable[..., Any]) -> None:
    odd = 'we"ird\\group\nid'
    async with serving(config(make_config)) as served:
        create_topic(served.broker, "t", 1)
        client = await served.ready()
        first = await g.join(client, odd)  # v9 without member id: MEMBER_ID_REQUIRED, a pending member
        assert first.error_code == 79
        s = await ascrape(served.broker.metrics.address)
        assert s.value("kafka_consumergroup_members", consumergroup=odd) == 0
        other = await served.connect()
        joined = await g.join(other, odd, first.member_id)
        assert joined.error_code == 0
        s = await ascrape(served.broker.metrics.address)
        assert s.value("kafka_consumergroup_members", consumergroup=odd) == 1
