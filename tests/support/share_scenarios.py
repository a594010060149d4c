"""Request-level share-group scenarios (KIP-932) run against one broker over the raw protocol,
each answer written down as a normalized line. tests/differential/test_reference_share_groups.py
runs every scenario on Apache Kafka 4.4 and on kaflet and compares the lines one by one: every
share API (heartbeat, describe, fetch, acknowledge, the five share-state APIs, the three offsets
APIs), their error paths and bad inputs, and the share configs of the GROUP resource.

Names and ids differ between the two brokers: each scenario uses fresh names and replaces them
(and every UUID) with placeholders; records are written down as (offset, key, value)."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetDeleteRequest, SyncGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from protocol import records as r
from protocol.kip848 import ConsumerGroupHeartbeatRequest
from protocol.kip932 import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupStateRequest,
    DescribeShareGroupOffsetsRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ShareGroupDescribeRequest,
    WriteShareGroupStateRequest,
)
from tests.support import groups as g
from tests.support import share as s
from tests.support.raw_client import RawClient

Lines = list[tuple[str, str]]
_UUID = re.compile(r"UUID\('[0-9a-f-]+'\)")


class Recorder:
    """Answers written down under a step name, with this run's names replaced by placeholders."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.lines: Lines = []

    def add(self, step: str, answer: Any) -> None:
        text = answer if isinstance(answer, str) else _describe(answer)
        for real, placeholder in sorted(self.names.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(real, placeholder)
        self.lines.append((step, _UUID.sub("UUID", text)))


def _describe(answer: Any) -> str:
    if type(answer).__name__ == "ShareFetchResponse":
        return _fetch_line(answer)
    return repr(answer)


def _fetch_line(resp: Any) -> str:
    """A ShareFetch answer with its records decoded (the stored batches carry each broker's own
    partition leader epoch and CRC)."""
    out = [f"error={resp.error_code}/{resp.error_message} lock={resp.acquisition_lock_timeout_ms}"]
    for t in sorted(resp.responses, key=lambda t: str(t.topic_id)):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            data = p.records or b""
            recs = [
                (rec.offset, rec.key, rec.value)
                for pos, h in r.iter_batches(data)
                if not h.attributes & r.CONTROL_BIT
                for rec in r.iter_all_records(data, pos, h)
            ]
            acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
            out.append(
                f"p{p.partition_index} error={p.error_code}/{p.error_message} ack={p.acknowledge_error_code}/"
                f"{p.acknowledge_error_message} leader=({p.current_leader.leader_id},{p.current_leader.leader_epoch}) "
                f"acquired={acquired} records={recs}"
            )
    return " | ".join(out)


async def _until(check: Callable[[], Awaitable[Any]], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def _joined(m: s.ShareMember, topics: list[str], partitions: int) -> Any:
    """Heartbeat until `partitions` partitions are assigned; the last answer."""
    first = await m.heartbeat(topics)
    assert first.error_code == 0, first

    async def assigned() -> Any:
        resp = await m.heartbeat()
        return resp if sum(len(ps) for ps in m.assignment.values()) >= partitions else None

    return first, await _until(assigned)


async def _topic(client: RawClient, name: str, partitions: int = 1) -> uuid.UUID:
    """A new topic that the group and share coordinators already know: Kafka's coordinators learn
    of a topic from the metadata log a little after CreateTopics answers, and a group that
    subscribes before then is rebalanced once more when they do. A probe group's assignment
    (made from the coordinator's metadata) shows they know it."""
    topic_id = await s.create_topic(client, name, partitions)
    probe = s.ShareMember(client, _fresh("probe"))
    await _joined(probe, [name], partitions)
    await probe.leave()
    return topic_id


_names = {"run": uuid.uuid4().hex[:8], "n": 0}


def same_names(run: str) -> None:
    """The names `_fresh` gives from here on: the same sequence after each call with the same `run`
    (a scenario run on two brokers names its groups alike, so that answers whose order follows
    the groups' coordinator partitions compare)."""
    _names.update(run=run, n=0)


def _fresh(prefix: str) -> str:
    _names["n"] += 1
    return f"{prefix}-{_names['run']}{_names['n']:02d}"


# -- ShareGroupHeartbeat and ShareGroupDescribe ---------------------------------------------------


async def heartbeat_scenario(client: RawClient) -> Lines:
    topic, group, member = _fresh("st"), _fresh("g"), s.new_member_id()
    rec = Recorder({topic: "T", group: "G", member: "M"})
    await _topic(client, topic, 2)
    m = s.ShareMember(client, group, member)
    first, last = await _joined(m, [topic], 2)
    rec.add("join", first)
    rec.add("assigned", last)
    rec.add("steady", await m.heartbeat())
    rec.add("describe", await s.describe(client, group, "nope", "", include_ops=True))
    hb = s.heartbeat_request
    for step, request in [
        ("join-without-topics", hb(group, "m2", 0, None)),
        ("empty-member", hb(group, "", 0, [topic])),
        ("blank-member", hb(group, " ", 0, [topic])),
        ("long-member", hb(group, "x" * 37, 0, [topic])),
        ("epoch-minus-2", hb(group, "m3", -2, [topic])),
        ("unknown-member", hb(group, "m4", 5, None)),
        ("epoch-too-high", hb(group, member, 99, None)),
        ("blank-group", hb(" ", "m5", 0, [topic])),
        ("leave-unknown-group", hb("nogroup", "m5", -1, None)),
        ("unknown-group", hb("nogroup", "m5", 1, None)),
        ("blank-rack", hb(group, "m6", 0, [topic], rack="")),
        ("subscribe-nothing", hb(group, member, m.epoch, [])),
    ]:
        rec.add(step, await client.request(request))
    rec.add("describe-unsubscribed", await s.describe(client, group))
    rec.add("leave", await client.request(hb(group, member, -1, None)))
    rec.add("describe-after-leave", await s.describe(client, group))
    return rec.lines


# -- ShareFetch and ShareAcknowledge --------------------------------------------------------------


async def fetch_scenario(client: RawClient) -> Lines:
    topic, group, member = _fresh("sf"), _fresh("g"), s.new_member_id()
    rec = Recorder({topic: "T", group: "G", member: "M"})
    topic_id = await _topic(client, topic)
    await s.set_group_configs(client, group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "3000"})
    for batch in range(3):
        await s.produce(client, topic, [b"b%d-%d" % (batch, i) for i in range(4)], timestamp_ms=1_700_000_000_000)
    m = s.ShareMember(client, group, member)
    await _joined(m, [topic], 1)
    tp = (topic_id, 0)
    A, REL, REJ, REN = s.ACCEPT, s.RELEASE, s.REJECT, s.RENEW
    fetch, ack = s.fetch_request, s.ack_request
    steps: list[tuple[str, Any]] = [
        ("open", fetch(group, member, 0, {tp: []}, max_records=5, batch_size=2, max_wait_ms=500)),
        ("fetch-accepting-0-1", fetch(group, member, 1, {tp: [(0, 1, [A])]}, max_records=5, batch_size=2, max_wait_ms=500)),
        ("release-2", ack(group, member, 2, {tp: [(2, 2, [REL])]}, version=1)),
        ("reject-3", ack(group, member, 3, {tp: [(3, 3, [REJ])]}, version=1)),
        ("unacquired", ack(group, member, 4, {tp: [(20, 21, [A])]}, version=1)),
        ("overlapping", ack(group, member, 5, {tp: [(4, 5, [A]), (4, 6, [A])]}, version=1)),
        ("backwards", ack(group, member, 6, {tp: [(6, 6, [A]), (4, 4, [A])]}, version=1)),
        ("unknown-type", ack(group, member, 7, {tp: [(4, 4, [7])]}, version=1)),
        ("types-mismatch", ack(group, member, 8, {tp: [(4, 6, [A, A])]}, version=1)),
        ("renew-v1", ack(group, member, 9, {tp: [(4, 4, [REN])]}, version=1)),
        ("unknown-topic", ack(group, member, 10, {(uuid.uuid4(), 0): [(4, 4, [A])]}, version=1)),
        ("unknown-partition", ack(group, member, 11, {(topic_id, 7): [(4, 4, [A])]}, version=1)),
        ("stale-epoch", ack(group, member, 3, {tp: [(4, 4, [A])]}, version=1)),
        ("epoch-0", ack(group, member, 0, {tp: [(4, 4, [A])]}, version=1)),
        ("past-acquired", ack(group, member, 12, {tp: [(4, 40, [A])]}, version=1)),
        ("renew-v2-without-flag", ack(group, member, 13, {tp: [(4, 4, [REN])]}, renew=False)),
        ("renew-v2", ack(group, member, 14, {tp: [(4, 4, [REN])]})),
        ("below-start", ack(group, member, 15, {tp: [(0, 0, [A])]})),
        ("fetch-more", fetch(group, member, 16, {}, max_records=10, batch_size=10, max_wait_ms=500)),
        ("bad-epoch", fetch(group, member, 99, {})),
    ]
    for step, request in steps:
        rec.add(step, await client.request(request))
    # all but the last batch accepted, its lock runs out (3 s): a parked fetch is answered with it
    rec.add("accept-all-but-one-batch", await client.request(fetch(group, member, 17, {tp: [(2, 2, [A]), (4, 7, [A])]}, max_records=1)))
    timed_out = await client.request(fetch(group, member, 18, {}, max_records=20, batch_size=20, max_wait_ms=10000), timeout=20)
    rec.add("after-lock-timeout", timed_out)
    acquired = [(a, b) for ranges in s.acquired(timed_out).values() for a, b, _ in ranges]
    rec.add(
        "accept-all",
        await client.request(fetch(group, member, 19, {tp: [(a, b, [A]) for a, b in acquired]}, max_records=20, max_wait_ms=200)),
    )
    rec.add("nothing-left", await client.request(fetch(group, member, 20, {}, max_records=20, max_wait_ms=200)))
    rec.add("close", await client.request(fetch(group, member, -1, {})))
    rec.add("after-close", await client.request(fetch(group, member, 3, {})))
    other = s.new_member_id()
    rec.names[other] = "O"
    bare = {"max_wait_ms": 0, "max_bytes": 1000, "max_records": 1, "batch_size": 1}
    rec.add("null-member", await client.request(fetch(group, None, 0, {}, **bare)))
    rec.add("null-group", await client.request(fetch(None, member, 0, {}, **bare)))
    rec.add("unknown-topic-id", await client.request(fetch(group, other, 0, {(uuid.uuid4(), 0): []}, **bare)))
    rec.add("acks-on-open", await client.request(fetch(group, other, 0, {tp: [(0, 0, [A])]}, **bare)))
    rec.add("unknown-partition", await client.request(fetch(group, other, 0, {(topic_id, 9): []}, **bare)))
    rec.add("renew-fetch-v2", await client.request(_renew_fetch(group, other, 1, tp)))
    return rec.lines


def _renew_fetch(group: str, member: str, epoch: int, tp: tuple[uuid.UUID, int]) -> Any:
    request = s.fetch_request(group, member, epoch, {tp: [(0, 0, [s.RENEW])]}, version=2, max_wait_ms=0)
    request.is_renew_ack = True
    request.max_wait_ms = 0
    return request


# -- the share coordinator's APIs ----------------------------------------------------------------

_I, _R, _W = InitializeShareGroupStateRequest, ReadShareGroupStateRequest, WriteShareGroupStateRequest
_D, _S = DeleteShareGroupStateRequest, ReadShareGroupStateSummaryRequest


def _init(group: str, topic_id: uuid.UUID, p: int, state_epoch: int, start: int) -> Any:
    part = _I.InitializeStateData.PartitionData(partition=p, state_epoch=state_epoch, start_offset=start)
    return _I(version=0, group_id=group, topics=[_I.InitializeStateData(topic_id=topic_id, partitions=[part])])


def _read(group: str, topic_id: uuid.UUID, p: int, leader_epoch: int) -> Any:
    part = _R.ReadStateData.PartitionData(partition=p, leader_epoch=leader_epoch)
    return _R(version=0, group_id=group, topics=[_R.ReadStateData(topic_id=topic_id, partitions=[part])])


def _summary(group: str, topic_id: uuid.UUID, p: int, leader_epoch: int, version: int = 1) -> Any:
    part = _S.ReadStateSummaryData.PartitionData(partition=p, leader_epoch=leader_epoch)
    return _S(version=version, group_id=group, topics=[_S.ReadStateSummaryData(topic_id=topic_id, partitions=[part])])


def _delete(group: str, topic_id: uuid.UUID, p: int) -> Any:
    return _D(
        version=0,
        group_id=group,
        topics=[_D.DeleteStateData(topic_id=topic_id, partitions=[_D.DeleteStateData.PartitionData(partition=p)])],
    )


def _write(
    group: str,
    topic_id: uuid.UUID,
    p: int,
    state_epoch: int,
    leader_epoch: int,
    start: int,
    batches: list[tuple[int, int, int, int]],
    version: int = 1,
) -> Any:
    wp = _W.WriteStateData.PartitionData
    extra = {"delivery_complete_count": 2} if version >= 1 else {}
    part = wp(
        partition=p,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start,
        state_batches=[wp.StateBatch(first_offset=a, last_offset=b, delivery_state=st, delivery_count=n) for a, b, st, n in batches],
        **extra,
    )
    return _W(version=version, group_id=group, topics=[_W.WriteStateData(topic_id=topic_id, partitions=[part])])


async def state_scenario(client: RawClient) -> Lines:
    topic, group = _fresh("ss"), _fresh("sg")
    rec = Recorder({topic: "T", group: "G"})
    tid = await _topic(client, topic, 2)
    steps = [
        ("read-before", _read(group, tid, 0, 0)),
        ("summary-before", _summary(group, tid, 0, 0)),
        ("write-before", _write(group, tid, 0, 0, 0, 0, [])),
        ("init", _init(group, tid, 0, 0, 0)),
        ("read", _read(group, tid, 0, 0)),
        ("write", _write(group, tid, 0, 0, 1, 5, [(5, 6, 2, 1), (7, 7, 0, 2)])),
        ("read-older-leader", _read(group, tid, 0, 0)),
        ("read-leader-1", _read(group, tid, 0, 1)),
        ("read-newer-leader", _read(group, tid, 0, 3)),
        ("read-leader-minus-1", _read(group, tid, 0, -1)),
        ("summary-v0", _summary(group, tid, 0, 1, version=0)),
        ("summary-v1", _summary(group, tid, 0, 1)),
        ("write-negative-state-epoch", _write(group, tid, 0, -1, 3, 8, [])),
        ("write-older-leader", _write(group, tid, 0, 0, 1, 8, [])),
        ("write-v0", _write(group, tid, 0, 0, 3, 8, [(8, 8, 4, 3)], version=0)),
        ("read-after-v0", _read(group, tid, 0, 3)),
        ("init-same-state-epoch", _init(group, tid, 0, 0, 10)),
        ("init-new-state-epoch", _init(group, tid, 0, 1, 10)),
        ("read-after-init", _read(group, tid, 0, 3)),
        ("init-older-state-epoch", _init(group, tid, 0, 0, 11)),
        ("write-after-init", _write(group, tid, 0, 1, 4, 12, [(12, 13, 2, 1)])),
        ("read-after-write", _read(group, tid, 0, 4)),
        ("delete", _delete(group, tid, 0)),
        ("read-after-delete", _read(group, tid, 0, 4)),
        ("delete-again", _delete(group, tid, 0)),
        ("empty-group", _read("", tid, 0, 0)),
        ("unknown-topic", _read(group, uuid.uuid4(), 0, 0)),
        ("init-negative-start", _init(group, tid, 1, 0, -5)),
        ("read-partition-1", _read(group, tid, 1, 0)),
        ("write-backwards-batch", _write(group, tid, 1, 0, 0, 0, [(5, 3, 2, 1)])),
    ]
    for step, request in steps:
        rec.add(step, await client.request(request))
    # FindCoordinator of share keys (v6): the share coordinator of group:topicId:partition
    from broker.share.coordinator.service import kafka_uuid

    rec.names[kafka_uuid(tid)] = "TID"
    good = f"{group}:{kafka_uuid(tid)}:0"
    keys = [
        good,
        f"a:b:{kafka_uuid(tid)}:1",
        f"{good}:",
        f"{group}:{kafka_uuid(tid)}",
        f"{group}:nope:0",
        f"{group}:{kafka_uuid(tid)}:x",
        f" :{kafka_uuid(tid)}:0",
    ]
    found = await client.request(FindCoordinatorRequest[6](key_type=2, coordinator_keys=keys))
    rec.add(
        "find-share-coordinators", repr([(c.key, c.error_code, c.node_id if c.node_id < 0 else "node", c.host) for c in found.coordinators])
    )
    older = await client.request(FindCoordinatorRequest[5](key_type=2, coordinator_keys=[good]))
    rec.add("find-share-coordinator-v5", repr([(c.error_code, c.node_id) for c in older.coordinators]))
    return rec.lines


# -- admin: offsets, ListGroups, DescribeGroups, DeleteGroups, collisions, configs ------------------


async def admin_scenario(client: RawClient, connect: Callable[[], Awaitable[RawClient]]) -> Lines:
    topic, group, classic, member = _fresh("so"), _fresh("g"), _fresh("c"), s.new_member_id()
    rec = Recorder({topic: "T", group: "G", classic: "CG", member: "M"})
    await _topic(client, topic, 2)
    await s.produce(client, topic, [b"v%d" % i for i in range(5)], 0)
    await s.produce(client, topic, [b"v%d" % i for i in range(3)], 1)
    m = s.ShareMember(client, group, member)
    await _joined(m, [topic], 2)
    mine = {group, "new-" + group}
    listed = await client.request(ListGroupsRequest[5](states_filter=[], types_filter=["share"]))
    rec.add("list-share", [(x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed.groups if x.group_id in mine])
    listed = await client.request(ListGroupsRequest[5](states_filter=["stable"], types_filter=[]))
    rec.add("list-stable", [(x.group_id, x.group_state, x.group_type) for x in listed.groups if x.group_id in mine])
    rec.add("describe-groups-v5", await client.request(DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False)))
    rec.add("describe-groups-v6", await client.request(DescribeGroupsRequest[6](groups=[group], include_authorized_operations=False)))
    dg = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    dt = dg.DescribeShareGroupOffsetsRequestTopic
    rec.add("describe-offsets", await client.request(DescribeShareGroupOffsetsRequest(version=1, groups=[dg(group_id=group, topics=None)])))
    rec.add(
        "describe-offsets-v0", await client.request(DescribeShareGroupOffsetsRequest(version=0, groups=[dg(group_id=group, topics=None)]))
    )
    # (a partition the topic does not have is left out: Kafka 4.4 never answers that request)
    for step, topics in [
        ("describe-offsets-some", [dt(topic_name=topic, partitions=[0, 1])]),
        ("describe-offsets-no-topic", [dt(topic_name="nope", partitions=[0])]),
        ("describe-offsets-empty", []),
    ]:
        rec.add(step, await client.request(DescribeShareGroupOffsetsRequest(version=1, groups=[dg(group_id=group, topics=topics)])))
    unknown = dg(group_id="unknown-g", topics=[dt(topic_name=topic, partitions=[0])])
    rec.add("describe-offsets-unknown-group", await client.request(DescribeShareGroupOffsetsRequest(version=1, groups=[unknown])))
    at = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    ap = at.AlterShareGroupOffsetsRequestPartition
    xt = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    alter_0 = AlterShareGroupOffsetsRequest(
        version=0, group_id=group, topics=[at(topic_name=topic, partitions=[ap(partition_index=0, start_offset=2)])]
    )
    rec.add("alter-not-empty", await client.request(alter_0))
    rec.add(
        "delete-offsets-not-empty",
        await client.request(DeleteShareGroupOffsetsRequest(version=0, group_id=group, topics=[xt(topic_name=topic)])),
    )
    rec.add("delete-group-not-empty", await client.request(DeleteGroupsRequest[2](groups_names=[group])))
    # group ids of another type
    jp = JoinGroupRequest.JoinGroupRequestProtocol
    join = JoinGroupRequest[9](
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[jp(name="range", metadata=b"")],
        reason=None,
    )
    rec.add("join-group", await client.request(join))
    sync = SyncGroupRequest[5](
        group_id=group,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[],
    )
    rec.add("sync-group", await client.request(sync))
    rec.add("heartbeat", await client.request(HeartbeatRequest[4](group_id=group, generation_id=1, member_id="m", group_instance_id=None)))
    leave = LeaveGroupRequest[5](
        group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason=None)]
    )
    rec.add("leave-group", await client.request(leave))
    rec.add("offset-commit", await client.request(g.commit_request(group, {(topic, 0): 1})))
    rec.add("offset-fetch-v8", await client.request(g.fetch_request(group, None)))
    rec.add("offset-fetch-v7", await client.request(g.fetch_request(group, None, version=7)))
    odt = OffsetDeleteRequest.OffsetDeleteRequestTopic
    offset_delete = OffsetDeleteRequest[0](
        group_id=group, topics=[odt(name=topic, partitions=[odt.OffsetDeleteRequestPartition(partition_index=0)])]
    )
    rec.add("offset-delete", await client.request(offset_delete))
    cghb = ConsumerGroupHeartbeatRequest(
        version=1,
        group_id=group,
        member_id=member,
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=10000,
        subscribed_topic_names=[topic],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )
    rec.add("consumer-heartbeat", await client.request(cghb))
    await g.commit(client, classic, {(topic, 0): 1})
    rec.add("share-heartbeat-on-classic", await client.request(s.heartbeat_request(classic, member, 0, [topic])))
    rec.add(
        "share-describe-on-classic",
        await client.request(ShareGroupDescribeRequest(version=1, group_ids=[classic], include_authorized_operations=False)),
    )
    # the group empties: offsets can be altered and deleted, the group deleted
    await m.leave()
    alter = AlterShareGroupOffsetsRequest(
        version=0,
        group_id=group,
        topics=[
            at(topic_name=topic, partitions=[ap(partition_index=0, start_offset=2), ap(partition_index=9, start_offset=0)]),
            at(topic_name="nope", partitions=[ap(partition_index=0, start_offset=0)]),
        ],
    )
    rec.add("alter", await client.request(alter))
    rec.add(
        "describe-after-alter", await client.request(DescribeShareGroupOffsetsRequest(version=1, groups=[dg(group_id=group, topics=None)]))
    )
    delete = DeleteShareGroupOffsetsRequest(version=0, group_id=group, topics=[xt(topic_name=topic), xt(topic_name="nope")])
    rec.add("delete-offsets", await client.request(delete))
    rec.add(
        "delete-offsets-again",
        await client.request(DeleteShareGroupOffsetsRequest(version=0, group_id=group, topics=[xt(topic_name=topic)])),
    )
    rec.add(
        "describe-after-delete", await client.request(DescribeShareGroupOffsetsRequest(version=1, groups=[dg(group_id=group, topics=None)]))
    )
    alter_new = AlterShareGroupOffsetsRequest(
        version=0, group_id="new-" + group, topics=[at(topic_name=topic, partitions=[ap(partition_index=1, start_offset=1)])]
    )
    rec.add("alter-creates-group", await client.request(alter_new))
    listed = await client.request(ListGroupsRequest[5](states_filter=[], types_filter=["share"]))
    rec.add("list-after", sorted((x.group_id, x.group_state) for x in listed.groups if x.group_id in mine))
    deleted = await client.request(DeleteGroupsRequest[2](groups_names=[group, "new-" + group, "nope-g"]))
    rec.add("delete-groups", sorted((x.group_id, x.error_code) for x in deleted.results))  # Kafka answers in hash order
    rec.add(
        "delete-offsets-unknown",
        await client.request(DeleteShareGroupOffsetsRequest(version=0, group_id="unknown-zz", topics=[xt(topic_name=topic)])),
    )
    alter_classic = AlterShareGroupOffsetsRequest(
        version=0, group_id=classic, topics=[at(topic_name=topic, partitions=[ap(partition_index=0, start_offset=2)])]
    )
    rec.add("alter-on-classic", await client.request(alter_classic))
    return rec.lines


_IR = IncrementalAlterConfigsRequest.AlterConfigsResource
# kaflet's own defaults, set in the reference broker's properties file (a static broker config there)
KAFLET_DEFAULTS = ("share.heartbeat.interval.ms", "share.assignment.interval.ms")
# Group configs kaflet does not serve (docs/decisions.md): dead-letter queues (KIP-1191).
NOT_SERVED_CONFIGS = ("errors.deadletterqueue.",)


async def config_scenario(client: RawClient) -> Lines:
    group = _fresh("cfg")
    rec = Recorder({group: "G"})
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=group, configuration_keys=None)

    async def described(step: str) -> None:
        resp = await client.request(DescribeConfigsRequest[4](resources=[resource], include_synonyms=True, include_documentation=False))
        for x in sorted(resp.results[0].configs, key=lambda x: x.name):
            if x.name.startswith("share.") and x.name not in KAFLET_DEFAULTS:
                synonyms = [(y.name, y.value, y.source) for y in x.synonyms]
                rec.add(f"{step} {x.name}", repr((x.value, x.read_only, x.config_source, x.is_sensitive, synonyms, x.config_type)))

    await described("describe")
    for ops in [
        [("share.record.lock.duration.ms", 0, "500")],
        [("share.record.lock.duration.ms", 0, "999999999")],
        [("share.record.lock.duration.ms", 0, "abc")],
        [("share.record.lock.duration.ms", 0, "15000")],
        [("share.delivery.count.limit", 0, "1")],
        [("share.delivery.count.limit", 0, "11")],
        [("share.delivery.count.limit", 0, "3")],
        [("share.partition.max.record.locks", 0, "50")],
        [("share.partition.max.record.locks", 0, "20000")],
        [("share.partition.max.record.locks", 0, "200")],
        [("share.session.timeout.ms", 0, "1000")],
        [("share.session.timeout.ms", 0, "100000")],
        [("share.session.timeout.ms", 0, "7000")],
        [("share.heartbeat.interval.ms", 0, "1")],
        [("share.heartbeat.interval.ms", 0, "100000")],
        [("share.heartbeat.interval.ms", 0, "8000")],
        [("share.heartbeat.interval.ms", 0, "6000"), ("share.session.timeout.ms", 0, "6000")],
        [("share.auto.offset.reset", 0, "earliest")],
        [("share.auto.offset.reset", 0, "bogus")],
        [("share.auto.offset.reset", 0, "by_duration:PT1H")],
        [("share.auto.offset.reset", 0, "by_duration:-PT1H")],
        [("share.auto.offset.reset", 0, "by_duration:xx")],
        [("share.auto.offset.reset", 0, "EARLIEST")],
        [("share.isolation.level", 0, "read_committed")],
        [("share.isolation.level", 0, "READ_COMMITTED")],
        [("share.isolation.level", 0, "x")],
        [("share.renew.acknowledge.enable", 0, "false")],
        [("share.renew.acknowledge.enable", 0, "maybe")],
        [("share.assignment.interval.ms", 0, "0")],
        [("share.assignment.interval.ms", 0, "-1")],
        [("share.assignor.offload.enable", 0, "false")],
        [("share.record.lock.duration.ms", 1, None)],
    ]:
        request = IncrementalAlterConfigsRequest[1](
            resources=[
                _IR(
                    resource_type=32,
                    resource_name=group,
                    configs=[_IR.AlterableConfig(name=c, config_operation=op, value=v) for c, op, v in ops],
                )
            ],
            validate_only=False,
        )
        resp = await client.request(request)
        rec.add(repr(ops), repr([(x.error_code, x.error_message) for x in resp.responses]))
    await described("after")
    return rec.lines
