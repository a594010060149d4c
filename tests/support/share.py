"""Share groups (KIP-932) over the raw protocol: a member that heartbeats and fetches, ShareFetch
and ShareAcknowledge builders, topics, records and group configs. Used by the conformance tests
(tests/conformance/share/) and the request-level differential against Kafka 4.4."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.metadata import MetadataRequest

from protocol import records as r
from protocol.kip932 import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.support import data as d
from tests.support.raw_client import RawClient

# The bounds every share test broker runs with (kaflet's and Kafka's alike: SHARE_TEST_BOUNDS in
# tests/support/kafka_reference.py), so a group can set short locks and session timeouts.
SHARE_BOUNDS: dict[str, Any] = {"group_share_min_record_lock_duration_ms": 1000, "group_share_min_session_timeout_ms": 6000}

GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
FINAL_EPOCH = -1

_FT = ShareFetchRequest.FetchTopic
_FP = _FT.FetchPartition
_FAB = _FP.AcknowledgementBatch
_FF = ShareFetchRequest.ForgottenTopic
_AT = ShareAcknowledgeRequest.AcknowledgeTopic
_AP = _AT.AcknowledgePartition
_AAB = _AP.AcknowledgementBatch
_IR = IncrementalAlterConfigsRequest.AlterConfigsResource

# Acknowledgements of one partition: (first offset, last offset, [type] or one type per offset).
Acks = list[tuple[int, int, list[int]]]


async def create_topic(client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> uuid.UUID:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=[],
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )
    resp = await client.request(CreateTopicsRequest[7](topics=[topic], timeout_ms=10000, validate_only=False))
    (result,) = resp.topics
    assert result.error_code == 0, result
    await _leaders_known(client, name, partitions)
    return result.topic_id


async def _leaders_known(client: RawClient, name: str, partitions: int) -> None:
    """Kafka creates a topic's partitions asynchronously, and its coordinators learn of the topic
    from the same metadata: wait until Metadata names a leader for every partition."""
    deadline = time.monotonic() + 30
    request = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name, topic_id=None)], allow_auto_topic_creation=False)
    while True:
        (topic,) = (await client.request(request)).topics
        if topic.error_code == 0 and len(topic.partitions) == partitions and all(p.leader_id >= 0 for p in topic.partitions):
            return
        assert time.monotonic() < deadline, f"{name} has no leaders"
        await asyncio.sleep(0.05)


async def produce(client: RawClient, topic: str, values: list[bytes], partition: int = 0, **batch: Any) -> int:
    """One batch of `values` (keys k0, k1, ...); returns its base offset."""
    batch.setdefault("timestamp_ms", int(time.time() * 1000))
    data = bytes(r.build_batch([(b"k%d" % i, v) for i, v in enumerate(values)], **batch))
    result = d.produce_result(await client.request(d.produce(topic, partition, data)))
    assert result.error_code == 0, result
    return result.base_offset


async def set_group_configs(client: RawClient, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource, as an admin client sends it."""
    resource = _IR(
        resource_type=32,
        resource_name=group,
        configs=[_IR.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()],
    )
    resp = await client.request(IncrementalAlterConfigsRequest[1](resources=[resource], validate_only=False))
    assert [(x.error_code, x.error_message) for x in resp.responses] == [(0, None)], resp


def heartbeat_request(group: str, member_id: str, epoch: int, topics: list[str] | None = None, rack: str | None = None) -> Any:
    return ShareGroupHeartbeatRequest(
        version=1, group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack, subscribed_topic_names=topics
    )


async def describe(client: RawClient, *groups: str, include_ops: bool = False) -> Any:
    return await client.request(ShareGroupDescribeRequest(version=1, group_ids=list(groups), include_authorized_operations=include_ops))


def new_member_id() -> str:
    """A member id as the Java client makes one (a UUID in Kafka's base64 form, 22 chars)."""
    return str(uuid.uuid4()).replace("-", "")[:22]


def fetch_request(
    group: str | None,
    member_id: str | None,
    epoch: int,
    parts: dict[tuple[uuid.UUID, int], Acks] | None = None,
    *,
    forgotten: dict[uuid.UUID, list[int]] | None = None,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    max_records: int = 500,
    batch_size: int = 500,
    version: int = 1,
) -> Any:
    topics: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, partition), acks in (parts or {}).items():
        batches = [_FAB(first_offset=a, last_offset=b, acknowledge_types=t) for a, b, t in acks]
        topics.setdefault(topic_id, []).append(_FP(partition_index=partition, acknowledgement_batches=batches))
    return ShareFetchRequest(
        version=version,
        group_id=group,
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=batch_size,
        topics=[_FT(topic_id=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[_FF(topic_id=t, partitions=ps) for t, ps in (forgotten or {}).items()],
    )


def ack_request(
    group: str | None,
    member_id: str | None,
    epoch: int,
    parts: dict[tuple[uuid.UUID, int], Acks],
    *,
    version: int = 2,
    renew: bool | None = None,
) -> Any:
    """`renew` (IsRenewAck, v2): by default set when some acknowledgement is a RENEW, as clients do."""
    topics: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, partition), acks in parts.items():
        batches = [_AAB(first_offset=a, last_offset=b, acknowledge_types=t) for a, b, t in acks]
        topics.setdefault(topic_id, []).append(_AP(partition_index=partition, acknowledgement_batches=batches))
    if renew is None:
        renew = any(RENEW in t for acks in parts.values() for _, _, t in acks)
    kwargs: dict[str, Any] = {"is_renew_ack": renew} if version >= 2 else {}
    return ShareAcknowledgeRequest(
        version=version,
        group_id=group,
        member_id=member_id,
        share_session_epoch=epoch,
        topics=[_AT(topic_id=t, partitions=ps) for t, ps in topics.items()],
        **kwargs,
    )


def partitions_of(resp: Any) -> dict[tuple[uuid.UUID, int], Any]:
    return {(t.topic_id, p.partition_index): p for t in resp.responses for p in t.partitions}


def acquired(resp: Any) -> dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]]:
    """(topic id, partition) -> acquired ranges (first, last, delivery count), of a ShareFetch answer."""
    return {k: [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] for k, p in partitions_of(resp).items()}


def values(resp: Any) -> dict[tuple[uuid.UUID, int], list[tuple[int, bytes | None]]]:
    """(topic id, partition) -> the acquired records (offset, value), in offset order."""
    out: dict[tuple[uuid.UUID, int], list[tuple[int, bytes | None]]] = {}
    for key, p in partitions_of(resp).items():
        ranges = [(a.first_offset, a.last_offset) for a in p.acquired_records]
        data = p.records or b""
        got = []
        for pos, header in r.iter_batches(data):
            if header.attributes & r.CONTROL_BIT:
                continue  # a transaction marker: clients skip it
            for rec in r.iter_all_records(data, pos, header):
                if any(a <= rec.offset <= b for a, b in ranges):
                    got.append((rec.offset, rec.value))
        out[key] = got
    return out


@dataclass
class ShareMember:
    """One share-group member on its own connection: heartbeats, a share session, fetches, acks."""

    client: RawClient
    group: str
    member_id: str = field(default_factory=new_member_id)
    epoch: int = 0
    session_epoch: int = 0
    assignment: dict[uuid.UUID, list[int]] = field(default_factory=dict)
    heartbeat_interval_ms: int = 0

    async def heartbeat(self, topics: list[str] | None = None, rack: str | None = None) -> Any:
        resp = await self.client.request(heartbeat_request(self.group, self.member_id, self.epoch, topics, rack))
        if resp.error_code == 0:
            self.epoch = resp.member_epoch
            self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            if resp.assignment is not None:
                self.assignment = {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}
        return resp

    async def join(self, topics: list[str], partitions: int = 1, timeout: float = 10.0) -> Any:
        """Heartbeat until the assignment holds `partitions` partitions (a new member's partitions
        come once the share coordinator has initialized their state)."""
        resp = await self.heartbeat(topics)
        assert resp.error_code == 0, resp
        deadline = time.monotonic() + timeout
        while sum(len(ps) for ps in self.assignment.values()) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"no assignment of {partitions} partitions after {timeout}s: {resp}")
            await asyncio.sleep(0.05)
            resp = await self.heartbeat()
            assert resp.error_code == 0, resp
        return resp

    async def leave(self) -> Any:
        resp = await self.client.request(heartbeat_request(self.group, self.member_id, -1))
        self.epoch = -1
        return resp

    async def fetch(self, parts: dict[tuple[uuid.UUID, int], Acks] | None = None, *, epoch: int | None = None, **kw: Any) -> Any:
        """ShareFetch in this member's session (the next epoch unless given); the session's epoch
        moves on when the broker answers without a top-level error."""
        if parts is None:
            parts = {(t, p): [] for t, ps in self.assignment.items() for p in ps} if self.session_epoch == 0 else {}
        used = self.session_epoch if epoch is None else epoch
        resp = await self.client.request(
            fetch_request(self.group, self.member_id, used, parts, **kw), timeout=kw.get("max_wait_ms", 0) / 1000 + 10
        )
        if resp.error_code == 0 and epoch is None:
            self.session_epoch = 0 if used == FINAL_EPOCH else used + 1
        return resp

    async def ack(
        self, parts: dict[tuple[uuid.UUID, int], Acks], *, epoch: int | None = None, version: int = 2, renew: bool | None = None
    ) -> Any:
        used = self.session_epoch if epoch is None else epoch
        resp = await self.client.request(ack_request(self.group, self.member_id, used, parts, version=version, renew=renew))
        if resp.error_code == 0 and epoch is None:
            self.session_epoch = 0 if used == FINAL_EPOCH else used + 1
        return resp
