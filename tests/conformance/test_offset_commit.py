"""OffsetCommit: spec rules OC-1..OC-8 (section 4.1), over the raw protocol, v0-v9.

Groups with members are real classic groups formed with JoinGroup/SyncGroup. Each test runs
every version it covers against one broker (one group per version) and compares
{version: outcome} as a whole, so a failure names the versions that differ.
Not covered: OC-4 step 1 (a Dead group is only observable while its shard unloads, CS-6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    committed,
    create_topic,
    describe_one,
    fetch_group,
    form_group,
    listed,
    ready_client,
    serving,
    wait_state,
)
from tests.support.offsets_log import offset_records, read_all_logs

# The versions served: v0 and v1 are not, as in Kafka 4 (OC-1).
VERSIONS = list(range(2, 10))
ALL_VERSIONS = VERSIONS


async def _setup(broker: Broker, raw: Any, topics: dict[str, int] | None = None) -> Any:
    for name, partitions in (topics or {"t": 3}).items():
        create_topic(broker, name, partitions)
    return await ready_client(raw)


# -- OC-1 ------------------------------------------------------------------------------------------


async def test_OC_1_v0_and_v1_are_neither_advertised_nor_served(broker: Broker, raw: Any) -> None:
    """As in Kafka 4 (KIP-896): OffsetCommit starts at v2; an older request closes the connection."""
    client = await _setup(broker, raw)
    versions = await client.request(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    (entry,) = [k for k in versions.api_keys if k.api_key == 8]
    assert (entry.min_version, entry.max_version) == (2, 9)
    for v in (0, 1):
        other = await ready_client(raw)
        with pytest.raises((ConnectionError, asyncio.TimeoutError)):
            await g.commit(other, "oc1", {("t", 0): 5}, version=v)
    assert await committed(client, "oc1") == {}


# -- OC-2 ------------------------------------------------------------------------------------------


async def test_OC_2_unknown_topics_and_partitions_never_reach_the_coordinator(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw, {"t": 2})
    # A positive generation on an absent group would be a coordinator error (OC-3), but nothing
    # reaches the coordinator: only unknown topics and partitions are in the request.
    offsets = {("missing-topic", 0): 1, ("missing-topic", 1): 1, ("t", 2): 1, ("t", 7): 1}
    results = {v: await g.commit(client, f"oc2-v{v}", offsets, version=v, generation=5, member_id="m") for v in ALL_VERSIONS}
    assert results == {v: dict.fromkeys(offsets, UNKNOWN_TOPIC_OR_PARTITION) for v in ALL_VERSIONS}
    # No group was created, and the unknown topic was not auto-created.
    assert not any(name.startswith("oc2-") for name in await listed(client))
    assert (await describe_one(client, "oc2-v9")).group_state == "Dead"
    meta = await client.request(MetadataRequest[4](topics=["missing-topic"], allow_auto_topic_creation=False))
    assert meta.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


async def test_OC_2_request_without_topics_is_answered_without_the_coordinator(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    results = {}
    for v in ALL_VERSIONS:
        resp = await client.request(g.commit_request(f"oc2-empty-v{v}", {}, version=v, generation=5, member_id="m"))
        results[v] = resp.topics
    assert results == {v: [] for v in ALL_VERSIONS}
    assert not any(name.startswith("oc2-empty") for name in await listed(client))


async def test_OC_2_known_partitions_go_on_while_unknown_ones_fail(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw, {"t": 2})
    offsets = {("t", 0): 10, ("t", 9): 11, ("nope", 0): 12, ("t", 1): 13}
    results = {}
    for v in VERSIONS:
        results[v] = (await g.commit(client, f"oc2-mixed-v{v}", offsets, version=v), await committed(client, f"oc2-mixed-v{v}"))
    expected = (
        {("t", 0): NONE, ("t", 9): UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("t", 1): NONE},
        {("t", 0): 10, ("t", 1): 13},
    )
    assert results == dict.fromkeys(VERSIONS, expected)


# -- OC-3 ------------------------------------------------------------------------------------------


async def test_OC_3_negative_generation_creates_a_simple_group(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    results = {}
    for v in ALL_VERSIONS:
        group = f"oc3-simple-v{v}"
        result = await g.commit(client, group, {("t", 0): 7, ("t", 2): 9}, version=v, generation=-1)
        d = await describe_one(client, group)
        results[v] = (result, await committed(client, group), (d.error_code, d.group_state, d.protocol_type, d.members))
    expected = ({("t", 0): NONE, ("t", 2): NONE}, {("t", 0): 7, ("t", 2): 9}, (NONE, "Empty", "", []))
    assert results == dict.fromkeys(ALL_VERSIONS, expected)
    groups = await listed(client)
    assert {(x.protocol_type, x.group_state, x.group_type) for k, x in groups.items() if k.startswith("oc3-simple")} == {
        ("", "Empty", "classic")
    }


async def test_OC_3_generation_on_absent_group_is_rejected(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    results = {}
    for v in VERSIONS:
        for generation in (0, 1, 42):
            group = f"oc3-absent-v{v}-g{generation}"
            result = await g.commit(client, group, {("t", 0): 1, ("t", 1): 2}, version=v, generation=generation, member_id="m")
            results[(v, generation)] = (result, await committed(client, group, {"t": [0, 1]}))
    expected = {}
    for v, generation in results:
        error = GROUP_ID_NOT_FOUND if v >= 9 else ILLEGAL_GENERATION
        expected[(v, generation)] = ({("t", 0): error, ("t", 1): error}, {})
    assert results == expected
    assert not any(name.startswith("oc3-absent") for name in await listed(client))


# -- OC-4 ------------------------------------------------------------------------------------------


async def test_OC_4_empty_group_accepts_negative_generation_whatever_the_member(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (member,) = await form_group(raw, "oc4-empty")
    assert (await g.leave(member.client, "oc4-empty", [(member.member_id, None)])).error_code == NONE
    await wait_state(client, "oc4-empty", "Empty")
    results = {}
    for v in VERSIONS:
        # Step 2 precedes member validation: any member id (and instance id) is fine with gen < 0.
        accepted = await g.commit(client, "oc4-empty", {("t", 0): v}, version=v, generation=-1, member_id="stranger", instance_id="inst")
        # With a generation the member is validated first, and an Empty group has no members.
        refused = await g.commit(client, "oc4-empty", {("t", 0): 100 + v}, version=v, generation=2, member_id=member.member_id)
        results[v] = (accepted, refused, await committed(client, "oc4-empty"))
    assert results == {v: ({("t", 0): NONE}, {("t", 0): UNKNOWN_MEMBER_ID}, {("t", 0): v}) for v in VERSIONS}


async def test_OC_4_stable_group_validates_member_then_generation(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "oc4-stable")
    gen = m.generation
    cases = {
        "member of the generation": ({"generation": gen, "member_id": m.member_id}, NONE),
        "unknown member": ({"generation": gen, "member_id": "unknown-member"}, UNKNOWN_MEMBER_ID),
        "next generation": ({"generation": gen + 1, "member_id": m.member_id}, ILLEGAL_GENERATION),
        "previous generation": ({"generation": gen - 1, "member_id": m.member_id}, ILLEGAL_GENERATION),
        # Unknown member and wrong generation: the member check comes first.
        "unknown member, wrong generation": ({"generation": gen + 7, "member_id": "unknown-member"}, UNKNOWN_MEMBER_ID),
        # A member id with gen -1 is validated (member ok), then the generation mismatches.
        "member without generation": ({"generation": -1, "member_id": m.member_id}, ILLEGAL_GENERATION),
        # No generation, no member, no instance id on a non-empty group (step 4).
        "neither": ({"generation": -1, "member_id": ""}, UNKNOWN_MEMBER_ID),
    }
    results = {}
    for v in VERSIONS:
        for name, (kw, _) in cases.items():
            results[(v, name)] = (await g.commit(client, "oc4-stable", {("t", 0): 1}, version=v, **kw))[("t", 0)]
    assert results == {(v, name): expected for v in VERSIONS for name, (_, expected) in cases.items()}


async def test_OC_4_static_member_validation(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "oc4-static", instance_ids=["instance-1"])
    gen = m.generation
    cases = {
        "registered": ({"generation": gen, "member_id": m.member_id, "instance_id": "instance-1"}, NONE),
        # The instance id is registered to another member id: fenced.
        "other member id": ({"generation": gen, "member_id": "other-member", "instance_id": "instance-1"}, FENCED_INSTANCE_ID),
        # An instance id that is not registered: unknown member.
        "unregistered instance": ({"generation": gen, "member_id": m.member_id, "instance_id": "instance-unknown"}, UNKNOWN_MEMBER_ID),
        # gen -1, member "" but an instance id on a non-empty group: validated as a member (step 3).
        "instance only": ({"generation": -1, "member_id": "", "instance_id": "instance-1"}, FENCED_INSTANCE_ID),
    }
    results = {}
    for v in (7, 8, 9):
        for name, (kw, _) in cases.items():
            results[(v, name)] = (await g.commit(client, "oc4-static", {("t", 0): 1}, version=v, **kw))[("t", 0)]
    assert results == {(v, name): expected for v in (7, 8, 9) for name, (_, expected) in cases.items()}


async def test_OC_4_completing_rebalance_answers_rebalance_in_progress(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "oc4-completing", sync=False)
    await wait_state(client, "oc4-completing", "CompletingRebalance")
    results = {}
    for v in VERSIONS:
        current = await g.commit(client, "oc4-completing", {("t", 0): 1}, version=v, generation=m.generation, member_id=m.member_id)
        # The generation is checked before the state.
        wrong = await g.commit(client, "oc4-completing", {("t", 0): 1}, version=v, generation=m.generation + 1, member_id=m.member_id)
        results[v] = (current, wrong)
    assert results == dict.fromkeys(VERSIONS, ({("t", 0): REBALANCE_IN_PROGRESS}, {("t", 0): ILLEGAL_GENERATION}))
    assert await committed(client, "oc4-completing", {"t": [0]}) == {}


async def test_OC_4_members_commit_while_preparing_rebalance(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "oc4-preparing")
    # A newcomer's join starts a rebalance; the old member has not rejoined yet.
    newcomer = await raw("newcomer")
    first = await g.join(newcomer, "oc4-preparing", "", rebalance_timeout_ms=30_000)
    parked = newcomer.send(g.join_request("oc4-preparing", first.member_id, rebalance_timeout_ms=30_000))
    await wait_state(client, "oc4-preparing", "PreparingRebalance")
    results = {}
    for v in VERSIONS:
        result = await g.commit(client, "oc4-preparing", {("t", 1): 8 + v}, version=v, generation=m.generation, member_id=m.member_id)
        results[v] = (result, await committed(client, "oc4-preparing"))
    assert results == {v: ({("t", 1): NONE}, {("t", 1): 8 + v}) for v in VERSIONS}
    assert not parked.done()


# -- OC-5 ------------------------------------------------------------------------------------------


async def test_OC_5_accepted_commit_refreshes_the_member_session(make_config: Callable[..., Any]) -> None:
    config = make_config(group_min_session_timeout_ms=100)
    async with serving(config) as served:
        create_topic(served.broker, "t")
        client = await served.ready()
        session_ms = 1200
        (committer,) = await form_group(served.connect, "oc5-committer", session_timeout_ms=session_ms)
        await form_group(served.connect, "oc5-idle", session_timeout_ms=session_ms)
        # Neither member heartbeats; one commits every 100 ms for two session timeouts.
        loop = asyncio.get_running_loop()
        until = loop.time() + 2 * session_ms / 1000
        while loop.time() < until:
            result = await g.commit(client, "oc5-committer", {("t", 0): 1}, generation=committer.generation, member_id=committer.member_id)
            assert result == {("t", 0): NONE}
            await asyncio.sleep(0.1)
        # The idle member's session expired (its group rebalanced to Empty); the committer is alive.
        await wait_state(client, "oc5-idle", "Empty")
        hb = await g.heartbeat(committer.client, "oc5-committer", committer.member_id, committer.generation)
        assert hb.error_code == NONE
        assert (await describe_one(client, "oc5-committer")).group_state == "Stable"


# -- OC-6 ------------------------------------------------------------------------------------------


async def test_OC_6_metadata_length_counts_utf16_units(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw, {"t": 8})
    emoji = "😀"  # outside the BMP: two UTF-16 code units, four UTF-8 bytes
    cases = {
        0: ("a" * 4096, NONE),  # exactly the limit
        1: ("a" * 4097, OFFSET_METADATA_TOO_LARGE),
        2: ("é" * 4096, NONE),  # 8192 UTF-8 bytes, but 4096 code units
        3: (emoji * 2048, NONE),  # 4096 code units
        4: (emoji * 2048 + "a", OFFSET_METADATA_TOO_LARGE),  # 4097 code units
        5: (emoji * 2049, OFFSET_METADATA_TOO_LARGE),
        6: (None, NONE),  # null metadata is stored as ""
        7: ("", NONE),
    }
    results = {}
    for v in ALL_VERSIONS:
        group = f"oc6-v{v}"
        req = g.commit_request(group, {("t", p): 100 + p for p in cases}, version=v)
        for partition in req.topics[0].partitions:
            partition.committed_metadata = cases[partition.partition_index][0]
        resp = await client.request(req)
        errors = {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}
        # Rejected partitions are not stored; the others are, with their metadata.
        fetched = await fetch_group(client, group, {"t": list(cases)})
        results[v] = (errors, {p: (row[0], row[2]) for (_, p), row in fetched.rows.items()})
    stored = {
        0: (100, "a" * 4096),
        1: (-1, ""),
        2: (102, "é" * 4096),
        3: (103, emoji * 2048),
        4: (-1, ""),
        5: (-1, ""),
        6: (106, ""),
        7: (107, ""),
    }
    assert results == dict.fromkeys(ALL_VERSIONS, ({p: expected for p, (_, expected) in cases.items()}, stored))


async def test_OC_6_limit_is_offset_metadata_max_bytes(make_config: Callable[..., Any]) -> None:
    async with serving(make_config(offset_metadata_max_bytes=10)) as served:
        create_topic(served.broker, "t", 2)
        client = await served.ready()
        result = await g.commit(client, "oc6-config", {("t", 0): 1}, metadata="x" * 10)
        assert result == {("t", 0): NONE}
        result = await g.commit(client, "oc6-config", {("t", 1): 1}, metadata="x" * 11)
        assert result == {("t", 1): OFFSET_METADATA_TOO_LARGE}


# -- OC-7 ------------------------------------------------------------------------------------------


async def test_OC_7_last_write_wins_without_log_validation(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    results = {}
    for v in ALL_VERSIONS:
        group = f"oc7-v{v}"
        first = await g.commit(client, group, {("t", 0): 10**15}, version=v)
        high = await committed(client, group)
        # A lower offset replaces a higher one.
        second = await g.commit(client, group, {("t", 0): 3}, version=v, metadata="second")
        results[v] = (first, high, second, (await fetch_group(client, group, {"t": [0]})).rows)
    expected = ({("t", 0): NONE}, {("t", 0): 10**15}, {("t", 0): NONE}, {("t", 0): (3, -1, "second", NONE)})
    assert results == dict.fromkeys(ALL_VERSIONS, expected)


async def test_OC_7_stored_fields_by_version(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    for v in ALL_VERSIONS:
        group = f"oc7-fields-v{v}"
        before = broker.clock.now_ms()
        req = g.commit_request(group, {("t", 1): 77}, version=v, metadata=None, leader_epoch=9, retention_ms=60_000)
        resp = await client.request(req)
        assert resp.topics[0].partitions[0].error_code == NONE, v
        after = broker.clock.now_ms()
        epoch = 9 if v >= 6 else -1
        # What OffsetFetch returns: metadata null -> "", the leader epoch from v6 commits.
        fetched = await fetch_group(client, group, {"t": [1]})
        assert fetched.rows[("t", 1)] == (77, epoch, "", NONE), v
        # What the record holds: commit time = now, expire time only for v2-4.
        ((key, value),) = offset_records(read_all_logs(broker), group)
        assert value is not None, v
        assert (key.topic, key.partition, value.offset, value.metadata, value.leader_epoch) == ("t", 1, 77, "", epoch), v
        assert before <= value.commit_timestamp <= after, v
        assert value.expire_timestamp == (value.commit_timestamp + 60_000 if 2 <= v <= 4 else -1), v


# -- OC-8 ------------------------------------------------------------------------------------------


async def test_OC_8_group_error_on_every_coordinator_partition_merged_with_prefilter(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw, {"t": 2, "u": 1})
    offsets = {("t", 0): 1, ("ghost", 0): 1, ("t", 5): 1, ("u", 0): 1, ("t", 1): 1}
    results = {v: await g.commit(client, f"oc8-v{v}", offsets, version=v, generation=3, member_id="m") for v in VERSIONS}
    expected = {}
    for v in VERSIONS:
        # Absent group with a generation: the coordinator rejects the group (OC-3) on each of its partitions.
        group_error = GROUP_ID_NOT_FOUND if v >= 9 else ILLEGAL_GENERATION
        expected[v] = {
            ("t", 0): group_error,
            ("ghost", 0): UNKNOWN_TOPIC_OR_PARTITION,
            ("t", 5): UNKNOWN_TOPIC_OR_PARTITION,
            ("u", 0): group_error,
            ("t", 1): group_error,
        }
    assert results == expected


async def test_OC_8_each_partition_gets_its_own_error(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw, {"t": 3})
    results = {}
    for v in VERSIONS:
        group = f"oc8-own-v{v}"
        req = g.commit_request(group, {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("t", 4): 4}, version=v)
        req.topics[0].partitions[1].committed_metadata = "m" * 5000
        resp = await client.request(req)
        errors = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
        results[v] = (errors, await committed(client, group))
    expected = (
        {("t", 0): NONE, ("t", 1): OFFSET_METADATA_TOO_LARGE, ("t", 2): NONE, ("t", 4): UNKNOWN_TOPIC_OR_PARTITION},
        {("t", 0): 1, ("t", 2): 3},
    )
    assert results == dict.fromkeys(VERSIONS, expected)
