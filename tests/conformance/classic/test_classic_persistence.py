"""CT-7 (what a classic group persists) and RL-4/RL-6 (how it reloads), across a broker restart.

Each test stops the in-process broker and starts a new one on the same data directory. They
need the durable __consumer_offsets log of the storage branch: until it merges, coord-dev's
in-memory stand-in forgets everything at stop and these tests fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from broker import Broker
from tests.support.classic import (
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    LONG_MS,
    NONE,
    NOT_COORDINATOR,
    GroupEnv,
    Member,
    settle,
    stable_group,
)
from tests.support.groups import delete_groups
from tests.support.raw_client import RawClient

Restart = Callable[..., Awaitable[GroupEnv]]


@pytest.fixture
async def restart() -> AsyncIterator[Restart]:
    """Stop `env`'s broker, start a new one on its data dir (with config `overrides`), and move
    `members` over to it."""
    brokers: list[Broker] = []
    clients: list[RawClient] = []

    async def do(env: GroupEnv, members: list[Member], **overrides: Any) -> GroupEnv:
        config = dataclasses.replace(env.broker.config, **overrides)
        await env.broker.stop()
        b = Broker(config)
        await b.start()
        brokers.append(b)
        assert b.coordinator is not None
        await asyncio.wait_for(b.coordinator.loaded.wait(), 10)

        async def connect(client_id: str | None = "raw-client") -> RawClient:
            c = await RawClient.connect(b.bootstrap, client_id)
            clients.append(c)
            return c

        new_env = GroupEnv(b, connect)
        for m in members:
            m.env = new_env
            m._conns = []
        return new_env

    yield do
    for c in clients:
        await c.close()
    for b in brokers:
        await b.stop()


async def test_CT_7_stable_group_reloads_at_its_generation(env: GroupEnv, restart: Restart) -> None:
    """The leader's SyncGroup wrote the group: it reloads Stable (RL-4) with its generation,
    protocol, leader, members and assignments."""
    leader, follower = await stable_group(env, "g", 2)
    before = await env.describe("g")
    env = await restart(env, [leader, follower])
    after = await env.describe("g")
    assert (after.state, after.protocol_type, after.protocol_data) == ("Stable", "consumer", "range")
    assert {m: (x.client_id, bytes(x.member_metadata), bytes(x.member_assignment)) for m, x in after.members.items()} == {
        m: (x.client_id, bytes(x.member_metadata), bytes(x.member_assignment)) for m, x in before.members.items()
    }
    assert await leader.heartbeat() == await follower.heartbeat() == NONE  # the same generation
    resp = await follower.sync()
    assert (resp.error_code, bytes(resp.assignment)) == (NONE, bytes(before.members[follower.member_id].member_assignment))
    rejoin = await settle(await follower.send_join())  # a follower with the same single protocol: no rebalance
    assert (rejoin.error_code, rejoin.generation_id, rejoin.leader) == (NONE, follower.generation, leader.member_id)


async def test_RL_4_members_that_keep_heartbeating_stay(env: GroupEnv, restart: Restart) -> None:
    """Liveness timers are armed at load (RL-6): the member that heartbeats stays, the silent one
    is expired after its session timeout and the group rebalances without it."""
    alive, silent = await stable_group(env, "g", 2, session_ms=500, rebalance_ms=LONG_MS)
    env = await restart(env, [alive, silent])
    beat = await alive.keep_alive(interval_ms=50)
    try:
        await env.wait_state("g", "PreparingRebalance")
        assert set((await env.describe("g")).members) == {alive.member_id}
        resp = await alive.join()
    finally:
        beat.cancel()
    assert (resp.error_code, resp.generation_id, [m.member_id for m in resp.members]) == (NONE, 3, [alive.member_id])


async def test_CT_7_rebalance_in_progress_is_not_persisted(env: GroupEnv, restart: Restart) -> None:
    leader, follower = await stable_group(env, "g", 2, rebalance_ms=LONG_MS)
    parked = await leader.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"
    env = await restart(env, [leader, follower])
    assert (await settle(parked)).error_code == NOT_COORDINATOR  # CT-6 at the stop
    d = await env.describe("g")
    assert (d.state, set(d.members)) == ("Stable", {leader.member_id, follower.member_id})
    assert await follower.heartbeat() == NONE  # the last persisted generation


async def test_CT_7_empty_group_is_persisted_with_its_generation(env: GroupEnv, restart: Restart) -> None:
    (m,) = await stable_group(env, "g", 1)
    await m.leave()  # generation 2, Empty
    env = await restart(env, [m])
    d = await env.describe("g")
    assert (d.state, d.protocol_type, d.members) == ("Empty", "consumer", {})
    newcomer = env.member("g", "newcomer")
    await newcomer.join()
    assert newcomer.generation == 3


async def test_CT_7_group_created_by_join_group_is_persisted(env: GroupEnv, restart: Restart) -> None:
    m = env.member("g")
    await m.get_member_id()  # JG-3a: the "empty group" record
    env = await restart(env, [m])
    d = await env.describe("g")
    assert (d.state, d.protocol_type, d.members) == ("Empty", "", {})


async def test_CT_7_deleted_group_stays_deleted(env: GroupEnv, restart: Restart) -> None:
    """Deletion writes a tombstone: the group that reloaded Empty is gone after the next restart."""
    (m,) = await stable_group(env, "g", 1)
    await m.leave()
    env = await restart(env, [m])
    assert await env.state("g") == "Empty"
    assert [r.error_code for r in (await delete_groups(await env.ctl(), ["g"])).results] == [NONE]
    env = await restart(env, [m])
    assert await env.state("g") == "Dead"


async def test_CT_7_static_replacement_is_persisted(env: GroupEnv, restart: Restart) -> None:
    """SM-3 wrote the new member id: after the restart it is the member and the old id is fenced."""
    leader = env.member("g", "leader")
    await leader.join()
    static = env.member("g", "static", instance_id="s")
    f = await static.start_join()
    await env.barrier()
    await leader.join()
    await settle(f)
    fs = await static.start_sync()
    await leader.sync({leader.member_id: b"L", static.member_id: b"S"})
    await settle(fs)
    restarted = env.member("g", "restarted", instance_id="s")
    await restarted.join()
    restarted.generation = static.generation
    env = await restart(env, [leader, static, restarted])
    assert await restarted.heartbeat() == NONE
    assert await static.heartbeat() == FENCED_INSTANCE_ID
    assert bytes((await restarted.sync()).assignment) == b"S"


async def test_RL_4_rejoin_with_full_protocol_list_after_reload_is_a_change(env: GroupEnv, restart: Restart) -> None:
    """A reloaded member's protocol list has one entry (the selected protocol), so rejoining with
    its full list counts as changed metadata (JG-12) and rebalances; before the restart it did not."""
    protocols = [("range", b"r"), ("roundrobin", b"rr")]
    leader, follower = await stable_group(env, "g", 2, protocols=protocols, rebalance_ms=LONG_MS)
    resp = await settle(await follower.send_join())
    assert (resp.error_code, resp.generation_id) == (NONE, follower.generation)
    assert await env.state("g") == "Stable"
    env = await restart(env, [leader, follower])
    await follower.start_join()
    await env.barrier()
    assert await env.state("g") == "PreparingRebalance"


async def test_RL_6_loaded_group_over_max_size_rebalances(env: GroupEnv, restart: Restart) -> None:
    """Reloaded with group.max.size 2, a Stable group of 3 prepares a rebalance at once; the
    first two members to rejoin are accepted, the third is turned away (JG-4)."""
    members = await stable_group(env, "g", 3, rebalance_ms=LONG_MS)
    env = await restart(env, members, group_max_size=2)
    assert await env.state("g") == "PreparingRebalance"
    a, b, c = members
    await a.start_join()
    fb = await b.start_join()
    await env.barrier()
    rejected = await settle(await c.send_join())
    assert (rejected.error_code, rejected.member_id) == (GROUP_MAX_SIZE_REACHED, "")
    again = await settle(await a.send_join())  # every remaining member has joined: completes
    assert {m.member_id for m in again.members} == {a.member_id, b.member_id}
    assert (await settle(fb)).generation_id == again.generation_id
