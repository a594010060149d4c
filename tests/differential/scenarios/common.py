"""What the scenario families share: API keys, the embedded consumer protocol, the usual flows."""

from __future__ import annotations

from typing import Any

from protocol.apis import ApiKey
from tests.differential.harness import Side
from tests.support.groups import assignment, subscription

__all__ = ["ApiKey", "Side", "assignment", "subscription"]

# The topics every scenario may use (created on both brokers when the session starts); a scenario
# that changes a topic makes its own (side.topic()).
T3 = "diff.three"  # 3 partitions
T1 = "diff.one"  # 1 partition
SHARED_TOPICS = {T3: 3, T1: 1}

SESSION_MS = 30_000  # a session that never expires during a scenario
REBALANCE_MS = 30_000

# The versions both brokers serve, per API (asserted against both brokers' ApiVersions by
# test_api_versions.py, so that a scenario family cannot silently miss one).
JOIN_VERSIONS = range(0, 10)
SYNC_VERSIONS = range(0, 6)
HEARTBEAT_VERSIONS = range(0, 5)
LEAVE_VERSIONS = range(0, 6)


def protocols(topics: list[str] | None = None, names: tuple[str, ...] = ("range",)) -> list[dict[str, Any]]:
    sub = subscription(topics or [T3])
    return [{"name": n, "metadata": sub} for n in names]


def join_fields(group: str, version: int, member_id: str = "", **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "group_id": group,
        "session_timeout_ms": SESSION_MS,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": protocols(),
    }
    if version >= 1:
        fields["rebalance_timeout_ms"] = REBALANCE_MS
    fields.update(overrides)
    if version < 5:
        fields.pop("group_instance_id", None)
    if version < 8:
        fields.pop("reason", None)
    if version < 1:
        fields.pop("rebalance_timeout_ms", None)
    return fields


async def join(side: Side, actor: str, group: str, version: int, member_id: str = "", **overrides: Any) -> Any:
    return await side.call(actor, ApiKey.JOIN_GROUP, version, **join_fields(group, version, member_id, **overrides))


async def join_dynamic(side: Side, actor: str, group: str, version: int, **overrides: Any) -> Any:
    """A new dynamic member's join: from v4 MEMBER_ID_REQUIRED first, then the join with that id."""
    first = await join(side, actor, group, version, **overrides)
    if version >= 4 and first.error_code == 79 and overrides.get("group_instance_id") is None:
        return await join(side, actor, group, version, first.member_id, **overrides)
    return first


def sync_fields(
    group: str, version: int, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, **overrides: Any
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }
    if version >= 5:
        fields["protocol_type"] = "consumer"
        fields["protocol_name"] = "range"
    fields.update(overrides)
    if version < 3:
        fields.pop("group_instance_id", None)
    return fields


async def sync(
    side: Side,
    actor: str,
    group: str,
    version: int,
    member_id: str,
    generation: int,
    assignments: dict[str, bytes] | None = None,
    **overrides: Any,
) -> Any:
    return await side.call(
        actor, ApiKey.SYNC_GROUP, version, **sync_fields(group, version, member_id, generation, assignments, **overrides)
    )


async def heartbeat(side: Side, actor: str, group: str, version: int, member_id: str, generation: int, **overrides: Any) -> Any:
    fields = {"group_id": group, "generation_id": generation, "member_id": member_id, **overrides}
    if version < 3:
        fields.pop("group_instance_id", None)
    return await side.call(actor, ApiKey.HEARTBEAT, version, **fields)


async def leave(side: Side, actor: str, group: str, version: int, members: list[tuple[str, str | None]]) -> Any:
    if version < 3:
        return await side.call(actor, ApiKey.LEAVE_GROUP, version, group_id=group, member_id=members[0][0])
    entries = [{"member_id": m, "group_instance_id": i} for m, i in members]
    if version >= 5:
        for e in entries:
            e["reason"] = None
    return await side.call(actor, ApiKey.LEAVE_GROUP, version, group_id=group, members=entries)


async def stable_group(
    side: Side, group: str, actors: tuple[str, ...] = ("a",), instances: dict[str, str] | None = None, **overrides: Any
) -> dict[str, Any]:
    """A Stable classic group whose members (one per actor, the first the leader) joined and
    synced at JoinGroup v9 / SyncGroup v5; `instances` makes some of them static ({actor:
    instance id}). Returns {"members": {actor: member id}, "generation": n}. Each later actor's
    join starts a rebalance that the earlier ones rejoin; every answer is recorded."""
    version = 9
    instances = instances or {}

    def fields(actor: str, member_id: str = "") -> dict[str, Any]:
        return join_fields(group, version, member_id, group_instance_id=instances.get(actor), **overrides)

    members: dict[str, Any] = {}
    first = await side.call(actors[0], ApiKey.JOIN_GROUP, version, **fields(actors[0]))
    if first.error_code == 79:
        first = await side.call(actors[0], ApiKey.JOIN_GROUP, version, **fields(actors[0], first.member_id))
    members[actors[0]] = first.member_id
    generation = first.generation_id
    for actor in actors[1:]:
        # A new member: the group goes to PreparingRebalance; the known ones rejoin.
        if actor in instances:
            pending = [await side.send(actor, ApiKey.JOIN_GROUP, version, **fields(actor))]
        else:
            pre = await side.call(actor, ApiKey.JOIN_GROUP, version, **fields(actor))
            pending = [await side.send(actor, ApiKey.JOIN_GROUP, version, **fields(actor, pre.member_id))]
        await wait_state(side, group, "PreparingRebalance")
        for known, mid in members.items():
            pending.append(await side.send(known, ApiKey.JOIN_GROUP, version, **fields(known, mid)))
        answers = [await side.answer(p) for p in pending]
        members[actor] = answers[0].member_id
        generation = answers[0].generation_id
    leader_id = members[actors[0]]
    plan = {mid: assignment({T3: [i]}) for i, mid in enumerate(members.values())}
    syncs = [
        await side.send(
            actors[0],
            ApiKey.SYNC_GROUP,
            5,
            **sync_fields(group, 5, leader_id, generation, plan, group_instance_id=instances.get(actors[0])),
        )
    ]
    for actor in actors[1:]:
        syncs.append(
            await side.send(
                actor, ApiKey.SYNC_GROUP, 5, **sync_fields(group, 5, members[actor], generation, group_instance_id=instances.get(actor))
            )
        )
    for p in syncs:
        await side.answer(p)
    return {"members": members, "generation": generation}


async def describe(side: Side, group: str, version: int = 5) -> Any:
    resp = await side.quiet("ctl", ApiKey.DESCRIBE_GROUPS, version, groups=[group], include_authorized_operations=False)
    return resp.groups[0]


async def wait_state(side: Side, group: str, state: str) -> Any:
    return await side.until(lambda: describe(side, group), lambda g: g.group_state == state, f"{group} in {state}")


# -- offsets ----------------------------------------------------------------------------------

OFFSET_COMMIT_VERSIONS = range(2, 10)
OFFSET_FETCH_VERSIONS = range(1, 10)


def commit_fields(
    group: str,
    version: int,
    offsets: dict[tuple[str, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "",
    retention_ms: int = -1,
    leader_epoch: int = -1,
) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        p: dict[str, Any] = {"partition_index": partition, "committed_offset": offset, "committed_metadata": metadata}
        if version >= 6:
            p["committed_leader_epoch"] = leader_epoch
        by_topic.setdefault(topic, []).append(p)
    fields: dict[str, Any] = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    if version >= 7:
        fields["group_instance_id"] = instance_id
    if 2 <= version <= 4:
        fields["retention_time_ms"] = retention_ms
    return fields


async def commit(side: Side, actor: str, group: str, version: int, offsets: dict[tuple[str, int], int], **kwargs: Any) -> Any:
    return await side.call(actor, ApiKey.OFFSET_COMMIT, version, **commit_fields(group, version, offsets, **kwargs))


def fetch_fields(
    group: str,
    version: int,
    topics: dict[str, list[int]] | None,
    *,
    require_stable: bool = False,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> dict[str, Any]:
    listed = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    fields: dict[str, Any]
    if version >= 8:
        entry: dict[str, Any] = {"group_id": group, "topics": listed}
        if version >= 9:
            entry["member_id"] = member_id
            entry["member_epoch"] = member_epoch
        fields = {"groups": [entry]}
    else:
        fields = {"group_id": group, "topics": listed}
    if version >= 7:
        fields["require_stable"] = require_stable
    return fields


async def fetch(side: Side, actor: str, group: str, version: int, topics: dict[str, list[int]] | None, **kwargs: Any) -> Any:
    return await side.call(actor, ApiKey.OFFSET_FETCH, version, **fetch_fields(group, version, topics, **kwargs))
