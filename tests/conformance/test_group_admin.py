"""DescribeGroups, ListGroups and DeleteGroups: spec rules DG-1..DG-2, LI-1..LI-4, DL-1..DL-3.

Groups are real classic groups formed over the raw protocol. Coordinator errors per group
(DG-2) and the contribution of a shard that is not hosted (LI-1) use a shard whose log holds an
undecodable record, loaded at restart (they wait for storage), as does LI-1's loading case (a
shard kept LOADING by ballast in its log, see test_routing.py). Not covered: null group ids (DG-2, DL-2): the wire schemas make these strings
non-nullable, so a null cannot be sent in a well-formed request; consumer (KIP-848) groups.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from broker import Broker
from broker.coordinator.list_order import GroupTable, coordinator_partitions
from tests.support import consumer_groups as cg
from tests.support import groups as g
from tests.support.coordinator import (
    COORDINATOR_LOAD_IN_PROGRESS,
    GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    committed,
    create_topic,
    form_group,
    groups_on_partition,
    listed,
    partition_of,
    ready_client,
    serving,
    wait_ready,
    wait_state,
)
from tests.support.offsets_log import GroupKey, OffsetKey, append_to_log, build_batch, read_all_logs, write_ballast

CLIENT_HOST = "/127.0.0.1"  # Java InetAddress.toString() of the peer (JG-10)


async def _setup(broker: Broker, raw: Any) -> Any:
    create_topic(broker, "t", 3)
    return await ready_client(raw)


def _by_id(resp: Any) -> dict[str, Any]:
    return {x.group_id: x for x in resp.groups}


async def _preparing(raw: Any, client: Any, group: str, **kw: Any) -> Any:
    """Start a rebalance of a Stable group with a newcomer whose JoinGroup stays parked."""
    newcomer = await raw("newcomer")
    first = await g.join(newcomer, group, "", **kw)
    newcomer.send(g.join_request(group, first.member_id, **kw))
    return await wait_state(client, group, "PreparingRebalance")


# -- DG-1 ------------------------------------------------------------------------------------------


async def test_DG_1_stable_group_shows_protocol_metadata_and_assignments(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    sub_rr, sub_range = g.subscription(["t"], b"rr"), g.subscription(["t"], b"range")
    protocols = [("roundrobin", sub_rr), ("range", sub_range)]
    members = await form_group(raw, "dg1", 2, protocols=protocols, instance_ids=["static-0", None], assignments=[b"assign-0", b"assign-1"])
    assert sorted(m.assignment for m in members) == [b"assign-0", b"assign-1"]
    results, expected = {}, {}
    for v in range(6):
        (d,) = (await g.describe(client, ["dg1"], version=v)).groups
        # Not requested: INT32_MIN on the wire, which kafka-python decodes as None (bit 31 alone).
        ops = d.authorized_operations if v >= 3 else None
        got = sorted(
            (m.member_id, m.group_instance_id if v >= 4 else None, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
            for m in d.members
        )
        results[v] = (d.error_code, d.group_id, d.group_state, d.protocol_type, d.protocol_data, ops, got)
        # Each member: its metadata for the selected protocol and its assignment.
        want = sorted(
            (m.member_id, m.instance_id if v >= 4 else None, f"member-{i}", CLIENT_HOST, sub_rr, m.assignment)
            for i, m in enumerate(members)
        )
        expected[v] = (NONE, "dg1", "Stable", "consumer", "roundrobin", None, want)
    assert results == expected


async def test_DG_1_other_states_hide_protocol_and_metadata(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    (c,) = await form_group(raw, "dg1-completing", sync=False)
    await wait_state(client, "dg1-completing", "CompletingRebalance")
    (p,) = await form_group(raw, "dg1-preparing", assignments=[b"kept"])
    await _preparing(raw, client, "dg1-preparing")
    (e,) = await form_group(raw, "dg1-empty")
    await g.leave(e.client, "dg1-empty", [(e.member_id, None)])
    await wait_state(client, "dg1-empty", "Empty")
    assert await g.commit(client, "dg1-simple", {("t", 0): 1}) == {("t", 0): NONE}
    names = ["dg1-completing", "dg1-preparing", "dg1-empty", "dg1-simple"]
    results = {}
    for v in range(6):
        got = _by_id(await g.describe(client, names, version=v))
        results[v] = {
            name: (
                d.error_code,
                d.group_state,
                d.protocol_type,
                d.protocol_data,
                sorted((m.member_id, m.member_metadata, m.member_assignment) for m in d.members),
            )
            for name, d in got.items()
        }
    newcomer = next(m.member_id for m in (await g.describe(client, ["dg1-preparing"])).groups[0].members if m.member_id != p.member_id)
    expected = {
        "dg1-completing": (NONE, "CompletingRebalance", "consumer", "", [(c.member_id, b"", b"")]),
        # PreparingRebalance from Stable keeps the stored assignment; the newcomer has none.
        "dg1-preparing": (NONE, "PreparingRebalance", "consumer", "", sorted([(p.member_id, b"", b"kept"), (newcomer, b"", b"")])),
        "dg1-empty": (NONE, "Empty", "consumer", "", []),
        "dg1-simple": (NONE, "Empty", "", "", []),
    }
    assert results == {v: expected for v in range(6)}


# -- DG-2 ------------------------------------------------------------------------------------------


async def test_DG_2_unknown_group_is_dead_without_error(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "", {("t", 0): 1}) == {("t", 0): NONE}
    results = {}
    for v in range(6):
        got = _by_id(await g.describe(client, ["dg2-nobody", "", "dg2-other"], version=v))
        results[v] = {
            k: (d.error_code, d.group_state, d.protocol_type, d.protocol_data, d.members, d.authorized_operations if v >= 3 else None)
            for k, d in got.items()
        }
    dead = (NONE, "Dead", "", "", [], None)  # authorized operations: INT32_MIN (decoded as None)
    # "" is looked up like any other id: it exists as a simple group.
    expected = {"dg2-nobody": dead, "dg2-other": dead, "": (NONE, "Empty", "", "", [], None)}
    assert results == {v: expected for v in range(6)}


async def test_DG_2_v6_reports_groups_that_are_not_classic_as_not_found(broker: Broker, raw: Any) -> None:
    """DescribeGroups v6 (KIP-1043), as Kafka 4.4 answers it: GROUP_ID_NOT_FOUND with a message for
    an unknown group and for a consumer (KIP-848) group, still with state Dead; classic groups as before."""
    from tests.support.consumer_groups import CgMember

    client = await _setup(broker, raw)
    assert await g.commit(client, "dg2-simple", {("t", 0): 1}) == {("t", 0): NONE}
    await CgMember(client, "dg2-consumer", ["t"]).join()
    got = _by_id(await g.describe(client, ["dg2-nobody", "dg2-consumer", "dg2-simple"], version=6))
    assert {k: (d.error_code, d.error_message, d.group_state, d.members) for k, d in got.items()} == {
        "dg2-nobody": (GROUP_ID_NOT_FOUND, "Group dg2-nobody not found.", "Dead", []),
        "dg2-consumer": (GROUP_ID_NOT_FOUND, "Group dg2-consumer is not a classic group.", "Dead", []),
        "dg2-simple": (NONE, None, "Empty", []),
    }


async def _failed_shard(make_config: Callable[..., Any], bad: int, groups: list[str]) -> None:
    """Create simple groups, then append an undecodable record to partition `bad` (RL-2)."""
    async with serving(make_config()) as served:
        create_topic(served.broker, "t")
        client = await served.ready()
        for group in groups:
            assert await g.commit(client, group, {("t", 0): 1}) == {("t", 0): NONE}
        append_to_log(served.broker, bad, build_batch([(b"\x00\x02\x00\x09trunc", None)]))


async def test_DG_2_coordinator_errors_are_per_group(make_config: Callable[..., Any]) -> None:
    (lost,) = groups_on_partition(4, 5, 1, "dg2-lost")
    (fine,) = groups_on_partition(0, 5, 1, "dg2-fine")
    await _failed_shard(make_config, 4, [lost, fine])
    async with serving(make_config()) as served:
        client = await served.ready()
        got = _by_id(await g.describe(client, [lost, fine]))
        assert got[lost].error_code == NOT_COORDINATOR
        assert (got[fine].error_code, got[fine].group_state) == (NONE, "Empty")


# -- LI-1 ------------------------------------------------------------------------------------------


async def test_LI_1_lists_the_groups_of_every_shard(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    names = [groups_on_partition(p, 5, 1, "li1")[0] for p in range(5)] + [""]
    for name in names:
        assert await g.commit(client, name, {("t", 0): 1}) == {("t", 0): NONE}
    assert set(await listed(client)) == set(names)


async def test_LI_1_shard_not_hosted_contributes_nothing(make_config: Callable[..., Any]) -> None:
    (lost,) = groups_on_partition(2, 5, 1, "li1-lost")
    (fine,) = groups_on_partition(3, 5, 1, "li1-fine")
    await _failed_shard(make_config, 2, [lost, fine])
    async with serving(make_config()) as served:
        client = await served.ready()
        resp = await g.list_groups(client)
        assert resp.error_code == NONE
        assert [x.group_id for x in resp.groups] == [fine]


# -- LI-2 ------------------------------------------------------------------------------------------


async def test_LI_2_classic_group_fields_by_version(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "li2-simple", {("t", 0): 1}) == {("t", 0): NONE}
    await form_group(raw, "li2-consumer")
    await form_group(raw, "li2-connect", protocol_type="connect", protocols=[("default", b"x")])
    results = {}
    for v in range(6):
        resp = await g.list_groups(client, version=v)
        results[v] = (
            resp.error_code,
            {x.group_id: (x.protocol_type, x.group_state if v >= 4 else None, x.group_type if v >= 5 else None) for x in resp.groups},
        )
    expected = {}
    for v in range(6):
        state = (lambda s: s) if v >= 4 else (lambda s: None)
        kind = "classic" if v >= 5 else None
        expected[v] = (
            NONE,
            {
                "li2-simple": ("", state("Empty"), kind),
                "li2-consumer": ("consumer", state("Stable"), kind),
                "li2-connect": ("connect", state("Stable"), kind),
            },
        )
    assert results == expected


# -- LI-3 ------------------------------------------------------------------------------------------


async def _three_states(raw: Any, client: Any) -> None:
    assert await g.commit(client, "li3-empty", {("t", 0): 1}) == {("t", 0): NONE}
    await form_group(raw, "li3-stable")
    await form_group(raw, "li3-completing", sync=False)
    await wait_state(client, "li3-completing", "CompletingRebalance")


STATE_FILTERS = [
    ([], {"li3-empty", "li3-stable", "li3-completing"}),
    (["Stable"], {"li3-stable"}),
    (["stable"], {"li3-stable"}),
    (["  EMPTY  "], {"li3-empty"}),
    (["completingrebalance", "Stable"], {"li3-stable", "li3-completing"}),
    (["bogus"], set()),
    (["Dead"], set()),
]

TYPE_FILTERS = [
    (["classic"], [], {"li3-empty", "li3-stable", "li3-completing"}),
    (["CLASSIC"], [], {"li3-empty", "li3-stable", "li3-completing"}),
    (["consumer"], [], set()),
    (["share"], [], set()),
    (["bogus"], [], set()),
    (["Classic", "consumer"], ["Empty"], {"li3-empty"}),
    (["consumer"], ["Stable"], set()),
]


async def test_LI_3_state_filter_is_trimmed_and_case_insensitive(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    await _three_states(raw, client)
    results = {(v, tuple(states)): set(await listed(client, version=v, states=states)) for v in (4, 5) for states, _ in STATE_FILTERS}
    assert results == {(v, tuple(states)): expected for v in (4, 5) for states, expected in STATE_FILTERS}


async def test_LI_3_type_filter_and_both_filters_must_pass(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    await _three_states(raw, client)
    results = {(tuple(t), tuple(s)): set(await listed(client, version=5, types=t, states=s)) for t, s, _ in TYPE_FILTERS}
    assert results == {(tuple(t), tuple(s)): expected for t, s, expected in TYPE_FILTERS}


# -- LI-4 ------------------------------------------------------------------------------------------


async def _consumer_member(client: Any, group: str) -> None:
    resp = await cg.heartbeat(client, group, str(uuid.uuid4()), topics=["t"], rebalance_timeout_ms=30_000, owned={})
    assert resp.error_code == NONE, resp


async def test_LI_4_groups_of_every_type_in_table_order_and_the_same_after_a_restart(make_config: Callable[..., Any]) -> None:
    """On a fresh broker each table's history is known: the answer goes partition by partition in
    the coordinator map's order and, within one, interleaves the types as the table gives them
    (twelve groups grow it to 16 slots; two deleted, one made again, one simple group turned into
    a consumer group). A restart replays the log into the same tables."""
    many, few = groups_on_partition(2, 5, 12, "li4"), groups_on_partition(3, 5, 3, "li4")
    tables = {2: GroupTable(), 3: GroupTable()}
    kinds: dict[str, str] = {}

    def made(group: str, kind: str) -> None:
        tables[partition_of(group, 5)].put(group)
        kinds[group] = kind

    try:
        async with serving(make_config()) as served:
            create_topic(served.broker, "t")
            client = await served.ready()
            for i, group in enumerate(many + few):
                if i % 3 == 0:
                    await _consumer_member(client, group)
                    made(group, "consumer")
                else:
                    assert await g.commit(client, group, {("t", 0): 1}) == {("t", 0): NONE}
                    made(group, "classic")
            resp = await g.delete_groups(client, [many[1], many[4]])
            assert [r.error_code for r in resp.results] == [NONE, NONE]
            tables[2].remove(many[1])
            tables[2].remove(many[4])
            assert await g.commit(client, many[4], {("t", 0): 2}) == {("t", 0): NONE}
            made(many[4], "classic")
            await _consumer_member(client, many[2])  # its tombstone, then a consumer group's records
            tables[2].remove(many[2])
            made(many[2], "consumer")
            expected = [(x, kinds[x]) for p in coordinator_partitions("__consumer_offsets", 5) if p in tables for x in tables[p]]
            assert tables[2].capacity == 16
            # Partition 3 before 2, and within 2 the types interleaved (not classic, then consumer).
            assert [partition_of(x, 5) for x, _ in expected] == [3] * 3 + [2] * 11
            second = [kind for x, kind in expected if partition_of(x, 5) == 2]
            assert sum(a != b for a, b in pairwise(second)) > 1
            before = [(x.group_id, x.group_type) for x in (await g.list_groups(client)).groups]
            assert before == expected
        async with serving(make_config()) as served:
            client = await served.ready()
            assert [(x.group_id, x.group_type) for x in (await g.list_groups(client)).groups] == before
    finally:
        shutil.rmtree(make_config().data_dir, ignore_errors=True)


# -- DL-1 ------------------------------------------------------------------------------------------


async def test_DL_1_duplicate_names_are_processed_once(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    results = {}
    for v in range(3):
        assert await g.commit(client, f"dl1-v{v}", {("t", 0): 1}) == {("t", 0): NONE}
        resp = await g.delete_groups(client, [f"dl1-v{v}", "dl1-absent", f"dl1-v{v}", "dl1-absent"], version=v)
        results[v] = sorted((r.group_id, r.error_code) for r in resp.results)
    assert results == {v: [("dl1-absent", GROUP_ID_NOT_FOUND), (f"dl1-v{v}", NONE)] for v in range(3)}


# -- DL-2 ------------------------------------------------------------------------------------------


async def test_DL_2_validation(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    results, expected = {}, {}
    for v in range(3):
        assert await g.commit(client, f"dl2-simple-v{v}", {("t", 0): 1}) == {("t", 0): NONE}
        (left,) = await form_group(raw, f"dl2-empty-v{v}")
        await g.leave(left.client, f"dl2-empty-v{v}", [(left.member_id, None)])
        await wait_state(client, f"dl2-empty-v{v}", "Empty")
        await form_group(raw, f"dl2-stable-v{v}")
        await form_group(raw, f"dl2-completing-v{v}", sync=False)
        await wait_state(client, f"dl2-completing-v{v}", "CompletingRebalance")
        await form_group(raw, f"dl2-preparing-v{v}")
        await _preparing(raw, client, f"dl2-preparing-v{v}")
        names = ["dl2-absent", ""] + [f"dl2-{kind}-v{v}" for kind in ("simple", "empty", "stable", "completing", "preparing")]
        resp = await g.delete_groups(client, names, version=v)
        results[v] = {r.group_id: r.error_code for r in resp.results}
        expected[v] = {
            "dl2-absent": GROUP_ID_NOT_FOUND,
            "": GROUP_ID_NOT_FOUND,  # "" is looked up like any id
            f"dl2-simple-v{v}": NONE,
            f"dl2-empty-v{v}": NONE,
            f"dl2-stable-v{v}": NON_EMPTY_GROUP,
            f"dl2-completing-v{v}": NON_EMPTY_GROUP,
            f"dl2-preparing-v{v}": NON_EMPTY_GROUP,
        }
    assert results == expected
    assert {k for k in await listed(client) if k.startswith("dl2-")} == {
        f"dl2-{kind}-v{v}" for kind in ("stable", "completing", "preparing") for v in range(3)
    }


# -- DL-3 ------------------------------------------------------------------------------------------


async def test_DL_3_offsets_then_group_are_tombstoned(broker: Broker, raw: Any) -> None:
    client = await _setup(broker, raw)
    for v in range(3):
        await _delete_one(broker, raw, client, f"dl3-v{v}", v)


async def _delete_one(broker: Broker, raw: Any, client: Any, group: str, version: int) -> None:
    (m,) = await form_group(raw, group)
    assert await g.commit(client, group, {("t", 0): 5, ("t", 2): 6}, generation=m.generation, member_id=m.member_id) == {
        ("t", 0): NONE,
        ("t", 2): NONE,
    }
    await g.leave(m.client, group, [(m.member_id, None)])
    await wait_state(client, group, "Empty")
    resp = await g.delete_groups(client, [group], version=version)
    assert [(r.group_id, r.error_code) for r in resp.results] == [(group, NONE)]
    # Gone at once: no offsets, no group.
    assert await committed(client, group, {"t": [0, 1, 2]}) == {}
    assert (await g.describe(client, [group])).groups[0].group_state == "Dead"
    assert group not in await listed(client)
    # The log ends with the offset tombstones, then the group tombstone.
    tail = []
    for record in read_all_logs(broker):
        key = record.decoded_key
        if getattr(key, "group", None) == group:
            tail.append((key, record.value))
    assert [(type(k).__name__, v) for k, v in tail[-3:]] == [("OffsetKey", None), ("OffsetKey", None), ("GroupKey", None)]
    assert {(k.topic, k.partition) for k, _ in tail[-3:-1] if isinstance(k, OffsetKey)} == {("t", 0), ("t", 2)}
    assert isinstance(tail[-1][0], GroupKey)


async def test_LI_1_a_loading_shard_fails_the_whole_list(make_config: Callable[..., Any]) -> None:
    (early,) = groups_on_partition(0, 5, 1, "li1-early")
    try:
        async with serving(make_config()) as served:
            create_topic(served.broker, "t")
            client = await served.ready()
            assert await g.commit(client, early, {("t", 0): 1}) == {("t", 0): NONE}
            write_ballast(served.broker, 1)  # partition 1 loads slowly; later ones wait for it
        async with serving(make_config()) as served:
            client = await served.connect()
            resp = await g.list_groups(client)
            assert (resp.error_code, resp.groups) == (COORDINATOR_LOAD_IN_PROGRESS, [])
            await wait_ready(client)
            assert early in await listed(client)
    finally:
        shutil.rmtree(make_config().data_dir, ignore_errors=True)
