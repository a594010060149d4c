"""KA-1 (assignor selection), KH-10/KH-12 (no record for a reconciled member; failed heartbeats
keep no one alive), KR-2's UNKNOWN state, RF-2/RF-5 (the records a join, a leave and a deletion
write, in Kafka's order, read back from `__consumer_offsets`) and RL-5 (an offsets-only group
replaced by a consumer group, across a restart)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from broker import Broker, Config
from storage import offsets_records as orec
from tests.support import groups as g
from tests.support.consumer_groups import (
    FENCED_MEMBER_EPOCH,
    NONE,
    CgMember,
    converge,
    describe_one,
    heartbeat,
)
from tests.support.coordinator import partition_of, serving
from tests.support.offsets_log import read_log
from tests.support.waiting import async_wait_until


def consumer_records(broker: Broker, group: str) -> list[tuple[int, str | None, bool]]:
    """(record type, member id, is tombstone) of `group`'s consumer-group records, in log order."""
    out = []
    for r in read_log(broker, partition_of(group, broker.config.offsets_partitions)):
        if r.key is None or r.key[:2] in (b"\x00\x00", b"\x00\x01", b"\x00\x02"):
            continue
        kind, gid, member = orec.parse_consumer_group_key(r.key)
        if gid == group:
            out.append((kind, member, r.value is None))
    return out


async def test_ka_1_assignor_named_by_most_members_else_the_default(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 4)
    client = await raw()
    a = CgMember(client, "g", ["t"], member_id="a")
    await a.join()
    assert (await describe_one(client, "g")).assignor_name == "uniform"  # nobody named one: the first configured
    b = CgMember(client, "g", ["t"], member_id="b", assignor="range")
    await b.join()
    assert (await describe_one(client, "g")).assignor_name == "range"
    c = CgMember(client, "g", ["t"], member_id="c", assignor="uniform")
    await c.join()
    d = CgMember(client, "g", ["t"], member_id="d", assignor="uniform")
    await d.join()
    assert (await describe_one(client, "g")).assignor_name == "uniform"


@pytest.mark.broker_config(group_consumer_assignors="range,uniform")
async def test_ka_1_default_is_the_first_configured(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 2)
    client = await raw()
    await CgMember(client, "g", ["t"]).join()
    assert (await describe_one(client, "g")).assignor_name == "range"


async def test_kh_10_a_reconciled_member_writes_nothing(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 2)
    client = await raw()
    a = CgMember(client, "g", ["t"])
    await a.join()
    await converge([a])
    log = broker.logs.get("__consumer_offsets", partition_of("g", broker.config.offsets_partitions))
    end = log.next_offset
    for _ in range(5):
        assert (await a.beat()).error_code == NONE
        assert (await a.beat(full=True)).error_code == NONE
    assert log.next_offset == end


@pytest.mark.broker_config(group_consumer_session_timeout_ms=300, group_consumer_heartbeat_interval_ms=50)
async def test_kh_12_failed_heartbeats_do_not_extend_the_session(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 1)
    client = await raw()
    a = CgMember(client, "g", ["t"], member_id="a")
    await a.join()

    async def fenced() -> bool:
        resp = await heartbeat(client, "g", "a", a.epoch + 5)  # always FENCED_MEMBER_EPOCH
        assert resp.error_code in (FENCED_MEMBER_EPOCH, 25)
        return (await describe_one(client, "g")).members == []

    await async_wait_until(fenced, timeout=10, message="the session expired although only failed heartbeats came")


async def test_kr_2_unknown_state_member_must_start_over(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 2)
    client = await raw()
    a = CgMember(client, "g", ["t"], member_id="a")
    await a.join()
    shard = broker.coordinator.shard_for("g")
    member = shard.consumer_groups["g"].members["a"]
    # A state this coordinator does not know (a newer Kafka wrote it): the record is replayed as UNKNOWN.
    value = orec.CurrentAssignmentValue(member.member_epoch, member.previous_member_epoch, 42, [], [])
    shard.write([(orec.consumer_group_key(8, "g", "a"), orec.consumer_current_assignment_value(value))])
    shard.write([(orec.consumer_group_key(3, "g"), orec.consumer_group_epoch_value(shard.consumer_groups["g"].group_epoch + 1))])
    tid = broker.topics.get("t").topic_id
    resp = await heartbeat(client, "g", "a", a.epoch, owned={tid: [0]})
    assert resp.error_code == FENCED_MEMBER_EPOCH
    resp = await heartbeat(client, "g", "a", a.epoch, owned={})
    assert resp.error_code == NONE


async def test_rf_5_records_of_a_join_a_leave_and_a_deletion(broker: Broker, raw: Any) -> None:
    broker.topics.create("t", 2)
    client = await raw()
    a = CgMember(client, "g", ["t"], member_id="a")
    await a.join()
    # KH-13's order as Kafka 4.4 writes it: MemberMetadata, GroupEpoch (with the subscription's metadata hash:
    # no PartitionMetadata record since Kafka 4.1), TargetMember, TargetMetadata, CurrentAssignment.
    assert consumer_records(broker, "g") == [
        (5, "a", False),
        (3, None, False),
        (7, "a", False),
        (6, None, False),
        (8, "a", False),
    ]
    b = CgMember(client, "g", ["t"], member_id="b")
    await b.join()
    await converge([a, b])
    mark = len(consumer_records(broker, "g"))
    await b.leave()
    # Removing a member: current assignment, target, metadata tombstones; then the epoch bump.
    assert consumer_records(broker, "g")[mark:] == [(8, "b", True), (7, "b", True), (5, "b", True), (3, None, False)]
    mark = len(consumer_records(broker, "g"))
    await a.leave()
    # The last member: the target's epoch follows the group's (Kafka 4.4), so the empty group is not Assigning.
    assert consumer_records(broker, "g")[mark:] == [(8, "a", True), (7, "a", True), (5, "a", True), (3, None, False), (6, None, False)]
    mark = len(consumer_records(broker, "g"))
    resp = await g.delete_groups(client, ["g"])
    assert resp.results[0].error_code == NONE
    assert consumer_records(broker, "g")[mark:] == [(6, None, True), (4, None, True), (3, None, True)]


async def test_rl_5_offsets_only_group_replaced_by_a_consumer_group(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        served.broker.topics.create("t", 2)
        client = await served.connect()
        assert await g.commit(client, "g", {("t", 0): 7}) == {("t", 0): NONE}  # a simple (offsets-only) group
        member = CgMember(client, "g", ["t"], member_id="a")
        assert (await member.join()).error_code == NONE
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        client = await served.connect()
        d = await describe_one(client, "g")
        assert (d.error_code, [m.member_id for m in d.members]) == (NONE, ["a"])
        assert await g.fetched_offsets(client, "g", {"t": [0]}) == {("t", 0): 7}
        listed = {x.group_id: x.group_type for x in (await g.list_groups(client)).groups}
        assert listed == {"g": "consumer"}


async def test_ko_1_transactional_commit_into_a_consumer_group(broker: Broker, raw: Any) -> None:
    """TxnOffsetCommit validates a consumer group's member epoch as OffsetCommit does (KO-1, TX-2),
    and never turns the group into a classic one."""
    from tests.support.txn import Producer

    broker.topics.create("t", 2)
    client = await raw()
    member = CgMember(client, "g", ["t"], member_id="a")
    await member.join()
    assert broker.txn is not None
    await async_wait_until(lambda: broker.txn.all_loaded, message="transaction coordinator loaded")  # type: ignore[union-attr]
    producer = Producer(client, "tx-848")
    assert (await producer.init()).error_code == 0
    assert await producer.add_offsets("g") == NONE
    ok = await producer.commit_offsets("g", {("t", 0): 5}, generation=member.epoch, member_id="a")
    assert ok == {("t", 0): NONE}
    stale = await producer.commit_offsets("g", {("t", 0): 5}, generation=member.epoch + 1, member_id="a")
    assert stale == {("t", 0): 22}  # ILLEGAL_GENERATION: STALE_MEMBER_EPOCH only from TxnOffsetCommit v6 (Kafka 4.4)
    # Without member (generation -1, no member id), as Kafka 4.4 accepts it into a non-empty group.
    assert await producer.commit_offsets("g", {("t", 1): 6}, generation=-1, member_id="") == {("t", 1): NONE}
    assert (await describe_one(client, "g")).error_code == NONE
    listed = {x.group_id: x.group_type for x in (await g.list_groups(client)).groups}
    assert listed == {"g": "consumer"}


async def test_rc_2_compacted_consumer_group_records_replay_to_the_same_group(make_config: Callable[..., Config]) -> None:
    """Members come and go (records and tombstones), a second group is deleted; once the log has
    compacted (tombstones dropped at once), a restart rebuilds the same group."""
    config = make_config(offsets_topic_segment_bytes=2048, offsets_compaction_interval_ms=50, offsets_delete_retention_ms=0)
    before: Any = None
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        broker = served.broker
        broker.topics.create("t", 6)
        client = await served.connect()
        stay = CgMember(client, "g", ["t"], member_id="stay", instance_id="i-stay")
        await stay.join()
        doomed = CgMember(client, "g-deleted", ["t"], member_id="d")
        await doomed.join()
        await doomed.leave()
        assert (await g.delete_groups(client, ["g-deleted"])).results[0].error_code == NONE
        for i in range(30):
            guest = CgMember(client, "g", ["t"], member_id=f"guest-{i}", assignor="range" if i % 2 else None)
            await guest.join()
            await converge([stay, guest])
            await guest.leave()
        await converge([stay])
        written = len(read_log(broker, partition_of("g", broker.config.offsets_partitions)))

        async def compacted() -> bool:
            return len(read_log(broker, partition_of("g", broker.config.offsets_partitions))) < written // 2

        await async_wait_until(compacted, timeout=20, message="__consumer_offsets to be compacted")
        before = await describe_one(client, "g")
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        client = await served.connect()
        assert await describe_one(client, "g") == before
        assert (await describe_one(client, "g-deleted")).error_code == 69
        stay.client = client
        assert (await stay.beat()).member_epoch == before.assignment_epoch


async def test_rf_2_regex_resolutions_stored_and_replayed_at_load(make_config: Callable[..., Config]) -> None:
    """Issue 26, regex subscriptions: a background resolution is written as a ConsumerGroupRegularExpression
    record and replayed at load, so a restarted broker has the group's resolved topics (and its epoch)
    without resolving again."""
    config = make_config()
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        served.broker.topics.create("orders-1", 2)
        served.broker.topics.create("orders-2", 1)
        client = await served.connect()
        member = CgMember(client, "g-rx", regex="orders-.*", member_id="a")
        assert (await member.join()).error_code == NONE

        async def owns_all() -> bool:
            assert (await member.beat()).error_code == NONE
            return sum(len(ps) for ps in member.owned.values()) == 3

        await async_wait_until(owns_all, timeout=10, message="the expression's topics assigned")
        group = served.broker.coordinator.shard_for("g-rx").consumer_groups["g-rx"]
        resolved, epoch = dict(group.resolved_regexes), group.group_epoch
        assert resolved["orders-.*"].topics == {"orders-1", "orders-2"}
    async with serving(config) as served:
        await asyncio.wait_for(served.broker.coordinator.loaded.wait(), 10)
        group = served.broker.coordinator.shard_for("g-rx").consumer_groups["g-rx"]
        assert dict(group.resolved_regexes) == resolved
        assert group.group_epoch == epoch
        client = await served.connect()
        d = await describe_one(client, "g-rx")
        assert [(m.member_id, m.subscribed_topic_regex) for m in d.members] == [("a", "orders-.*")]
        assert sum(len(tp.partitions) for tp in d.members[0].target_assignment.topic_partitions) == 3
