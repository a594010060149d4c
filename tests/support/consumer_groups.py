"""Helpers for the KIP-848 conformance suite: raw ConsumerGroupHeartbeat / ConsumerGroupDescribe
exchanges, and a member that reconciles the way a client does (it reports what it owns and
acknowledges revocations), so that tests can drive a group to Stable over the wire."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.kip848 import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.support.raw_client import RawClient

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_VERSION = 35
ILLEGAL_GENERATION = 22
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_REGULAR_EXPRESSION = 128
INT32_MIN = -(2**31)

Owned = dict[uuid.UUID, list[int]]


def heartbeat_request(
    group: str,
    member_id: str = "",
    epoch: int = 0,
    *,
    version: int = 1,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_timeout_ms: int = -1,
    topics: list[str] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    owned: Owned | None = None,
) -> Any:
    fields: dict[str, Any] = dict(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=topics,
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in owned.items()],
    )
    if version >= 1:
        fields["subscribed_topic_regex"] = regex
    return ConsumerGroupHeartbeatRequest(version=version, **fields)


async def heartbeat(client: RawClient, group: str, member_id: str = "", epoch: int = 0, **kw: Any) -> Any:
    version = kw.get("version", 1)
    return await client.request(heartbeat_request(group, member_id, epoch, **kw), version=version)


def assignment_of(resp: Any) -> Owned | None:
    if resp.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}


async def describe(client: RawClient, *groups: str, version: int = 1, include_ops: bool = False) -> Any:
    req = ConsumerGroupDescribeRequest(version=version, group_ids=list(groups), include_authorized_operations=include_ops)
    return await client.request(req, version=version)


async def describe_one(client: RawClient, group: str) -> Any:
    resp = await describe(client, group)
    assert len(resp.groups) == 1
    return resp.groups[0]


@dataclass
class CgMember:
    """A consumer-protocol member driven over a raw connection, reconciling like a client."""

    client: RawClient
    group: str
    topics: list[str] | None = None
    regex: str | None = None
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    instance_id: str | None = None
    assignor: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 30_000
    version: int = 1
    epoch: int = 0
    owned: Owned = field(default_factory=dict)
    last: Any = None

    async def join(self) -> Any:
        self.epoch = 0
        self.owned = {}
        resp = await heartbeat(
            self.client,
            self.group,
            self.member_id,
            0,
            version=self.version,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            topics=self.topics if self.topics is not None or self.regex is not None or self.version == 0 else [],
            regex=self.regex,
            assignor=self.assignor,
            owned={},
        )
        return self._apply(resp)

    async def beat(self, full: bool = False) -> Any:
        """A heartbeat reporting what the member owns (it has already revoked what it was told to)."""
        resp = await heartbeat(
            self.client,
            self.group,
            self.member_id,
            self.epoch,
            version=self.version,
            instance_id=self.instance_id if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            topics=self.topics if full else None,
            owned=dict(self.owned),
        )
        return self._apply(resp)

    def _apply(self, resp: Any) -> Any:
        self.last = resp
        if resp.error_code == NONE:
            if resp.member_id:
                self.member_id = resp.member_id
            self.epoch = resp.member_epoch
            assigned = assignment_of(resp)
            if assigned is not None:
                self.owned = assigned
        return resp

    async def leave(self, epoch: int = -1) -> Any:
        return await heartbeat(self.client, self.group, self.member_id, epoch, version=self.version, instance_id=self.instance_id)

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


async def converge(members: list[CgMember], timeout: float = 10.0) -> None:
    """Heartbeat every member in turn until the group is Stable and no partition is owned twice
    at any step (KR-3 checked along the way)."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            resp = await m.beat()
            assert resp.error_code == NONE, resp
            seen: set[tuple[uuid.UUID, int]] = set()
            for other in members:
                mine = other.partitions()
                assert not (mine & seen), f"partition owned twice: {mine & seen}"
                seen |= mine
        d = await describe_one(members[0].client, members[0].group)
        epochs = {m.member_epoch for m in d.members}
        if d.group_state == "Stable" and epochs == {d.assignment_epoch} and all(m.epoch == d.assignment_epoch for m in members):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"group not stable after {timeout}s: {d}")
        await asyncio.sleep(0)
