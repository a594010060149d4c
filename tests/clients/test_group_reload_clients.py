"""A live group survives a broker restart (issue 5, CT-7/RL-4): the coordinator persisted the
group with its generation and assignment, reloads it Stable at that generation, and members
that reconnect and keep heartbeating stay in it, with their partitions and no rebalance.

One member of each library, each a child process; the broker process is stopped (SIGTERM) and
started again on the same port with the same data directory while the consumers keep running.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from broker.embed import BrokerProcess
from tests.clients.test_group_scenarios import create_topic, everything, start_broker
from tests.support.agents import LIBS, Agents, wait_group

# Longer than a broker restart plus the clients' reconnection backoff on a loaded machine.
SURVIVE = {"session_timeout_ms": 8000, "max_poll_interval_ms": 30_000}
# A longer session: the sentinel's expiry comes after the loaded members' first deadlines.
SENTINEL = {"session_timeout_ms": 10_000, "max_poll_interval_ms": 30_000}


def test_group_reloads_at_its_generation_and_members_stay(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """How the test knows the members outlived their loaded session deadlines without a
    timing assumption: a sentinel group whose only member is SIGKILLed before the restart is
    loaded too, with a longer session timeout. Its "member expired" line proves the broker's
    timers ran past the loaded members' deadlines (the loop fires timers in deadline order);
    by then a member that had not heartbeated would have expired first."""
    bp = start_broker(broker_proc)
    topic, group = "reload", "g-reload"
    admin = create_topic(bp.bootstrap, topic)
    members = [agents.start(lib, f"reload-{lib}", bp.bootstrap, group, [topic], **SURVIVE) for lib in LIBS]
    sentinel = agents.start("confluent", "sentinel", bp.bootstrap, "g-sentinel", [topic], **SENTINEL)
    owned = wait_group(admin, group, members, everything(topic))
    wait_group(admin, "g-sentinel", [sentinel], everything(topic))
    generation = [r for r in bp.records if r.get("event") == "rebalance completed" and r.get("group") == group][-1]["generation"]
    marks = {a.name: a.mark for a in members}
    ids = {a.name: a.member_id for a in members}
    sentinel.kill()

    bp.args += ["--port", str(bp.port)]  # the clients reconnect to the address they know
    bp.restart()
    bp.wait_for(lambda r: r.get("event") == "member expired" and r.get("member") == sentinel.member_id, timeout=60)
    # A new admin client: librdkafka 2.16's re-bootstrap (the only broker went away) can leave an
    # existing client's coordinator lookups on the decommissioned broker handle, never sent.
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})

    assert wait_group(admin, group, members, everything(topic)) == owned
    assert {a.name: a.member_id for a in members} == ids
    for agent in members:
        assert agent.of_kind("revoked", "assigned", "lost", since=marks[agent.name]) == [], agent.name
    assert not [r for r in bp.records if r.get("group") == group and r.get("event") in ("rebalance started", "member expired")]
    # The group is still at its generation: a new member's join starts generation + 1.
    late = agents.start("confluent", "reload-late", bp.bootstrap, group, [topic], **SURVIVE)
    wait_group(admin, group, [*members, late], everything(topic))
    completed = [r for r in bp.records if r.get("event") == "rebalance completed" and r.get("group") == group]
    assert completed[0]["generation"] == generation + 1
