"""Classic consumer groups formed by real clients (issue 5's scenarios), each consumer a child
process (tests/support/consumer_agent.py) against a broker process whose log shows what the
coordinator did.

Determinism: every step waits, with a deadline, for the group to settle as both the broker
(DescribeGroups) and each consumer (its rebalance callbacks) see it; a member's departure is
attributed to LeaveGroup or to session expiry by the coordinator's own log line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.embed import BrokerProcess
from tests.support.agents import LIBS, Agent, Agents, wait_group

PARTITIONS = 12


def start_broker(broker_proc: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_proc("--group-min-session-timeout-ms", "1000")


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return admin


def everything(topic: str, partitions: int = PARTITIONS) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(partitions)}


def broker_saw(bp: BrokerProcess, event: str, group: str, agent: Agent) -> dict[str, Any]:
    """The coordinator's log line `event` for `agent`'s member in `group`."""
    return bp.wait_for(lambda r: r.get("event") == event and r.get("group") == group and r.get("member") == agent.member_id, timeout=30)


def test_four_consumers_of_each_library_through_leave_and_death(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """Three groups on one topic of 12 partitions, one per library, 4 consumers each (12 at
    once): each group's consumers own the 12 partitions once each; after one consumer of each
    group closes (LeaveGroup) and another is SIGKILLed (no LeaveGroup: its session expires),
    the survivors own them all again."""
    bp = start_broker(broker_proc)
    topic = "shared"
    admin = create_topic(bp.bootstrap, topic)
    groups = {lib: f"g-four-{lib}" for lib in LIBS}
    members = {lib: [agents.start(lib, f"{lib}-{i}", bp.bootstrap, groups[lib], [topic]) for i in range(4)] for lib in LIBS}

    for lib in LIBS:
        owned = wait_group(admin, groups[lib], members[lib], everything(topic))
        assert sorted(len(s) for s in owned.values()) == [3, 3, 3, 3], lib

    for lib in LIBS:
        members[lib][0].close()
    for lib in LIBS:
        broker_saw(bp, "member left", groups[lib], members[lib][0])
        owned = wait_group(admin, groups[lib], members[lib][1:], everything(topic))
        assert sorted(len(s) for s in owned.values()) == [4, 4, 4], lib

    for lib in LIBS:
        members[lib][1].kill()
    for lib in LIBS:
        killed = members[lib][1]
        expired = broker_saw(bp, "member expired", groups[lib], killed)
        assert expired["session_timeout_ms"] == 3000
        owned = wait_group(admin, groups[lib], members[lib][2:], everything(topic))
        assert sorted(len(s) for s in owned.values()) == [6, 6], lib
        assert not [r for r in bp.records if r.get("event") == "member left" and r.get("member") == killed.member_id]


@pytest.mark.parametrize("leader", LIBS)
def test_mixed_group_of_three_libraries_shares_partitions(leader: str, broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """One member of each library, all with `range`: each library's assignor, as the leader,
    reads the others' subscriptions and hands every member its share. The leader is the first
    member to join, so it starts alone and the other two join the group it formed."""
    bp = start_broker(broker_proc)
    topic, group = f"mixed-{leader}", f"g-mixed-{leader}"
    admin = create_topic(bp.bootstrap, topic)
    first = agents.start(leader, f"{leader}-leader", bp.bootstrap, group, [topic])
    wait_group(admin, group, [first], everything(topic))
    others = [agents.start(lib, f"{lib}-follower", bp.bootstrap, group, [topic]) for lib in LIBS if lib != leader]
    members = [first, *others]

    owned = wait_group(admin, group, members, everything(topic))
    completed = bp.wait_for(lambda r: r.get("event") == "join phase completed" and r.get("group") == group and r.get("members") == 3)
    assert completed["leader"] == first.member_id and completed["protocol"] == "range"
    # range over 12 partitions and 3 members: contiguous blocks of 4, in member-id order.
    blocks = sorted(sorted(p for _, p in parts) for parts in owned.values())
    assert blocks == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    by_member = {a.member_id: owned[a.name] for a in members}
    ordered = [by_member[m] for m in sorted(by_member)]
    assert [sorted(p for _, p in parts) for parts in ordered] == blocks

    # The leader leaves: one of the others leads the next generation with its own assignor.
    first.close()
    owned = wait_group(admin, group, others, everything(topic))
    assert sorted(len(parts) for parts in owned.values()) == [6, 6]


@pytest.mark.parametrize("lib", ["confluent", "kafka-python"])
def test_cooperative_sticky_rebalances_revoke_only_what_moves(lib: str, broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """librdkafka's (and kafka-python's) cooperative-sticky assignor (KIP-429) over the classic protocol: each change
    of membership takes incremental rebalances, and a member only ever revokes the partitions
    that move away from it: the ones it keeps are never revoked, nor lost."""
    bp = start_broker(broker_proc)
    topic, group = "coop", "g-coop"
    admin = create_topic(bp.bootstrap, topic)
    spec = {"assignor": "cooperative-sticky"}
    members: list[Agent] = []
    owned: dict[str, set[tuple[str, int]]] = {}

    def change(step: Callable[[], None], expected: list[Agent]) -> dict[str, set[tuple[str, int]]]:
        """Run `step` and check that each continuing member revoked exactly what moved away."""
        before = dict(owned)
        marks = {a.name: a.mark for a in expected}
        step()
        after = wait_group(admin, group, expected, everything(topic))
        for agent in expected:
            if agent.name not in before:
                continue
            moved_away = before[agent.name] - after[agent.name]
            assert agent.moved("revoked", since=marks[agent.name]) == moved_away, agent.name
            assert agent.moved("lost", since=marks[agent.name]) == set(), agent.name
            assert agent.moved("assigned", since=marks[agent.name]) == after[agent.name] - before[agent.name], agent.name
        return after

    for i in range(3):
        agent = agents.start(lib, f"coop-{i}", bp.bootstrap, group, [topic], **spec)
        members.append(agent)
        owned = change(lambda: None, list(members))
        assert sorted(len(s) for s in owned.values()) == {1: [12], 2: [6, 6], 3: [4, 4, 4]}[len(members)]

    # Departures: the leaver's partitions are redistributed; nobody else revokes anything.
    owned = change(members[1].close, [members[0], members[2]])
    assert sorted(len(s) for s in owned.values()) == [6, 6]
    owned = change(members[2].kill, [members[0]])
    assert owned == {members[0].name: everything(topic)}
    phases = [r for r in bp.records if r.get("event") == "join phase completed" and r.get("group") == group]
    assert {r["protocol"] for r in phases} == {"cooperative-sticky"}


@pytest.mark.parametrize("lib", LIBS)
def test_member_exceeding_max_poll_interval_leaves(lib: str, broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """A consumer that stops polling for longer than max.poll.interval.ms leaves the group
    itself (LeaveGroup, while its heartbeats would have kept it in) and the group rebalances
    without it; once it polls again it rejoins."""
    bp = start_broker(broker_proc)
    topic, group = f"slow-{lib}", f"g-slow-{lib}"
    admin = create_topic(bp.bootstrap, topic)
    spec = {"max_poll_interval_ms": 4000}
    slow = agents.start(lib, f"{lib}-slow", bp.bootstrap, group, [topic], **spec)
    steady = agents.start(lib, f"{lib}-steady", bp.bootstrap, group, [topic], **spec)
    wait_group(admin, group, [slow, steady], everything(topic))

    slow_member = slow.member_id
    slow.send("stall")
    slow.wait_event("stalled")
    left = bp.wait_for(lambda r: r.get("event") == "member left" and r.get("member") == slow_member, timeout=60)
    assert left["group"] == group
    assert wait_group(admin, group, [steady], everything(topic)) == {steady.name: everything(topic)}
    assert not [r for r in bp.records if r.get("event") == "member expired" and r.get("member") == slow_member]

    slow.send("resume")
    owned = wait_group(admin, group, [slow, steady], everything(topic))
    assert sorted(len(s) for s in owned.values()) == [6, 6]
