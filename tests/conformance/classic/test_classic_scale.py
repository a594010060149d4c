"""A classic group of a thousand members completes a rebalance (JG-15, SG-6 at scale).

A thousand raw members (bench/classic_members.py: one connection each, JoinGroup v5 with a consumer
subscription, the leader's range assignment in its SyncGroup, heartbeats, LeaveGroup) join one group on a
1,000-partition topic at once. Every member must get its assignment from SyncGroup at one generation, the
assignments covering the partitions exactly once; then one member leaves and the survivors must do it again.
Conditions with deadlines only (`ClassicGroup.wait_complete`); the timings are bench classic_group_scale's.
"""

from __future__ import annotations

import pytest

from bench.classic_members import ClassicGroup, ClassicSpec
from broker import Broker
from tests.support.classic import GroupEnv

MEMBERS = 1000
PARTITIONS = 1000
TOPIC = "scale"


@pytest.mark.broker_config(default_partitions=PARTITIONS, group_initial_rebalance_delay_ms=0)
async def test_jg_15_a_group_of_1000_raw_members_completes_a_rebalance(broker: Broker, env: GroupEnv) -> None:
    await env.create_topic(TOPIC)
    spec = ClassicSpec(
        group="scale-1000",
        members=MEMBERS,
        topic=TOPIC,
        partitions=PARTITIONS,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=60_000,
        # Heartbeats tell members of a new rebalance: a short interval keeps the test's second round short.
        heartbeat_s=0.2,
    )
    group = await ClassicGroup.open(broker.bootstrap, spec)
    try:
        group.start()
        everyone = list(range(MEMBERS))
        generation = await group.wait_complete(everyone, deadline_s=60)
        # Every member holds what the leader assigned it at that generation: a range of ceil/floor(1000/1000) = 1.
        assert sorted(p for m in group.members for p in m.owned[TOPIC]) == list(range(PARTITIONS))
        assert {len(m.owned[TOPIC]) for m in group.members} == {1}
        assert len({m.member_id for m in group.members}) == MEMBERS

        victim = next(i for i, m in enumerate(group.members) if 0 in m.owned[TOPIC])
        await group.leave(victim)
        survivors = [i for i in everyone if i != victim]
        second = await group.wait_complete(survivors, after_generation=generation, deadline_s=60)
        assert second > generation
        owned = {i: group.members[i].owned[TOPIC] for i in survivors}
        assert sorted(p for parts in owned.values() for p in parts) == list(range(PARTITIONS))
        assert sorted(len(parts) for parts in owned.values()) == [1] * (MEMBERS - 2) + [2]
    finally:
        await group.close()
