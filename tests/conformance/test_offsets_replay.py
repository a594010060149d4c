"""Loading `__consumer_offsets` and compaction: spec rules RL-1..RL-4, RL-6, RC-2 and RF-3 (reading).

Every test restarts an in-process broker on the same data dir, so the whole file waits for the
partition log on disk (storage). Records Kafka could have written but kaflet does not (old value
versions, transactional batches and markers, unknown types) are appended to the log through the
broker's own log before the restart, then loaded by the next broker.
Not covered: RL-5 (KIP-848 consumer-group records: those groups are not served yet).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from tests.support import groups as g
from tests.support.coordinator import (
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    NONE,
    NOT_COORDINATOR,
    Served,
    committed,
    create_topic,
    describe_one,
    fetch_group,
    form_group,
    groups_on_partition,
    listed,
    partition_of,
    serving,
    wait_state,
)
from tests.support.offsets_log import (
    MemberValue,
    append_to_log,
    build_batch,
    control_batch,
    group_key,
    group_value,
    offset_key,
    offset_value,
    read_log,
)
from tests.support.waiting import async_wait_until

UNSTABLE_OFFSET_COMMIT = 88
N = 5  # offsets partitions of the test brokers (tests/conftest.py)


def _append(broker: Any, group: str, batch: bytearray) -> None:
    append_to_log(broker, partition_of(group, N), batch)


async def _first_life(make_config: Callable[..., Any], body: Callable[[Served, Any], Any], **config: Any) -> None:
    async with serving(make_config(**config)) as served:
        create_topic(served.broker, "t", 3)
        create_topic(served.broker, "u", 2)
        client = await served.ready()
        await body(served, client)


async def _snapshot(client: Any, groups: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"listed": {k: (v.protocol_type, v.group_state) for k, v in (await listed(client)).items()}}
    for group in groups:
        d = await describe_one(client, group)
        members = sorted(
            (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in d.members
        )
        out[group] = (await committed(client, group), d.group_state, d.protocol_type, d.protocol_data, members)
    return out


# -- RL-1 ------------------------------------------------------------------------------------------


async def test_RL_1_state_is_rebuilt_from_the_log(make_config: Callable[..., Any]) -> None:
    groups = ["rl1-simple", "rl1-stable", "rl1-empty", "rl1-deleted", ""]
    snapshot: dict[str, Any] = {}
    member: dict[str, Any] = {}

    async def body(served: Served, client: Any) -> None:
        assert await g.commit(client, "rl1-simple", {("t", 0): 1, ("u", 1): 2}) == {("t", 0): NONE, ("u", 1): NONE}
        assert await g.commit(client, "", {("t", 2): 3}) == {("t", 2): NONE}
        stable = await form_group(served.connect, "rl1-stable", 2, instance_ids=["inst-0", None], assignments=[b"a0", b"a1"])
        m = stable[0]
        assert await g.commit(client, "rl1-stable", {("t", 1): 4}, generation=m.generation, member_id=m.member_id) == {("t", 1): NONE}
        (e,) = await form_group(served.connect, "rl1-empty")
        assert await g.commit(client, "rl1-empty", {("u", 0): 5}, generation=e.generation, member_id=e.member_id) == {("u", 0): NONE}
        await g.leave(e.client, "rl1-empty", [(e.member_id, None)])
        await wait_state(client, "rl1-empty", "Empty")
        assert await g.commit(client, "rl1-deleted", {("t", 0): 6}) == {("t", 0): NONE}
        assert [r.error_code for r in (await g.delete_groups(client, ["rl1-deleted"])).results] == [NONE]
        snapshot.update(await _snapshot(client, groups))
        member.update(id=m.member_id, generation=m.generation, instance=m.instance_id)

    await _first_life(make_config, body)
    assert snapshot["rl1-stable"][1] == "Stable" and snapshot["rl1-deleted"][1] == "Dead"
    async with serving(make_config()) as served:
        client = await served.ready()
        assert await _snapshot(client, groups) == snapshot
        # The reloaded Stable member is a member of the persisted generation.
        hb = await g.heartbeat(client, "rl1-stable", member["id"], member["generation"], instance_id=member["instance"])
        assert hb.error_code == NONE


# -- RL-2 ------------------------------------------------------------------------------------------


async def test_RL_2_unknown_record_types_are_skipped(make_config: Callable[..., Any]) -> None:
    (group,) = groups_on_partition(3, N, 1, "rl2-unknown")

    async def body(served: Served, client: Any) -> None:
        batch = build_batch(
            [
                (b"\x01\xf4" + b"future-key", b"\x00\x00whatever"),  # type 500
                (b"\x03\xe7", None),  # type 999, a tombstone
                (offset_key(group, "t", 0), offset_value(17, "after", 1_000)),
            ]
        )
        _append(served.broker, group, batch)

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        assert await committed(client, group) == {("t", 0): 17}


async def test_RL_2_undecodable_records_fail_the_load(make_config: Callable[..., Any]) -> None:
    # One kind of undecodable record in each of partitions 1-3; partition 4 stays healthy.
    bad = {
        "truncated-key": (1, (b"\x00\x01\x00\x09abc", b"\x00\x03")),
        "unknown-value-version": (2, ("KEY", b"\x00\x63" + b"\x00" * 30)),
        "truncated-value": (3, ("KEY", b"\x00\x03\x00\x00")),
    }
    lost = {kind: groups_on_partition(p, N, 1, f"rl2-{kind}")[0] for kind, (p, _) in bad.items()}
    (fine,) = groups_on_partition(4, N, 1, "rl2-fine")

    async def body(served: Served, client: Any) -> None:
        for group in [*lost.values(), fine]:
            assert await g.commit(client, group, {("t", 0): 5}) == {("t", 0): NONE}
        for kind, (_, (key, value)) in bad.items():
            group = lost[kind]
            _append(served.broker, group, build_batch([(offset_key(group, "t", 1) if key == "KEY" else key, value)]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        results = {kind: (await fetch_group(client, group, {"t": [0]})).error for kind, group in lost.items()}
        assert results == dict.fromkeys(bad, NOT_COORDINATOR)
        assert await committed(client, fine) == {("t", 0): 5}


async def test_RL_2_transaction_markers_commit_or_discard_pending_offsets(make_config: Callable[..., Any]) -> None:
    names = ["rl2-commit", "rl2-abort", "rl2-pending", "rl2-older"]

    async def body(served: Served, client: Any) -> None:
        for group in names:
            assert await g.commit(client, group, {("t", 0): 5}) == {("t", 0): NONE}

        def txn(group: str, pid: int, offset: int) -> None:
            _append(
                served.broker,
                group,
                build_batch(
                    [(offset_key(group, "t", 0), offset_value(offset, "txn", 2_000))], producer_id=pid, producer_epoch=0, transactional=True
                ),
            )

        txn("rl2-commit", 7001, 11)
        _append(served.broker, "rl2-commit", control_batch(True, 7001))
        txn("rl2-abort", 7002, 12)
        _append(served.broker, "rl2-abort", control_batch(False, 7002))
        txn("rl2-pending", 7003, 13)  # no marker yet: still pending
        # A plain commit written after the transactional one wins over it at COMMIT (TX-4).
        txn("rl2-older", 7004, 14)
        assert await g.commit(client, "rl2-older", {("t", 0): 15}) == {("t", 0): NONE}
        _append(served.broker, "rl2-older", control_batch(True, 7004))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        assert await committed(client, "rl2-commit") == {("t", 0): 11}
        assert await committed(client, "rl2-abort") == {("t", 0): 5}
        assert await committed(client, "rl2-pending") == {("t", 0): 5}
        assert await committed(client, "rl2-older") == {("t", 0): 15}
        # OF-5: with RequireStable, a partition with a pending offset is unstable.
        stable = await fetch_group(client, "rl2-pending", {"t": [0, 1]}, require_stable=True)
        assert stable.rows == {("t", 0): (-1, -1, "", UNSTABLE_OFFSET_COMMIT), ("t", 1): (-1, -1, "", NONE)}
        settled = await fetch_group(client, "rl2-commit", {"t": [0]}, require_stable=True)
        assert settled.rows == {("t", 0): (11, -1, "txn", NONE)}


# -- RL-3 ------------------------------------------------------------------------------------------


async def test_RL_3_offsets_without_a_group_make_a_simple_group(make_config: Callable[..., Any]) -> None:
    async def body(served: Served, client: Any) -> None:
        _append(served.broker, "rl3-orphan", build_batch([(offset_key("rl3-orphan", "u", 1), offset_value(33, "m", 1_000))]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        assert await committed(client, "rl3-orphan") == {("u", 1): 33}
        d = await describe_one(client, "rl3-orphan")
        assert (d.group_state, d.protocol_type, d.members) == ("Empty", "", [])
        assert (await listed(client))["rl3-orphan"].protocol_type == ""


async def test_RL_3_tombstones_remove_committed_and_pending_offsets(make_config: Callable[..., Any]) -> None:
    async def body(served: Served, client: Any) -> None:
        assert await g.commit(client, "rl3-tomb", {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}) == dict.fromkeys(
            [("t", 0), ("t", 1), ("t", 2)], NONE
        )
        resp = await g.delete_offsets(client, "rl3-tomb", {"t": [1]})
        assert resp.error_code == NONE
        # A pending transactional offset for t-2, then a plain tombstone for t-2.
        _append(
            served.broker,
            "rl3-tomb",
            build_batch([(offset_key("rl3-tomb", "t", 2), offset_value(9, "", 1))], producer_id=8001, producer_epoch=0, transactional=True),
        )
        _append(served.broker, "rl3-tomb", build_batch([(offset_key("rl3-tomb", "t", 2), None)]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        assert await committed(client, "rl3-tomb") == {("t", 0): 1}
        fetched = await fetch_group(client, "rl3-tomb", {"t": [2]}, require_stable=True)
        assert fetched.rows == {("t", 2): (-1, -1, "", NONE)}  # no pending offset left either


# -- RL-4 ------------------------------------------------------------------------------------------


def _member(version: int, member_id: str = "member-1", session: int = 30_000) -> MemberValue:
    return MemberValue(
        member_id,
        "inst-1" if version >= 3 else None,
        "client-1",
        "/10.0.0.7",
        20_000 if version >= 1 else -1,
        session,
        g.subscription(["t"], b"sub"),
        b"assigned",
    )


async def test_RL_4_group_metadata_of_every_version_rebuilds_a_stable_group(make_config: Callable[..., Any]) -> None:
    versions = [0, 1, 2, 3]

    async def body(served: Served, client: Any) -> None:
        for v in versions:
            group = f"rl4-v{v}"
            older = group_value(version=v, generation=4, leader="member-0", members=[_member(v, "member-0")])
            latest = group_value(version=v, generation=5, leader="member-1", current_state_timestamp=12345, members=[_member(v)])
            _append(served.broker, group, build_batch([(group_key(group), older), (group_key(group), latest)]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        results, expected = {}, {}
        for v in versions:
            group = f"rl4-v{v}"
            instance = "inst-1" if v >= 3 else None
            d = await describe_one(client, group)
            members = [
                (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in d.members
            ]
            current = (await g.heartbeat(client, group, "member-1", 5, instance_id=instance)).error_code
            stale = (await g.heartbeat(client, group, "member-1", 4, instance_id=instance)).error_code
            # The subscription is known again (RF-6): the subscribed topic's offsets cannot be deleted.
            resp = await g.delete_offsets(client, group, {"t": [0]})
            deletion = [(p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]
            results[v] = (d.group_state, d.protocol_type, d.protocol_data, members, current, stale, deletion)
            # The last value wins: generation 5, member-1.
            expected[v] = (
                "Stable",
                "consumer",
                "range",
                [("member-1", instance, "client-1", "/10.0.0.7", g.subscription(["t"], b"sub"), b"assigned")],
                NONE,
                ILLEGAL_GENERATION,
                [(0, GROUP_SUBSCRIBED_TO_TOPIC)],
            )
        assert results == expected


async def test_RL_4_empty_and_deleted_groups(make_config: Callable[..., Any]) -> None:
    async def body(served: Served, client: Any) -> None:
        empty = group_value(protocol_type="", generation=0, protocol=None, leader=None)
        _append(served.broker, "rl4-empty", build_batch([(group_key("rl4-empty"), empty)]))
        typed = group_value(protocol_type="consumer", generation=3, protocol=None, leader=None, current_state_timestamp=5)
        _append(served.broker, "rl4-typed", build_batch([(group_key("rl4-typed"), typed)]))
        gone = group_value(generation=2, leader="m", members=[_member(3, "m")])
        _append(served.broker, "rl4-gone", build_batch([(group_key("rl4-gone"), gone), (group_key("rl4-gone"), None)]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        groups = await listed(client)
        assert (groups["rl4-empty"].protocol_type, groups["rl4-empty"].group_state) == ("", "Empty")
        assert (groups["rl4-typed"].protocol_type, groups["rl4-typed"].group_state) == ("consumer", "Empty")
        assert "rl4-gone" not in groups
        assert (await describe_one(client, "rl4-gone")).group_state == "Dead"


# -- RL-6 ------------------------------------------------------------------------------------------


async def test_RL_6_member_sessions_are_armed_after_load(make_config: Callable[..., Any]) -> None:
    async def body(served: Served, client: Any) -> None:
        value = group_value(generation=3, leader="member-1", members=[_member(3, session=600)])
        _append(served.broker, "rl6-session", build_batch([(group_key("rl6-session"), value)]))

    await _first_life(make_config, body, group_min_session_timeout_ms=100)
    async with serving(make_config(group_min_session_timeout_ms=100)) as served:
        client = await served.ready()
        # The group was loaded (Stable with its member, or already on its way out)...
        assert (await describe_one(client, "rl6-session")).group_state in ("Stable", "PreparingRebalance", "Empty")
        # ...nobody heartbeats: the member's session expires and the group rebalances to Empty.
        await wait_state(client, "rl6-session", "Empty")


async def test_RL_6_group_over_max_size_rebalances_at_load(make_config: Callable[..., Any]) -> None:
    async def body(served: Served, client: Any) -> None:
        value = group_value(generation=3, leader="member-0", members=[_member(0, "member-0"), _member(0, "member-1")])
        _append(served.broker, "rl6-size", build_batch([(group_key("rl6-size"), value)]))

    await _first_life(make_config, body)
    async with serving(make_config(group_max_size=1)) as served:
        client = await served.ready()
        assert (await describe_one(client, "rl6-size")).group_state == "PreparingRebalance"


async def test_RL_6_expiry_cycle_starts_after_load(make_config: Callable[..., Any]) -> None:
    async def body(served: Served, client: Any) -> None:
        assert await g.commit(client, "rl6-expiry", {("t", 0): 1}) == {("t", 0): NONE}

    await _first_life(make_config, body)
    async with serving(make_config(offsets_retention_minutes=1, offsets_retention_check_interval_ms=50)) as served:
        client = await served.ready()
        # Replayed: the offset is there after the reload (and not yet expired: committed just now)...
        assert await committed(client, "rl6-expiry") == {("t", 0): 1}
        # ...and the expiry cycle, started by the load, removes it once it is older than the retention.
        served.broker.clock.advance(2 * 60_000)

        async def gone() -> bool:
            return await committed(client, "rl6-expiry") == {}

        await async_wait_until(gone, timeout=10, message="the reloaded offset to expire")


# -- RF-3 (reading) ------------------------------------------------------------------------------------


async def test_RF_3_every_offset_value_version_is_read(make_config: Callable[..., Any]) -> None:
    cases = [(key_type, value_version) for key_type in (0, 1) for value_version in (0, 1, 2, 3)]

    async def body(served: Served, client: Any) -> None:
        for key_type, value_version in cases:
            group = f"rf3-k{key_type}-v{value_version}"
            value = offset_value(44, "meta", 1_000, version=value_version, leader_epoch=6, expire_timestamp=10**15)
            _append(served.broker, group, build_batch([(offset_key(group, "t", 2, record_type=key_type), value)]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        results = {case: (await fetch_group(client, f"rf3-k{case[0]}-v{case[1]}", {"t": [2]})).rows for case in cases}
        # An absent leader epoch reads as -1.
        assert results == {(k, v): {("t", 2): (44, 6 if v >= 3 else -1, "meta", NONE)} for k, v in cases}


# -- RC-2 ------------------------------------------------------------------------------------------


async def test_RC_2_replay_of_the_compacted_log_equals_replay_of_the_full_log(make_config: Callable[..., Any]) -> None:
    config = {"offsets_topic_segment_bytes": 2048, "offsets_compaction_interval_ms": 50, "offsets_delete_retention_ms": 0}
    # All groups on one offsets partition, so that its log rolls many segments and compacts.
    groups = groups_on_partition(2, N, 6, "rc2")
    deleted, stable = groups[4], groups[5]
    snapshot: dict[str, Any] = {}

    async def body(served: Served, client: Any) -> None:
        rng = random.Random(2)
        (m,) = await form_group(served.connect, stable, assignments=[b"kept"])
        written = 0
        for round_ in range(300):
            group = rng.choice(groups[:5])
            offsets = {(rng.choice("tu"), rng.randrange(2)): rng.randrange(10**6) for _ in range(3)}
            assert await g.commit(client, group, offsets) == dict.fromkeys(offsets, NONE)
            written += len(offsets)
            if round_ == 200:
                assert [r.error_code for r in (await g.delete_groups(client, [deleted])).results] == [NONE]
        assert await g.commit(client, stable, {("t", 2): 9}, generation=m.generation, member_id=m.member_id) == {("t", 2): NONE}

        async def compacted() -> bool:
            return len(read_log(served.broker, 2)) < written // 2

        await async_wait_until(compacted, timeout=10, message="__consumer_offsets to be compacted")
        snapshot.update(await _snapshot(client, groups))
        snapshot["member"] = (m.member_id, m.generation)

    await _first_life(make_config, body, **config)
    async with serving(make_config(**config)) as served:
        client = await served.ready()
        member_id, generation = snapshot.pop("member")
        assert await _snapshot(client, groups) == snapshot
        assert (await g.heartbeat(client, stable, member_id, generation)).error_code == NONE


async def test_RC_2_tombstones_for_unknown_keys_are_tolerated(make_config: Callable[..., Any]) -> None:
    (group,) = groups_on_partition(4, N, 1, "rc2-host")

    async def body(served: Served, client: Any) -> None:
        assert await g.commit(client, group, {("t", 0): 8}) == {("t", 0): NONE}
        # What compaction can leave behind: tombstones whose values were removed long ago.
        _append(served.broker, "rc2-never", build_batch([(offset_key("rc2-never", "t", 0), None), (group_key("rc2-never"), None)]))
        _append(served.broker, group, build_batch([(offset_key(group, "nonexistent-topic", 7), None)]))

    await _first_life(make_config, body)
    async with serving(make_config()) as served:
        client = await served.ready()
        assert await committed(client, group) == {("t", 0): 8}
        assert "rc2-never" not in await listed(client)
