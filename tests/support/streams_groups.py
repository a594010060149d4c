"""Helpers for streams groups (KIP-1071) over raw connections: topologies, StreamsGroupHeartbeat and
StreamsGroupDescribe requests, and a member that reconciles as Kafka Streams does (it reports the
tasks it owns and gives up what it must revoke), so that tests can drive a group to Stable."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from protocol.kip1071 import StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest
from tests.support.raw_client import RawClient

R = StreamsGroupHeartbeatRequest
_Topology = R.Topology
_Subtopology = _Topology.Subtopology
_TopicInfo = _Subtopology.TopicInfo
_ConfigKV = _TopicInfo.KeyValue
_Copartition = _Subtopology.CopartitionGroup

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNSUPPORTED_VERSION = 35
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
STALE_MEMBER_EPOCH = 113
STREAMS_INVALID_TOPOLOGY = 130
INCONSISTENT_GROUP_PROTOCOL = 23

# StreamsGroupHeartbeatResponse.Status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

Tasks = dict[str, list[int]]


def topic_info(name: str, partitions: int = 0, configs: dict[str, str] | None = None, replication_factor: int = 0) -> Any:
    return _TopicInfo(
        name=name,
        partitions=partitions,
        replication_factor=replication_factor,
        topic_configs=[_ConfigKV(key=k, value=v) for k, v in (configs or {}).items()],
    )


def subtopology(
    sid: str,
    sources: list[str] | None = None,
    *,
    changelogs: list[Any] | None = None,
    sinks: list[str] | None = None,
    repartitions: list[Any] | None = None,
    copartition: list[tuple[list[int], list[int]]] | None = None,
    regex: list[str] | None = None,
) -> Any:
    return _Subtopology(
        subtopology_id=sid,
        source_topics=list(sources or []),
        source_topic_regex=list(regex or []),
        state_changelog_topics=list(changelogs or []),
        repartition_sink_topics=list(sinks or []),
        repartition_source_topics=list(repartitions or []),
        copartition_groups=[
            _Copartition(source_topics=s, source_topic_regex=[], repartition_source_topics=r) for s, r in copartition or []
        ],
    )


def topology(*subtopologies: Any, epoch: int = 0) -> Any:
    return _Topology(epoch=epoch, subtopologies=list(subtopologies))


def word_count(prefix: str, app: str) -> Any:
    """The shape of the suite's word count: input -> repartition -> a counting store with a changelog."""
    repartition = f"{app}-counts-repartition"
    return topology(
        subtopology("0", [f"{prefix}-input"], sinks=[repartition]),
        subtopology(
            "1",
            changelogs=[topic_info(f"{app}-counts-changelog", configs={"cleanup.policy": "compact"})],
            repartitions=[topic_info(repartition, configs={"cleanup.policy": "delete", "segment.bytes": "52428800"})],
        ),
    )


def task_ids(tasks: Tasks | None) -> list[Any] | None:
    return None if tasks is None else [R.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items())]


def tasks_of(task_list: list[Any] | None) -> Tasks | None:
    return None if task_list is None else {t.subtopology_id: sorted(t.partitions) for t in task_list}


def heartbeat_request(group: str, member_id: str, epoch: int = 0, *, version: int = 1, **kw: Any) -> Any:
    fields: dict[str, Any] = dict(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        endpoint_information_epoch=kw.pop("endpoint_information_epoch", 0),
        instance_id=kw.pop("instance_id", None),
        rack_id=kw.pop("rack_id", None),
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30_000 if epoch == 0 else -1),
        topology=kw.pop("topology", None),
        active_tasks=task_ids(kw.pop("active", {} if epoch == 0 else None)),
        standby_tasks=task_ids(kw.pop("standby", {} if epoch == 0 else None)),
        warmup_tasks=task_ids(kw.pop("warmup", {} if epoch == 0 else None)),
        process_id=kw.pop("process_id", "process-1" if epoch == 0 else None),
        user_endpoint=kw.pop("user_endpoint", None),
        client_tags=kw.pop("client_tags", [] if epoch == 0 else None),
        task_offsets=kw.pop("task_offsets", None),
        task_end_offsets=kw.pop("task_end_offsets", None),
        shutdown_application=kw.pop("shutdown_application", False),
    )
    for name in ("active_tasks", "standby_tasks", "warmup_tasks"):
        if name in kw:
            fields[name] = kw.pop(name)
    if kw:
        raise TypeError(f"unknown fields {sorted(kw)}")
    return R(version=version, **fields)


async def heartbeat(client: RawClient, group: str, member_id: str, epoch: int = 0, **kw: Any) -> Any:
    version = kw.get("version", 1)
    return await client.request(heartbeat_request(group, member_id, epoch, **kw), version=version)


async def describe(client: RawClient, *groups: str, version: int = 1, include_ops: bool = False, include_description: bool = False) -> Any:
    fields: dict[str, Any] = dict(group_ids=list(groups), include_authorized_operations=include_ops)
    if version >= 1:
        fields["include_topology_description"] = include_description
    return await client.request(StreamsGroupDescribeRequest(version=version, **fields), version=version)


async def describe_one(client: RawClient, group: str, **kw: Any) -> Any:
    (d,) = (await describe(client, group, **kw)).groups
    return d


def statuses(resp: Any) -> list[tuple[int, str]]:
    return [(s.status_code, s.status_detail) for s in resp.status or []]


@dataclass
class StreamsMember:
    """A member that behaves as a Streams client: joins with its topology, then reports the tasks
    it owns, dropping at once what the coordinator takes away."""

    client: RawClient
    group: str
    member_id: str
    topology: Any
    process_id: str = "process-1"
    instance_id: str | None = None
    epoch: int = 0
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    last: Any = None

    async def beat(self, **kw: Any) -> Any:
        joining = self.epoch == 0
        extra: dict[str, Any] = {}
        if joining:
            extra.update(topology=self.topology, process_id=self.process_id, instance_id=self.instance_id)
        else:
            extra.update(active=self.active, standby=self.standby, warmup=self.warmup)
        extra.update(kw)
        resp = await heartbeat(self.client, self.group, self.member_id, self.epoch, **extra)
        self.last = resp
        if resp.error_code == NONE:
            self.epoch = resp.member_epoch
            if resp.active_tasks is not None:
                self.active = tasks_of(resp.active_tasks) or {}
                self.standby = tasks_of(resp.standby_tasks) or {}
                self.warmup = tasks_of(resp.warmup_tasks) or {}
        return resp

    async def leave(self, static: bool = False) -> Any:
        epoch = -2 if static else -1
        return await heartbeat(
            self.client, self.group, self.member_id, epoch, instance_id=self.instance_id, process_id=None, client_tags=None
        )


async def converge(members: list[StreamsMember], describe_client: RawClient, timeout: float = 20.0, pause: float = 0.05) -> Any:
    """Heartbeat every member until the group is Stable and no member has a status left (the
    topology ready, the internal topics there); the last describe."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            await m.beat()
        d = await describe_one(describe_client, members[0].group)
        if (
            d.group_state == "Stable"
            and all(not (m.last.status or []) for m in members)
            and all(m.epoch == d.assignment_epoch for m in members)
        ):
            return d
        if time.monotonic() > deadline:
            raise AssertionError(
                f"group {members[0].group} not Stable within {timeout}s: {d.group_state}, {[statuses(m.last) for m in members]}"
            )
        await asyncio.sleep(pause)
