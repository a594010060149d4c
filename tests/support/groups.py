"""Raw-protocol helpers for group conformance tests: exact requests, responses returned as-is."""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.support.raw_client import RawClient


def subscription(topics: list[str], user_data: bytes | None = None, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (v0 layout, the prefix of every version)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return out


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(partitions))
    for topic, parts in partitions.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)


def join_request(
    group: str,
    member_id: str = "",
    *,
    version: int = 9,
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 10_000,
    instance_id: str | None = None,
    protocol_type: str = "consumer",
    protocols: list[tuple[str, bytes]] | None = None,
    reason: str | None = None,
) -> Any:
    protocols = protocols if protocols is not None else [("range", subscription(["t"]))]
    return JoinGroupRequest[version](
        group_id=group,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
        reason=reason,
    )


async def join(client: RawClient, group: str, member_id: str = "", **kwargs: Any) -> Any:
    return await client.request(join_request(group, member_id, **kwargs), timeout=kwargs.pop("timeout", 30))


async def join_dynamic(client: RawClient, group: str, **kwargs: Any) -> Any:
    """v4+ dynamic join: MEMBER_ID_REQUIRED, then the real join with the given id (which may park)."""
    first = await join(client, group, "", **kwargs)
    assert first.error_code == 79, first
    return await join(client, group, first.member_id, **kwargs)


def sync_request(
    group: str,
    member_id: str,
    generation: int,
    *,
    version: int = 5,
    instance_id: str | None = None,
    assignments: dict[str, bytes] | None = None,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = "range",
) -> Any:
    return SyncGroupRequest[version](
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()],
    )


async def sync(client: RawClient, group: str, member_id: str, generation: int, **kwargs: Any) -> Any:
    return await client.request(sync_request(group, member_id, generation, **kwargs), timeout=30)


async def heartbeat(
    client: RawClient, group: str, member_id: str, generation: int, *, version: int = 4, instance_id: str | None = None
) -> Any:
    return await client.request(
        HeartbeatRequest[version](group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id)
    )


async def leave(client: RawClient, group: str, members: list[tuple[str, str | None]], *, version: int = 5) -> Any:
    if version < 3:
        return await client.request(LeaveGroupRequest[version](group_id=group, member_id=members[0][0]))
    identities = [LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i, reason=None) for m, i in members]
    return await client.request(LeaveGroupRequest[version](group_id=group, members=identities))


def commit_request(
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    version: int = 8,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "",
    retention_ms: int = -1,
    leader_epoch: int = -1,
) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=leader_epoch,
                commit_timestamp=-1,
                committed_metadata=metadata,
            )
        )
    return OffsetCommitRequest[version](
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time_ms=retention_ms,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


async def commit(client: RawClient, group: str, offsets: dict[tuple[str, int], int], **kwargs: Any) -> dict[tuple[str, int], int]:
    """Commit and return {(topic, partition): error code}."""
    resp = await client.request(commit_request(group, offsets, **kwargs))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_request(group: str, topics: dict[str, list[int]] | None, *, version: int = 8, require_stable: bool = False) -> Any:
    if version >= 8:
        req_topics = (
            None
            if topics is None
            else [
                OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in topics.items()
            ]
        )
        groups = [OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, member_id=None, member_epoch=-1, topics=req_topics)]
        return OffsetFetchRequest[version](groups=groups, require_stable=require_stable)
    old_topics = (
        None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()]
    )
    return OffsetFetchRequest[version](group_id=group, topics=old_topics, require_stable=require_stable)


async def fetch(client: RawClient, group: str, topics: dict[str, list[int]] | None, **kwargs: Any) -> Any:
    return await client.request(fetch_request(group, topics, **kwargs))


async def fetched_offsets(client: RawClient, group: str, topics: dict[str, list[int]] | None = None) -> dict[tuple[str, int], int]:
    resp = await fetch(client, group, topics)
    (g,) = resp.groups
    assert g.error_code == 0, g
    return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}


async def find_coordinator(client: RawClient, keys: list[str], *, version: int = 4, key_type: int = 0) -> Any:
    if version >= 4:
        return await client.request(FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=keys))
    return await client.request(FindCoordinatorRequest[version](key=keys[0], key_type=key_type))


async def describe(client: RawClient, groups: list[str], *, version: int = 5) -> Any:
    return await client.request(DescribeGroupsRequest[version](groups=groups, include_authorized_operations=False))


async def list_groups(client: RawClient, *, version: int = 5, states: list[str] | None = None, types: list[str] | None = None) -> Any:
    return await client.request(ListGroupsRequest[version](states_filter=states or [], types_filter=types or []))


async def delete_groups(client: RawClient, groups: list[str], *, version: int = 2) -> Any:
    return await client.request(DeleteGroupsRequest[version](groups_names=groups))


async def delete_offsets(client: RawClient, group: str, topics: dict[str, list[int]]) -> Any:
    req_topics = [
        OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p) for p in ps]
        )
        for t, ps in topics.items()
    ]
    return await client.request(OffsetDeleteRequest[0](group_id=group, topics=req_topics))
