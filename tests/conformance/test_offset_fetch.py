"""OffsetFetch: spec rules OF-1..OF-8 (section 4.3), v0-v9.

Group-level coordinator errors (OF-6, OF-7) are produced with a shard that failed to load: a
record that cannot be deserialized is appended to its `__consumer_offsets` partition and the
broker restarts (RL-2: such a record fails the load; GE-1: the shard is then not hosted).
Those tests need the partition log on disk across restarts (storage).
OF-5's pending offsets are put in the log as Kafka writes them (a transactional batch) and
loaded at restart (storage). Not covered: OF-9 (no authorizer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    NONE,
    NOT_COORDINATOR,
    committed,
    create_topic,
    fetch_group,
    fetched_group,
    groups_on_partition,
    listed,
    partition_of,
    ready_client,
    serving,
)
from tests.support.offsets_log import append_to_log, build_batch, offset_key, offset_value

# The versions served: v0 is not, as in Kafka 4 (OF-1).
VERSIONS = list(range(1, 10))
ALL_VERSIONS = VERSIONS
NO_OFFSET = (-1, -1, "", NONE)
UNSTABLE_OFFSET_COMMIT = 88


async def _setup(broker: Broker, raw: Any) -> Any:
    create_topic(broker, "t", 3)
    create_topic(broker, "u", 2)
    return await ready_client(raw)


def _multi_fetch(groups: list[tuple[str, dict[str, list[int]] | None]], version: int, **kw: Any) -> Any:
    entries = []
    for group_id, topics in groups:
        req_topics = (
            None
            if topics is None
            else [
                OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in topics.items()
            ]
        )
        entries.append(
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group_id, member_id=kw.get("member_id"), member_epoch=kw.get("member_epoch", -1), topics=req_topics
            )
        )
    return OffsetFetchRequest[version](groups=entries, require_stable=kw.get("require_stable", False))


# -- OF-1 ------------------------------------------------------------------------------------------


async def test_OF_1_v0_is_neither_advertised_nor_served(broker: Broker, raw: Any) -> None:
    """As in Kafka 4 (KIP-896): OffsetFetch starts at v1; a v0 request closes the connection."""
    client = await _setup(broker, raw)
    versions = await client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    (entry,) = [k for k in versions.api_keys if k.api_key == 9]
    assert (entry.min_version, entry.max_version) == (1, 9)
    with pytest.raises((ConnectionError, asyncio.TimeoutError)):
        await g.fetch(client, "of1", {"t": [0]}, version=0)


# -- OF-2 / OF-3 -------------------------------------------------------------------------------------


async def test_OF_2_partition_without_offset_is_minus_one_without_error(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "of2", {("t", 0): 5}) == {("t", 0): NONE}
    topics = {"t": [0, 1, 99], "never-created": [0, 3]}
    results = {}
    for v in ALL_VERSIONS:
        fetched = await fetch_group(client, "of2", topics, version=v)
        results[v] = (fetched.error in (None, NONE), fetched.rows)
    expected = {
        ("t", 0): (5, -1, "", NONE),
        ("t", 1): NO_OFFSET,
        ("t", 99): NO_OFFSET,  # no partition-existence check
        ("never-created", 0): NO_OFFSET,  # no topic-existence check
        ("never-created", 3): NO_OFFSET,
    }
    assert results == dict.fromkeys(ALL_VERSIONS, (True, expected))


async def test_OF_2_deleted_group_has_no_offsets(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "of2-deleted", {("t", 0): 5, ("u", 1): 6}) == {("t", 0): NONE, ("u", 1): NONE}
    resp = await g.delete_groups(client, ["of2-deleted"])
    assert [(r.group_id, r.error_code) for r in resp.results] == [("of2-deleted", NONE)]
    results = {}
    for v in ALL_VERSIONS:
        fetched = await fetch_group(client, "of2-deleted", {"t": [0], "u": [1]}, version=v)
        results[v] = (fetched.error in (None, NONE), fetched.rows)
    assert results == dict.fromkeys(ALL_VERSIONS, (True, {("t", 0): NO_OFFSET, ("u", 1): NO_OFFSET}))


async def test_OF_3_unknown_group_is_not_an_error(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    explicit, everything = {}, {}
    for v in ALL_VERSIONS:
        fetched = await fetch_group(client, "of3-nobody", {"t": [0, 2], "u": [1]}, version=v)
        explicit[v] = (fetched.error in (None, NONE), fetched.rows)
        if v >= 2:  # null topics = all partitions: an empty list
            fetched = await fetch_group(client, "of3-nobody", None, version=v)
            everything[v] = (fetched.error, fetched.rows)
    assert explicit == dict.fromkeys(ALL_VERSIONS, (True, {("t", 0): NO_OFFSET, ("t", 2): NO_OFFSET, ("u", 1): NO_OFFSET}))
    assert everything == dict.fromkeys(range(2, 10), (NONE, {}))
    assert "of3-nobody" not in await listed(client)


# -- OF-4 ------------------------------------------------------------------------------------------


async def test_OF_4_null_topics_returns_every_committed_partition(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    offsets = {("t", 0): 1, ("t", 2): 3, ("u", 0): 4, ("u", 1): 5}
    resp = await client.request(g.commit_request("of4", offsets, leader_epoch=2, metadata="md"))
    assert all(p.error_code == NONE for t in resp.topics for p in t.partitions)
    results = {}
    for v in range(2, 10):
        raw_resp = await g.fetch(client, "of4", None, version=v)
        fetched = fetched_group(raw_resp, v, "of4")
        # Grouped by topic: each topic appears once.
        topics = raw_resp.groups[0].topics if v >= 8 else raw_resp.topics
        results[v] = (fetched.error, fetched.rows, sorted(t.name for t in topics))
    expected = {v: (NONE, {tp: (o, 2 if v >= 5 else -1, "md", NONE) for tp, o in offsets.items()}, ["t", "u"]) for v in range(2, 10)}
    assert results == expected


# -- OF-5 ------------------------------------------------------------------------------------------


async def test_OF_5_require_stable_without_pending_offsets_returns_committed(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "of5", {("t", 1): 12}) == {("t", 1): NONE}
    results = {}
    for v in (7, 8, 9):
        explicit = await fetch_group(client, "of5", {"t": [0, 1]}, version=v, require_stable=True)
        everything = await fetch_group(client, "of5", None, version=v, require_stable=True)
        results[v] = (explicit.error, explicit.rows, everything.error, everything.rows)
    committed_row = {("t", 1): (12, -1, "", NONE)}
    assert results == dict.fromkeys((7, 8, 9), (NONE, {("t", 0): NO_OFFSET, **committed_row}, NONE, committed_row))


# -- OF-6 ------------------------------------------------------------------------------------------


async def test_OF_6_each_group_answered_independently(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "of6-a", {("t", 0): 1, ("u", 1): 2}) == {("t", 0): NONE, ("u", 1): NONE}
    assert await g.commit(client, "", {("t", 2): 3}) == {("t", 2): NONE}

    def rows(x: Any) -> dict[tuple[str, int], int]:
        return {(t.name, p.partition_index): p.committed_offset for t in x.topics for p in t.partitions}

    results = {}
    for v in (8, 9):
        req = _multi_fetch([("of6-a", {"t": [0, 1]}), ("of6-unknown", {"u": [0]}), ("", None), ("of6-a", None)], v)
        resp = await client.request(req)
        results[v] = [(x.group_id, x.error_code, rows(x)) for x in resp.groups]
    expected = [
        ("of6-a", NONE, {("t", 0): 1, ("t", 1): -1}),
        ("of6-unknown", NONE, {("u", 0): -1}),
        ("", NONE, {("t", 2): 3}),
        ("of6-a", NONE, {("t", 0): 1, ("u", 1): 2}),
    ]
    assert results == dict.fromkeys((8, 9), expected)


def _corrupt_record() -> bytearray:
    """An OffsetCommit key (type 1) cut short: undecodable, so replay fails the load (RL-2)."""
    return build_batch([(b"\x00\x01\x00\x05gr", b"\x00\x03")])


async def _broker_with_failed_shard(make_config: Callable[..., Any], bad: int, commits: dict[str, dict[tuple[str, int], int]]) -> None:
    """Commit `commits`, then corrupt `__consumer_offsets` partition `bad` (restart follows)."""
    async with serving(make_config()) as served:
        create_topic(served.broker, "t", 3)
        client = await served.ready()
        for group, offsets in commits.items():
            assert await g.commit(client, group, offsets) == dict.fromkeys(offsets, NONE)
        append_to_log(served.broker, bad, _corrupt_record())


async def test_OF_6_group_on_a_shard_not_hosted_gets_not_coordinator(make_config: Callable[..., Any]) -> None:
    (lost,) = groups_on_partition(3, 5, 1, "of6-lost")
    (fine,) = groups_on_partition(1, 5, 1, "of6-fine")
    await _broker_with_failed_shard(make_config, 3, {lost: {("t", 0): 5}, fine: {("t", 0): 6}})
    async with serving(make_config()) as served:
        client = await served.ready()
        results = {}
        for v in (8, 9):
            resp = await client.request(_multi_fetch([(lost, {"t": [0]}), (fine, {"t": [0]}), (lost, None)], v))
            results[v] = [
                (x.group_id, x.error_code, {(t.name, p.partition_index): p.committed_offset for t in x.topics for p in t.partitions})
                for x in resp.groups
            ]
        expected = [(lost, NOT_COORDINATOR, {}), (fine, NONE, {("t", 0): 6}), (lost, NOT_COORDINATOR, {})]
        assert results == dict.fromkeys((8, 9), expected)


# -- OF-7 ------------------------------------------------------------------------------------------


async def test_OF_7_group_error_placement_by_version(make_config: Callable[..., Any]) -> None:
    (lost,) = groups_on_partition(2, 5, 1, "of7-lost")
    await _broker_with_failed_shard(make_config, 2, {lost: {("t", 0): 5}})
    async with serving(make_config()) as served:
        client = await served.ready()
        results = {}
        for v in ALL_VERSIONS:
            fetched = fetched_group(await g.fetch(client, lost, {"t": [0, 1]}, version=v), v, lost)
            results[v] = (fetched.error, fetched.rows)
        legacy = {("t", 0): (-1, -1, "", NOT_COORDINATOR), ("t", 1): (-1, -1, "", NOT_COORDINATOR)}
        # v8+: the group's ErrorCode; v2-7: the top-level ErrorCode; the failed group result
        # carries no partitions.
        assert {v: r for v, r in results.items() if v >= 2} == {v: (NOT_COORDINATOR, {}) for v in range(2, 10)}
        # v1 has no top-level code. The spec RECOMMENDS the legacy shape (the error on every
        # requested partition, offset -1, metadata ""); Kafka at the pinned commit returns no
        # partitions at all. Both are accepted; any other answer is not.
        assert results[1] in ((None, legacy), (None, {})), results[1]


# -- OF-8 ------------------------------------------------------------------------------------------


async def test_OF_8_classic_groups_ignore_member_fields_on_fetch(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "of8", {("t", 0): 21}) == {("t", 0): NONE}
    for member_id, epoch in (("nobody", 5), (None, 17), ("", -1)):
        resp = await client.request(_multi_fetch([("of8", {"t": [0]}), ("of8", None)], 9, member_id=member_id, member_epoch=epoch))
        assert [x.error_code for x in resp.groups] == [NONE, NONE]
        for x in resp.groups:
            assert [(p.partition_index, p.committed_offset) for t in x.topics for p in t.partitions] == [(0, 21)]
    assert await committed(client, "of8") == {("t", 0): 21}


async def test_OF_5_pending_transactional_offsets_are_unstable(make_config: Callable[..., Any]) -> None:
    # No TxnOffsetCommit yet: a pending transactional offset (TX-4) is put in the log as Kafka
    # writes it (a transactional batch without its marker) and loaded at restart (storage).
    async with serving(make_config()) as served:
        create_topic(served.broker, "t", 3)
        client = await served.ready()
        assert await g.commit(client, "of5-pending", {("t", 0): 5, ("t", 1): 6}) == {("t", 0): NONE, ("t", 1): NONE}
        batch = build_batch(
            [
                (offset_key("of5-pending", "t", 0), offset_value(50, "txn", 1)),
                (offset_key("of5-pending", "t", 2), offset_value(70, "txn", 1)),
            ],
            producer_id=9001,
            producer_epoch=0,
            transactional=True,
        )
        append_to_log(served.broker, partition_of("of5-pending", 5), batch)
    async with serving(make_config()) as served:
        client = await served.ready()
        unstable = (-1, -1, "", UNSTABLE_OFFSET_COMMIT)
        results = {}
        for v in (7, 8, 9):
            results[(v, "stable")] = (await fetch_group(client, "of5-pending", {"t": [0, 1, 2]}, version=v, require_stable=True)).rows
            results[(v, "plain")] = (await fetch_group(client, "of5-pending", {"t": [0, 1, 2]}, version=v)).rows
            # All partitions: only committed ones are returned, and t-0 has a pending offset too.
            results[(v, "all")] = (await fetch_group(client, "of5-pending", None, version=v, require_stable=True)).rows
        expected = {}
        for v in (7, 8, 9):
            expected[(v, "stable")] = {("t", 0): unstable, ("t", 1): (6, -1, "", NONE), ("t", 2): unstable}
            # Without RequireStable the last committed value is returned; pending ones are ignored.
            expected[(v, "plain")] = {("t", 0): (5, -1, "", NONE), ("t", 1): (6, -1, "", NONE), ("t", 2): NO_OFFSET}
            expected[(v, "all")] = {("t", 0): unstable, ("t", 1): (6, -1, "", NONE)}
        assert results == expected
