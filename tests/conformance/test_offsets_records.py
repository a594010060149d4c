"""`__consumer_offsets` record formats: spec rules RF-1..RF-6 and RC-1 (section 7).

The broker's offsets log is read in-process and every record is decoded with the suite's own
codecs (tests/support/offsets_log.py, written from Kafka's record schemas). Not covered: the
ConsumerGroup* record types 3-8 of RF-2/RF-5 (KIP-848 groups are not served yet).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    GROUP_SUBSCRIBED_TO_TOPIC,
    NONE,
    OFFSETS_TOPIC,
    create_topic,
    form_group,
    partition_of,
    ready_client,
    wait_state,
)
from tests.support.offsets_log import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_records,
    offset_records,
    read_all_logs,
)

CLIENT_HOST = "/127.0.0.1"


async def _busy_broker(broker: Broker, raw: Any) -> Any:
    """Exercise the record-writing paths: commits (with and without expiry), groups, group deletion."""
    create_topic(broker, "t", 3)
    client = await ready_client(raw)
    assert await g.commit(client, "rf-simple", {("t", 0): 1, ("t", 1): 2}) == {("t", 0): NONE, ("t", 1): NONE}
    assert await g.commit(client, "rf-expiring", {("t", 2): 3}, version=2, retention_ms=86_400_000) == {("t", 2): NONE}
    (m,) = await form_group(raw, "rf-group", instance_ids=["rf-instance"], session_timeout_ms=7000, rebalance_timeout_ms=9000)
    assert await g.commit(client, "rf-group", {("t", 0): 4}, generation=m.generation, member_id=m.member_id) == {("t", 0): NONE}
    await g.leave(m.client, "rf-group", [(m.member_id, "rf-instance")])
    await wait_state(client, "rf-group", "Empty")
    resp = await g.delete_groups(client, ["rf-group"])
    assert [r.error_code for r in resp.results] == [NONE]
    return client


async def test_RF_1_every_record_is_type_prefixed_key_and_versioned_value(broker: Broker, raw: Any) -> None:
    await _busy_broker(broker, raw)
    records = read_all_logs(broker)
    assert records
    for r in records:
        assert not r.is_control and not r.is_transactional and r.producer_id == -1
        assert r.key is not None
        key = decode_key(r.key)  # asserts the key struct consumes the key exactly
        if r.value is None:
            continue
        if isinstance(key, OffsetKey):
            decode_offset_value(r.value)  # asserts the value consumes the bytes exactly
        else:
            assert isinstance(key, GroupKey), key
            decode_group_value(r.value)
    # Each record sits in the partition of its group (CO-1).
    for r in records:
        assert r.partition == partition_of(decode_key(r.key).group, broker.config.offsets_partitions)  # type: ignore[union-attr, arg-type]


async def test_RF_2_offsets_use_key_type_1_and_groups_type_2(broker: Broker, raw: Any) -> None:
    await _busy_broker(broker, raw)
    types = {struct.unpack_from(">h", r.key)[0] for r in read_all_logs(broker) if r.key is not None}
    assert types == {1, 2}  # never the legacy type 0


async def test_RF_3_offset_values_are_v3_or_v1_with_expiry(broker: Broker, raw: Any) -> None:
    client = await _busy_broker(broker, raw)
    before = broker.clock.now_ms()
    assert await g.commit(client, "rf3", {("t", 0): 70}, leader_epoch=4, metadata="hello") == {("t", 0): NONE}
    assert await g.commit(client, "rf3", {("t", 1): 71}, version=4, retention_ms=1000, metadata=None) == {("t", 1): NONE}
    after = broker.clock.now_ms()
    values = {(k.topic, k.partition): v for k, v in offset_records(read_all_logs(broker), "rf3")}
    v3, v1 = values[("t", 0)], values[("t", 1)]
    assert v3 is not None and v1 is not None
    assert (v3.version, v3.offset, v3.leader_epoch, v3.metadata, v3.expire_timestamp) == (3, 70, 4, "hello", -1)
    assert before <= v3.commit_timestamp <= after
    assert (v1.version, v1.offset, v1.leader_epoch, v1.metadata) == (1, 71, -1, "")
    assert v1.expire_timestamp == v1.commit_timestamp + 1000
    expiring = offset_records(read_all_logs(broker), "rf-expiring")
    assert [v.version for _, v in expiring if v is not None] == [1]


async def test_RF_4_group_metadata_value_v3(broker: Broker, raw: Any) -> None:
    create_topic(broker, "t", 2)
    client = await ready_client(raw)
    before = broker.clock.now_ms()
    sub = g.subscription(["t"], b"ud")
    members = await form_group(
        raw,
        "rf4",
        2,
        protocols=[("range", sub), ("roundrobin", g.subscription(["t"], b"other"))],
        instance_ids=["static-a", None],
        session_timeout_ms=7000,
        rebalance_timeout_ms=9000,
        assignments=[b"as-0", b"as-1"],
    )
    after = broker.clock.now_ms()
    stable = [v for v in group_records(read_all_logs(broker), "rf4") if v is not None and v.members]
    value = stable[-1]
    leader = members[0].leader_id
    assert (value.version, value.protocol_type, value.generation, value.protocol, value.leader) == (
        3,
        "consumer",
        members[0].generation,
        "range",
        leader,
    )
    assert before <= value.current_state_timestamp <= after
    got = {m.member_id: m for m in value.members}
    assert set(got) == {m.member_id for m in members}
    for i, m in enumerate(members):
        stored = got[m.member_id]
        assert (stored.group_instance_id, stored.client_id, stored.client_host) == (m.instance_id, f"member-{i}", CLIENT_HOST)
        assert (stored.rebalance_timeout, stored.session_timeout) == (9000, 7000)
        assert stored.subscription == sub  # the member's metadata for the selected protocol
        assert stored.assignment == m.assignment
    # After the last member leaves: Empty, next generation, no protocol, no leader, no members.
    for m in members:
        await g.leave(m.client, "rf4", [(m.member_id, m.instance_id)])
    await wait_state(client, "rf4", "Empty")
    last = group_records(read_all_logs(broker), "rf4")[-1]
    assert last is not None
    assert (last.version, last.protocol_type, last.protocol, last.leader, last.members) == (3, "consumer", None, None, [])
    assert last.generation > value.generation
    assert last.current_state_timestamp >= value.current_state_timestamp


def _tail(broker: Broker, group: str) -> list[tuple[Any, bytes | None]]:
    records = read_all_logs(broker)
    return [(decode_key(r.key), r.value) for r in records if r.key is not None and getattr(decode_key(r.key), "group", None) == group]


async def test_RF_5_offset_deletion_writes_an_offset_key_tombstone(broker: Broker, raw: Any) -> None:
    create_topic(broker, "t", 3)
    client = await ready_client(raw)
    assert await g.commit(client, "rf5", {("t", 0): 1, ("t", 1): 2}) == {("t", 0): NONE, ("t", 1): NONE}
    resp = await g.delete_offsets(client, "rf5", {"t": [1]})
    assert resp.error_code == NONE
    assert _tail(broker, "rf5")[-1] == (OffsetKey(1, "rf5", "t", 1), None)


async def test_RF_5_group_deletion_writes_offset_then_group_tombstones(broker: Broker, raw: Any) -> None:
    create_topic(broker, "t", 3)
    client = await ready_client(raw)
    offsets = {("t", 0): 1, ("t", 2): 3}
    assert await g.commit(client, "rf5-group", offsets) == dict.fromkeys(offsets, NONE)
    assert [r.error_code for r in (await g.delete_groups(client, ["rf5-group"])).results] == [NONE]
    tail = _tail(broker, "rf5-group")
    assert [v for _, v in tail[-3:]] == [None, None, None]
    assert sorted(tail[-3:-1], key=lambda kv: kv[0].partition) == [
        (OffsetKey(1, "rf5-group", "t", 0), None),
        (OffsetKey(1, "rf5-group", "t", 2), None),
    ]
    assert tail[-1] == (GroupKey(2, "rf5-group"), None)


def _subscription(version: int, topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription at `version`: the v0 prefix plus the later fields."""
    out = g.subscription(topics, b"user", version=version)
    if version >= 1:  # OwnedPartitions [{Topic, Partitions[]}]
        out += struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 0)
    if version >= 2:  # GenerationId
        out += struct.pack(">i", 3)
    if version >= 3:  # RackId (nullable)
        out += struct.pack(">h", 4) + b"rack"
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_RF_6_subscriptions_of_every_version_are_read_with_the_v0_layout(broker: Broker, raw: Any, version: int) -> None:
    create_topic(broker, "t", 1)
    create_topic(broker, "u", 1)
    client = await ready_client(raw)
    (m,) = await form_group(raw, "rf6", protocols=[("range", _subscription(version, ["u"]))])
    offsets = {("t", 0): 1, ("u", 0): 2}
    assert await g.commit(client, "rf6", offsets, generation=m.generation, member_id=m.member_id) == dict.fromkeys(offsets, NONE)
    resp = await g.delete_offsets(client, "rf6", {"t": [0], "u": [0]})
    result = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
    assert result == {("t", 0): NONE, ("u", 0): GROUP_SUBSCRIBED_TO_TOPIC}


async def test_RC_1_offsets_topic_is_internal_compacted_and_uncompressed(broker: Broker, raw: Any) -> None:
    client = await _busy_broker(broker, raw)
    meta = await client.request(MetadataRequest[1](topics=[OFFSETS_TOPIC]))
    (topic,) = meta.topics
    assert (topic.error_code, topic.is_internal) == (NONE, True)
    assert len(topic.partitions) == broker.config.offsets_partitions
    # DescribeConfigs is being built on another branch: the topic configs are read in-process.
    configs = broker.topics.get(OFFSETS_TOPIC).configs  # type: ignore[union-attr]
    assert configs["cleanup.policy"] == "compact"
    assert configs["compression.type"] == "producer"
    assert configs["segment.bytes"] == str(broker.config.offsets_topic_segment_bytes)
    # offsets.topic.compression.codec defaults to none: the coordinator's batches are uncompressed.
    for p in range(broker.config.offsets_partitions):
        log = broker.logs.get(OFFSETS_TOPIC, p)
        for buf, pos, _ in log.iter_batches():
            attributes = struct.unpack_from(">h", buf, pos + 21)[0]
            assert attributes & 0x07 == 0
