"""KIP-848 consumer groups formed by real clients (issue 12's scenarios): confluent-kafka
consumers with `group.protocol=consumer`, each a child process (tests/support/consumer_agent.py),
against a broker process whose log shows what the coordinator did.

Ownership is recorded from each consumer's assign/revoke callbacks, timestamped on the machine's
monotonic clock that all processes share; `never_owned_twice` replays every callback of every
consumer in time order and checks that no partition is ever held by two consumers at once (a
revocation is reported inside the callback, before the consumer acknowledges it, so before the
broker can grant the partition to anyone else). A SIGKILLed consumer holds nothing from the
moment it is killed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from broker.embed import BrokerProcess
from tests.clients.test_at_least_once import PARTITIONS as ALO_PARTITIONS
from tests.clients.test_at_least_once import PacedProducer, commits, processings
from tests.clients.test_group_scenarios import create_topic, everything
from tests.support.agents import Agent, Agents, wait_group

SESSION_MS = 3000
CONSUMER = {"group_protocol": "consumer", "max_poll_interval_ms": 30_000, "session_timeout_ms": 0, "heartbeat_interval_ms": 0}


def start_broker(broker_proc: Callable[..., BrokerProcess], *args: str) -> BrokerProcess:
    return broker_proc("--group-consumer-session-timeout-ms", str(SESSION_MS), *args)


def start(agents: Agents, name: str, bp: BrokerProcess, group: str, topics: list[str], **spec: Any) -> Agent:
    return agents.start("confluent", name, bp.bootstrap, group, topics, **{**CONSUMER, **spec})


def never_owned_twice(members: list[Agent], killed: dict[str, float] | None = None) -> None:
    killed = killed or {}
    timeline: list[tuple[float, int, str, str, list[Any]]] = []
    for agent in members:
        for event in agent.events:
            if event["e"] in ("assigned", "revoked", "lost"):
                timeline.append((event["t"], 0 if event["e"] != "assigned" else 1, agent.name, event["e"], event["parts"]))
        if agent.name in killed:
            timeline.append((killed[agent.name], 0, agent.name, "killed", []))
    owner: dict[tuple[str, int], str] = {}
    for t, _, name, kind, parts in sorted(timeline):
        if kind == "killed":
            for tp in [tp for tp, who in owner.items() if who == name]:
                del owner[tp]
            continue
        for topic, partition in parts:
            tp = (topic, partition)
            if kind == "assigned":
                assert tp not in owner or owner[tp] == name, f"{tp} assigned to {name} at {t} while {owner[tp]} owns it"
                owner[tp] = name
            elif owner.get(tp) == name:
                del owner[tp]


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_four_consumers_through_close_and_kill(assignor: str, broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    bp = start_broker(broker_proc)
    topic, group = "kip848", f"g-848-{assignor}"
    admin = create_topic(bp.bootstrap, topic)
    members = [start(agents, f"{assignor}-{i}", bp, group, [topic], remote_assignor=assignor) for i in range(4)]
    owned = wait_group(admin, group, members, everything(topic))
    assert sorted(len(s) for s in owned.values()) == [3, 3, 3, 3]
    description = admin.describe_consumer_groups([group])[group].result(30)
    assert description.type == ConsumerGroupType.CONSUMER and description.partition_assignor == assignor

    members[0].close()
    bp.wait_for(lambda r: r.get("event") == "member left" and r.get("member") == members[0].member_id, timeout=30)
    owned = wait_group(admin, group, members[1:], everything(topic))
    assert sorted(len(s) for s in owned.values()) == [4, 4, 4]

    members[1].kill()
    killed_at = time.monotonic()
    fenced = bp.wait_for(lambda r: r.get("event") == "member fenced" and r.get("member") == members[1].member_id, timeout=30)
    assert fenced["reason"] == "session timeout"
    owned = wait_group(admin, group, members[2:], everything(topic))
    assert sorted(len(s) for s in owned.values()) == [6, 6]
    never_owned_twice(members, {members[1].name: killed_at})

    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30).valid
    assert [(g.group_id, g.type, g.state) for g in listed] == [(group, ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)]
    assert [g.group_id for g in admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30).valid] == []


def test_static_member_restarts_into_its_partitions_without_an_epoch_bump(
    broker_proc: Callable[..., BrokerProcess], agents: Agents
) -> None:
    bp = start_broker(broker_proc, "--group-consumer-session-timeout-ms", "30000")
    topic, group = "kip848-static", "g-848-static"
    admin = create_topic(bp.bootstrap, topic)

    def member(i: int, name: str) -> Agent:
        return start(agents, name, bp, group, [topic], instance_id=f"instance-{i}")

    members = [member(i, f"static-{i}") for i in range(3)]
    owned = wait_group(admin, group, members, everything(topic))
    marks = {a.name: a.mark for a in members}
    bumps = len([r for r in bp.records if r.get("event") == "group epoch bumped" and r.get("group") == group])

    members[1].close()  # a static member leaves temporarily (epoch -2)
    bp.wait_for(lambda r: r.get("event") == "static member left temporarily" and r.get("group") == group, timeout=30)
    again = member(1, "static-1-again")
    after = wait_group(admin, group, [members[0], again, members[2]], everything(topic))
    assert after[again.name] == owned[members[1].name]
    for other in (members[0], members[2]):
        assert other.of_kind("revoked", "assigned", "lost", since=marks[other.name]) == [], other.name
    assert len([r for r in bp.records if r.get("event") == "group epoch bumped" and r.get("group") == group]) == bumps
    never_owned_twice([*members, again])


def test_regex_subscription_sees_a_new_topic(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    bp = start_broker(broker_proc)
    group = "g-848-regex"
    admin = create_topic(bp.bootstrap, "orders-1", 4)
    member = start(agents, "regex", bp, group, ["^orders-.*"])
    wait_group(admin, group, [member], everything("orders-1", 4))
    create_topic(bp.bootstrap, "orders-2", 2)
    create_topic(bp.bootstrap, "payments", 2)
    wait_group(admin, group, [member], everything("orders-1", 4) | everything("orders-2", 2))


def test_broker_restart_loses_no_member_and_skips_no_record(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    bp = start_broker(broker_proc, "--group-consumer-session-timeout-ms", "20000")
    topic, group = "kip848-restart", "g-848-restart"
    admin = create_topic(bp.bootstrap, topic, 4)
    members = [start(agents, f"restart-{i}", bp, group, [topic], process=True) for i in range(2)]
    owned = wait_group(admin, group, members, everything(topic, 4))
    ids = {a.name: a.member_id for a in members}
    marks = {a.name: a.mark for a in members}

    def produce(count: int, start_at: int) -> None:
        producer = Producer({"bootstrap.servers": bp.bootstrap, "linger.ms": 5})
        for i in range(start_at, start_at + count):
            producer.produce(topic, value=str(i).encode(), partition=i % 4)
        assert producer.flush(30) == 0

    produce(200, 0)
    bp.args += ["--port", str(bp.port)]  # the clients reconnect to the address they know
    bp.restart()
    produce(200, 200)
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    assert wait_group(admin, group, members, everything(topic, 4)) == owned
    assert {a.name: a.member_id for a in members} == ids
    for agent in members:
        assert agent.of_kind("revoked", "assigned", "lost", since=marks[agent.name]) == [], agent.name

    def consumed() -> set[tuple[int, int]]:
        return {(p, o) for a in members for e in a.of_kind("records") for _t, p, o in e["recs"]}

    expected = {(p, o) for p in range(4) for o in range(100)}
    deadline = time.monotonic() + 60
    while not expected <= consumed():
        assert time.monotonic() < deadline, f"missing {sorted(expected - consumed())[:10]}"
        time.sleep(0.1)


def test_mixed_group_rolling_upgrade_and_back(broker_proc: Callable[..., BrokerProcess], agents: Agents) -> None:
    """KM-2..KM-4 with real clients while records flow: classic members (kafka-python and
    confluent-kafka with group.protocol=classic) are replaced one by one by consumer-protocol
    members (the first one upgrades the group online), then the way back (the last
    consumer-protocol member to leave downgrades it). Every step settles with each partition
    owned once, no partition is ever owned twice, and every acknowledged record is processed at
    least once, each owner reading from (at least) the last commit before it took over."""
    bp = start_broker(broker_proc, "--group-min-session-timeout-ms", "1000")
    topic, group = "kip848-mixed", "g-848-mixed"
    admin = create_topic(bp.bootstrap, topic, ALO_PARTITIONS)
    parts = everything(topic, ALO_PARTITIONS)
    work = {"process": True, "commit_every": 3}
    classic = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 300, "max_poll_interval_ms": 30_000, **work}

    def old(lib: str, name: str) -> Agent:
        return agents.start(lib, name, bp.bootstrap, group, [topic], **classic)

    def new(name: str) -> Agent:
        return start(agents, name, bp, group, [topic], **work)

    def busy(members: list[Agent]) -> None:
        marks = {a.name: a.mark for a in members}
        for agent in members:
            agent.wait_for(lambda a: a.of_kind("records", since=marks[a.name]), message="records processed")

    members = [old("kafka-python", "classic-kp"), old("confluent", "classic-ck")]
    wait_group(admin, group, members, parts)
    producer = PacedProducer(bp.bootstrap, topic)
    producer.start()
    busy(members)

    upgraded = new("consumer-1")  # KM-2: the classic group becomes a consumer group
    members.append(upgraded)
    wait_group(admin, group, members, parts)
    bp.wait_for(lambda r: r.get("event") == "classic group upgraded to a consumer group" and r.get("group") == group, timeout=30)
    assert admin.describe_consumer_groups([group])[group].result(30).type == ConsumerGroupType.CONSUMER
    busy(members)
    for i, leaving in enumerate(list(members[:2]), start=2):
        leaving.close()
        members.remove(leaving)
        members.append(new(f"consumer-{i}"))
        wait_group(admin, group, members, parts)
        busy(members)

    # And back: classic members join the consumer group (KM-3), consumer-protocol members leave.
    for lib, name in (("kafka-python", "classic-kp-2"), ("confluent", "classic-ck-2")):
        members.append(old(lib, name))
        wait_group(admin, group, members, parts)
        busy(members)
    for leaving in [a for a in list(members) if a.name.startswith("consumer-")]:
        leaving.close()
        members.remove(leaving)
        wait_group(admin, group, members, parts)
        busy(members)
    bp.wait_for(lambda r: r.get("event") == "consumer group downgraded to a classic group" and r.get("group") == group, timeout=30)
    assert admin.describe_consumer_groups([group])[group].result(30).type == ConsumerGroupType.CLASSIC

    producer.stop()
    assert (producer.unflushed, producer.errors) == (0, []) and producer.acked
    everyone = agents.started

    def processed() -> set[tuple[int, int]]:
        return {(tp[1], o) for a in everyone for _, tp, o, _ in processings(a)}

    for agent in members:
        agent.wait_for(lambda a: producer.acked <= processed(), message="every acknowledged record processed")
    for agent in members:
        agent.close()
    never_owned_twice(everyone)
    # Each owner of a partition reads it in order, from (at least) the last commit made before it started.
    runs: dict[Any, dict[Any, list[tuple[float, int]]]] = {}
    for agent in everyone:
        for t, tp, o, epoch in processings(agent):
            runs.setdefault(tp, {}).setdefault((agent.name, epoch), []).append((t, o))
    all_commits = [(t, tp, o) for a in everyone for t, tp, o in commits(a)]
    for tp, by_owner in runs.items():
        for (name, _), records in by_owner.items():
            offsets = [o for _, o in records]
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (tp, name)
            before = [o for t, ctp, o in all_commits if ctp == tp and t < records[0][0]]
            assert offsets[0] >= max(before, default=0), (tp, name, offsets[0], before)
