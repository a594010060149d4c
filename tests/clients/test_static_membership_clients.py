"""Static membership (KIP-345) through real consumers (`group.instance.id`), each a child
process, against a broker process whose log shows what the coordinator did.

A static member that closes does not leave the group; restarted within its session timeout it
takes its old place (a new member id, the same partitions) without a rebalance, so the other
members see no callback at all: shown for all three libraries. A second process with the same
instance id replaces the first, which the coordinator then fences: its next heartbeat is
answered FENCED_INSTANCE_ID, a fatal error for librdkafka. (Fencing is shown with
confluent-kafka only: aiokafka 0.14 heartbeats with Heartbeat v0/v1, which carry no instance
id, so Kafka's rules answer its replaced member UNKNOWN_MEMBER_ID and it rejoins, replacing
its twin in turn; kafka-python's heartbeat thread stops on the error without surfacing it.)
A static member that crashed can be removed by an admin client by its instance id.
"""

from __future__ import annotations

from collections.abc import Callable

import kafka.errors as kerrors
import pytest
from kafka import KafkaAdminClient
from kafka.admin import MemberToRemove

from broker.embed import BrokerProcess
from tests.clients.test_group_scenarios import create_topic, everything, start_broker
from tests.support.agents import Agents, wait_group

# Long enough for a process restart on a loaded machine; nothing in the tests waits for it to pass.
STATIC = {"session_timeout_ms": 30_000, "max_poll_interval_ms": 30_000}


def rebalances(bp: BrokerProcess, group: str) -> list[dict[str, object]]:
    return [r for r in bp.records if r.get("event") == "rebalance started" and r.get("group") == group]


@pytest.mark.parametrize("lib", ["confluent", "kafka-python", "aiokafka"])
def test_static_member_restarts_into_its_partitions_without_rebalance(
    lib: str, broker_proc: Callable[..., BrokerProcess], agents: Agents
) -> None:
    bp = start_broker(broker_proc)
    topic, group = "static-restart", "g-static-restart-" + lib
    admin = create_topic(bp.bootstrap, topic)

    def member(i: int, name: str) -> object:
        return agents.start(lib, name, bp.bootstrap, group, [topic], instance_id=f"instance-{i}", **STATIC)

    members = [member(i, f"static-{i}") for i in range(3)]
    owned = wait_group(admin, group, members, everything(topic))
    settled_rebalances = len(rebalances(bp, group))
    marks = {a.name: a.mark for a in members}

    restarting = members[1]
    old_member_id = restarting.member_id
    restarting.close()  # a static member does not send LeaveGroup on close
    restarted = member(1, "static-1-again")
    after = wait_group(admin, group, [members[0], restarted, members[2]], everything(topic))

    assert after[restarted.name] == owned[restarting.name]
    assert restarted.member_id != old_member_id and restarted.member_id.startswith("instance-1-")
    replaced = bp.wait_for(lambda r: r.get("event") == "static member replaced" and r.get("group") == group)
    assert (replaced["instance_id"], replaced["old_member"], replaced["state"]) == ("instance-1", old_member_id, "Stable")
    assert not [r for r in bp.records if r.get("event") in ("member left", "member expired") and r.get("group") == group]
    assert len(rebalances(bp, group)) == settled_rebalances
    for other in (members[0], members[2]):
        assert other.of_kind("revoked", "assigned", "lost", since=marks[other.name]) == [], other.name
        assert after[other.name] == owned[other.name]


def test_second_process_with_same_instance_id_fences_the_first(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    bp = start_broker(broker_proc)
    topic, group = "static-fence", "g-static-fence"
    admin = create_topic(bp.bootstrap, topic)
    members = [
        agents.start("confluent", f"fence-{i}", bp.bootstrap, group, [topic], instance_id=f"instance-{i}", **STATIC) for i in range(2)
    ]
    owned = wait_group(admin, group, members, everything(topic))
    settled_rebalances = len(rebalances(bp, group))
    first, other = members
    other_mark = other.mark

    twin = agents.start("confluent", "fence-0-twin", bp.bootstrap, group, [topic], instance_id="instance-0", **STATIC)
    after = wait_group(admin, group, [twin, other], everything(topic))
    assert after[twin.name] == owned[first.name]

    # librdkafka raises FENCED_INSTANCE_ID as a fatal error (its error_cb sees _FATAL, with the
    # broker's error's text: "Static consumer fenced by other consumer with same group.instance.id").
    fatal = first.wait_for(lambda a: next((e for e in a.of_kind("error") if e["name"] == "_FATAL"), None), message="a fatal error")
    assert "Broker: Static consumer fenced by other consumer with same group.instance.id" in fatal["str"], fatal
    assert len(rebalances(bp, group)) == settled_rebalances
    assert other.of_kind("revoked", "assigned", "lost", since=other_mark) == []


def test_admin_removes_a_dead_static_member_by_instance_id(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """A static member that crashed keeps its partitions until its (long) session expires, unless
    an operator removes it by instance id (LeaveGroup v3+ from kafka-python's admin client,
    KIP-345): the group then rebalances at once and the survivors own everything."""
    bp = start_broker(broker_proc)
    topic, group = "static-remove", "g-static-remove"
    admin = create_topic(bp.bootstrap, topic)
    members = [
        agents.start("confluent", f"remove-{i}", bp.bootstrap, group, [topic], instance_id=f"instance-{i}", **STATIC) for i in range(3)
    ]
    wait_group(admin, group, members, everything(topic))
    crashed = members[2]
    crashed.kill()

    kp_admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap, request_timeout_ms=30_000)
    try:
        removed = kp_admin.remove_group_members(
            group,
            [MemberToRemove(group_instance_id="instance-2", reason="host lost"), MemberToRemove(group_instance_id="instance-9")],
        )
    finally:
        kp_admin.close()
    assert removed == {"instance-2": kerrors.NoError, "instance-9": kerrors.UnknownMemberIdError}
    left = bp.wait_for(lambda r: r.get("event") == "member left" and r.get("group") == group)
    assert (left["member"], left["instance_id"], left["reason"]) == (crashed.member_id, "instance-2", "host lost")
    owned = wait_group(admin, group, members[:2], everything(topic))
    assert sorted(len(s) for s in owned.values()) == [6, 6]
    assert not [r for r in bp.records if r.get("event") == "member expired" and r.get("group") == group]
