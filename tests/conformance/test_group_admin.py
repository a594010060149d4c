"""DescribeGroups, ListGroups and DeleteGroups: spec rules DG-1..DG-2, LI-1..LI-3, DL-1..DL-3.

Groups are real classic groups formed over the raw protocol. Coordinator errors per group
(DG-2) and the contribution of a shard that is not hosted (LI-1) use a shard whose log holds an
undecodable record, loaded at restart (they wait for storage); LI-1's loading case is in
test_routing.py. Not covered: null group ids (DG-2, DL-2): the wire schemas make these strings
non-nullable, so a null cannot be sent in a well-formed request; consumer (KIP-848) groups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from broker import Broker
from tests.support import groups as g
from tests.support.coordinator import (
    GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    committed,
    create_topic,
    form_group,
    groups_on_partition,
    listed,
    ready_client,
    serving,
    wait_state,
)
from tests.support.offsets_log import GroupKey, OffsetKey, append_to_log, build_batch, read_all_logs

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


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
async def test_DG_1_stable_group_shows_protocol_metadata_and_assignments(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    sub_rr, sub_range = g.subscription(["t"], b"rr"), g.subscription(["t"], b"range")
    protocols = [("roundrobin", sub_rr), ("range", sub_range)]
    members = await form_group(raw, "dg1", 2, protocols=protocols, instance_ids=["static-0", None], assignments=[b"assign-0", b"assign-1"])
    resp = await g.describe(client, ["dg1"], version=version)
    (d,) = resp.groups
    assert (d.error_code, d.group_id, d.group_state, d.protocol_type, d.protocol_data) == (NONE, "dg1", "Stable", "consumer", "roundrobin")
    if version >= 3:
        # Not requested: INT32_MIN on the wire, which kafka-python decodes as None (bit 31 alone).
        assert d.authorized_operations is None
    got = {m.member_id: m for m in d.members}
    assert set(got) == {m.member_id for m in members}
    for i, m in enumerate(members):
        dm = got[m.member_id]
        assert (dm.client_id, dm.client_host) == (f"member-{i}", CLIENT_HOST)
        assert dm.member_metadata == sub_rr  # its metadata for the selected protocol
        assert dm.member_assignment == m.assignment
        if version >= 4:
            assert dm.group_instance_id == m.instance_id
    assert sorted(m.assignment for m in members) == [b"assign-0", b"assign-1"]


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_DG_1_completing_rebalance_hides_protocol_and_metadata(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "dg1-completing", sync=False)
    await wait_state(client, "dg1-completing", "CompletingRebalance")
    (d,) = (await g.describe(client, ["dg1-completing"], version=version)).groups
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("CompletingRebalance", "consumer", "")
    assert [(x.member_id, x.member_metadata, x.member_assignment) for x in d.members] == [(m.member_id, b"", b"")]


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_DG_1_preparing_rebalance_keeps_stored_assignments(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "dg1-preparing", assignments=[b"kept"])
    await _preparing(raw, client, "dg1-preparing")
    (d,) = (await g.describe(client, ["dg1-preparing"], version=version)).groups
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("PreparingRebalance", "consumer", "")
    got = {x.member_id: (x.member_metadata, x.member_assignment) for x in d.members}
    assert len(got) == 2
    assert got[m.member_id] == (b"", b"kept")
    (newcomer,) = [v for k, v in got.items() if k != m.member_id]
    assert newcomer == (b"", b"")


@pytest.mark.parametrize("version", [0, 5])
async def test_DG_1_empty_and_simple_groups(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "dg1-empty")
    await g.leave(m.client, "dg1-empty", [(m.member_id, None)])
    await wait_state(client, "dg1-empty", "Empty")
    assert await g.commit(client, "dg1-simple", {("t", 0): 1}) == {("t", 0): NONE}
    got = _by_id(await g.describe(client, ["dg1-empty", "dg1-simple"], version=version))
    assert [(x.error_code, x.group_state, x.protocol_type, x.protocol_data, x.members) for x in (got["dg1-empty"], got["dg1-simple"])] == [
        (NONE, "Empty", "consumer", "", []),
        (NONE, "Empty", "", "", []),
    ]


# -- DG-2 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
async def test_DG_2_unknown_group_is_dead_without_error(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "", {("t", 0): 1}) == {("t", 0): NONE}
    resp = await g.describe(client, ["dg2-nobody", "", "dg2-other"], version=version)
    got = _by_id(resp)
    assert sorted(got) == ["", "dg2-nobody", "dg2-other"]
    for name in ("dg2-nobody", "dg2-other"):
        d = got[name]
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data, d.members) == (NONE, "Dead", "", "", [])
        if version >= 3:
            assert d.authorized_operations is None  # INT32_MIN, decoded by kafka-python as None
    # "" is looked up like any other id: it exists as a simple group.
    assert (got[""].error_code, got[""].group_state) == (NONE, "Empty")


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


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
async def test_LI_2_classic_group_fields_by_version(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "li2-simple", {("t", 0): 1}) == {("t", 0): NONE}
    await form_group(raw, "li2-consumer")
    await form_group(raw, "li2-connect", protocol_type="connect", protocols=[("default", b"x")])
    resp = await g.list_groups(client, version=version)
    assert resp.error_code == NONE
    got = _by_id(resp)
    assert {k: v.protocol_type for k, v in got.items()} == {"li2-simple": "", "li2-consumer": "consumer", "li2-connect": "connect"}
    if version >= 4:
        assert {k: v.group_state for k, v in got.items()} == {"li2-simple": "Empty", "li2-consumer": "Stable", "li2-connect": "Stable"}
    if version >= 5:
        assert {v.group_type for v in got.values()} == {"classic"}


# -- LI-3 ------------------------------------------------------------------------------------------


async def _three_states(raw: Any, client: Any) -> None:
    assert await g.commit(client, "li3-empty", {("t", 0): 1}) == {("t", 0): NONE}
    await form_group(raw, "li3-stable")
    await form_group(raw, "li3-completing", sync=False)
    await wait_state(client, "li3-completing", "CompletingRebalance")


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], {"li3-empty", "li3-stable", "li3-completing"}),
        (["Stable"], {"li3-stable"}),
        (["stable"], {"li3-stable"}),
        (["  EMPTY  "], {"li3-empty"}),
        (["completingrebalance", "Stable"], {"li3-stable", "li3-completing"}),
        (["bogus"], set()),
        (["Dead"], set()),
    ],
)
async def test_LI_3_state_filter_is_trimmed_and_case_insensitive(broker: Broker, raw: Any, states: list[str], expected: set[str]) -> None:
    client = await _setup(broker, raw)
    await _three_states(raw, client)
    for version in (4, 5):
        assert set(await listed(client, version=version, states=states)) == expected


@pytest.mark.parametrize(
    ("types", "states", "expected"),
    [
        (["classic"], [], {"li3-empty", "li3-stable", "li3-completing"}),
        (["CLASSIC"], [], {"li3-empty", "li3-stable", "li3-completing"}),
        (["consumer"], [], set()),
        (["share"], [], set()),
        (["bogus"], [], set()),
        (["Classic", "consumer"], ["Empty"], {"li3-empty"}),
        (["consumer"], ["Stable"], set()),
    ],
)
async def test_LI_3_type_filter_and_both_filters_must_pass(
    broker: Broker, raw: Any, types: list[str], states: list[str], expected: set[str]
) -> None:
    client = await _setup(broker, raw)
    await _three_states(raw, client)
    assert set(await listed(client, version=5, types=types, states=states)) == expected


# -- DL-1 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_DL_1_duplicate_names_are_processed_once(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "dl1", {("t", 0): 1}) == {("t", 0): NONE}
    resp = await g.delete_groups(client, ["dl1", "dl1-absent", "dl1", "dl1-absent"], version=version)
    assert sorted((r.group_id, r.error_code) for r in resp.results) == [("dl1", NONE), ("dl1-absent", GROUP_ID_NOT_FOUND)]


# -- DL-2 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_DL_2_validation(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    assert await g.commit(client, "dl2-simple", {("t", 0): 1}) == {("t", 0): NONE}
    (left,) = await form_group(raw, "dl2-empty")
    await g.leave(left.client, "dl2-empty", [(left.member_id, None)])
    await wait_state(client, "dl2-empty", "Empty")
    await form_group(raw, "dl2-stable")
    await form_group(raw, "dl2-completing", sync=False)
    await wait_state(client, "dl2-completing", "CompletingRebalance")
    await form_group(raw, "dl2-preparing")
    await _preparing(raw, client, "dl2-preparing")
    names = ["dl2-absent", "", "dl2-simple", "dl2-empty", "dl2-stable", "dl2-completing", "dl2-preparing"]
    resp = await g.delete_groups(client, names, version=version)
    assert {r.group_id: r.error_code for r in resp.results} == {
        "dl2-absent": GROUP_ID_NOT_FOUND,
        "": GROUP_ID_NOT_FOUND,  # "" is looked up like any id
        "dl2-simple": NONE,
        "dl2-empty": NONE,
        "dl2-stable": NON_EMPTY_GROUP,
        "dl2-completing": NON_EMPTY_GROUP,
        "dl2-preparing": NON_EMPTY_GROUP,
    }
    assert set(await listed(client)) == {"dl2-stable", "dl2-completing", "dl2-preparing"}


# -- DL-3 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_DL_3_offsets_then_group_are_tombstoned(broker: Broker, raw: Any, version: int) -> None:
    client = await _setup(broker, raw)
    (m,) = await form_group(raw, "dl3")
    assert await g.commit(client, "dl3", {("t", 0): 5, ("t", 2): 6}, generation=m.generation, member_id=m.member_id) == {
        ("t", 0): NONE,
        ("t", 2): NONE,
    }
    await g.leave(m.client, "dl3", [(m.member_id, None)])
    await wait_state(client, "dl3", "Empty")
    resp = await g.delete_groups(client, ["dl3"], version=version)
    assert [(r.group_id, r.error_code) for r in resp.results] == [("dl3", NONE)]
    # Gone at once: no offsets, no group.
    assert await committed(client, "dl3", {"t": [0, 1, 2]}) == {}
    assert (await g.describe(client, ["dl3"])).groups[0].group_state == "Dead"
    assert "dl3" not in await listed(client)
    # The log ends with the offset tombstones, then the group tombstone.
    tail = []
    for record in read_all_logs(broker):
        key = record.decoded_key
        if getattr(key, "group", None) == "dl3":
            tail.append((key, record.value))
    assert [(type(k).__name__, v) for k, v in tail[-3:]] == [("OffsetKey", None), ("OffsetKey", None), ("GroupKey", None)]
    assert {(k.topic, k.partition) for k, _ in tail[-3:-1] if isinstance(k, OffsetKey)} == {("t", 0), ("t", 2)}
    assert isinstance(tail[-1][0], GroupKey)
