"""Issue 13 with real clients: confluent-kafka consumers (`group.protocol=consumer`,
`group.remote.assignor=lag-aware`), each a child process (tests/support/consumer_agent.py), against a
broker process.

The consumers start "stalled" (subscribed, joined, not polling): nothing is read or committed while the group
forms, so the lags the coordinator sees are exactly what was produced, and the assignment they settle on can be
checked against the lag-aware assignor run on those lags. The assignor is sticky (issue 26): members join one
after another, so the layout depends on the order; what holds is count balance and a lag spread within one
partition's lag of the from-scratch answer's, reached with no more moves than that answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

from broker.coordinator.assignors import GroupSpec, MemberSpec, get
from broker.coordinator.assignors.base import lag_spread
from broker.embed import BrokerProcess
from tests.clients.test_consumer_protocol_clients import CONSUMER, never_owned_twice
from tests.clients.test_group_scenarios import create_topic, everything
from tests.support.agents import Agent, Agents, wait_group
from tests.support.metrics import scrape
from tests.support.waiting import wait_until

TOPIC, GROUP, PARTITIONS = "lagged", "g-lag-aware", 6


def produce(bootstrap: str, counts: list[int], start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, n in enumerate(counts):
        for i in range(n):
            producer.produce(TOPIC, value=b"%d-%d" % (start, i), partition=partition)
    assert producer.flush(30) == 0


def from_scratch(members: list[Agent], lags: list[int]) -> dict[str, set[tuple[str, int]]]:
    """The lag-aware assignor's answer for these members (by member id, as the broker orders them) and lags,
    without a current assignment."""
    spec = GroupSpec(
        GROUP,
        {a.member_id: MemberSpec(a.member_id, None, None, frozenset({TOPIC})) for a in members},
        {TOPIC: PARTITIONS},
        lambda t, p: lags[p],
    )
    result = get("lag-aware").assign(spec)
    range_spread = lag_spread(get("range").assign(spec), spec.lag)
    assert lag_spread(result, spec.lag) < range_spread, "the workload should separate lag-aware from range"
    return {a.name: {(TOPIC, p) for p in result[a.member_id].get(TOPIC, ())} for a in members}


def spread(owned: dict[str, set[tuple[str, int]]], lags: list[int]) -> int:
    totals = [sum(lags[p] for _t, p in parts) for parts in owned.values()]
    return max(totals) - min(totals)


def moves(before: dict[str, set[tuple[str, int]]], after: dict[str, set[tuple[str, int]]]) -> int:
    return sum(len(after[name] - before.get(name, set())) for name in after)


def assert_lag_balanced(owned: dict[str, set[tuple[str, int]]], members: list[Agent], lags: list[int]) -> None:
    """Two partitions each, and a spread within the largest lag of the from-scratch answer's."""
    assert sorted(len(parts) for parts in owned.values()) == [2, 2, 2], owned
    assert spread(owned, lags) <= spread(from_scratch(members, lags), lags) + max(lags), (owned, lags)


def kaflet(bootstrap: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "broker", *args, "--bootstrap-server", bootstrap, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def consumed(members: list[Agent]) -> set[tuple[int, int]]:
    return {(p, o) for a in members for e in a.of_kind("records") for _t, p, o in e["recs"]}


def committed_to(members: list[Agent], ends: list[int]) -> bool:
    done: dict[int, int] = {}
    for a in members:
        for e in a.of_kind("committed"):
            for _t, p, o in e["offsets"]:
                done[p] = max(done.get(p, 0), o)
    return all(done.get(p, 0) >= end for p, end in enumerate(ends) if end)


def form_group(broker_proc: Callable[..., BrokerProcess], agents: Agents, first: list[int]) -> tuple[BrokerProcess, Any, list[Agent]]:
    """Three stalled consumers join a topic filled with `first`; resumed once the target for all three exists."""
    bp = broker_proc("--group-consumer-assignors", "uniform,range,lag-aware", "--group-consumer-session-timeout-ms", "10000")
    admin = create_topic(bp.bootstrap, TOPIC, PARTITIONS)
    produce(bp.bootstrap, first, 1)
    spec = {**CONSUMER, "remote_assignor": "lag-aware", "process": True, "stalled": True}
    members = [agents.start("confluent", f"lag-{i}", bp.bootstrap, GROUP, [TOPIC], **spec) for i in range(3)]
    bp.wait_for(lambda r: r.get("event") == "target assignment computed" and r.get("group") == GROUP and r.get("members") == 3, timeout=60)
    for m in members:
        m.send("resume")
    return bp, admin, members


def test_three_consumers_on_an_unevenly_filled_topic_get_the_lag_balanced_assignment(
    broker_proc: Callable[..., BrokerProcess], agents: Agents
) -> None:
    first = [300, 20, 150, 10, 90, 60]
    bp, admin, members = form_group(broker_proc, agents, first)
    owned = wait_group(admin, GROUP, members, everything(TOPIC, PARTITIONS))
    assert_lag_balanced(owned, members, first)
    computed = [r for r in bp.records if r.get("event") == "target assignment computed" and r.get("members") == 3][-1]
    assert computed["assignor"] == "lag-aware" and computed["lag_spread"] == max(
        sum(first[p] for _t, p in s) for s in owned.values()
    ) - min(sum(first[p] for _t, p in s) for s in owned.values())
    # Before anything is committed, describe shows each member's assigned lag: what it was handed.
    described = kaflet(bp.bootstrap, "groups", "describe", GROUP)
    lags = {m["member_id"]: m["assigned_lag"] for m in described["groups"][0]["members"]}
    by_name = {a.name: a.member_id for a in members}
    handed = {by_name[name]: sum(first[p] for _t, p in parts) for name, parts in owned.items()}
    consumed_now = consumed(members)
    if not consumed_now:  # the consumers may already have read (and committed) some: then only bounds hold
        assert lags == handed
    assert all(0 <= lags[mid] <= handed[mid] for mid in handed)
    wait_until(lambda: committed_to(members, first), timeout=60, message="every record consumed and committed")
    wanted = {(p, o) for p in range(PARTITIONS) for o in range(first[p])}
    assert wanted <= consumed(members)
    described = kaflet(bp.bootstrap, "groups", "describe", GROUP)
    assert [m["assigned_lag"] for m in described["groups"][0]["members"]] == [0, 0, 0]
    never_owned_twice(members)


def test_kaflet_groups_rebalance_moves_the_consumers_to_the_new_balance_and_every_record_is_consumed(
    broker_thread: Callable[..., Any], agents: Agents
) -> None:
    """New uneven produce changes no assignment by itself; `kaflet groups rebalance` (IncrementalAlterConfigs SET
    kaflet.rebalance on the group) bumps the group epoch, and the consumers move to the balance of the lags now,
    at-least-once processing throughout."""
    bt = broker_thread(
        group_consumer_assignors="uniform,range,lag-aware", group_consumer_session_timeout_ms=10_000, metrics=True, metrics_port=0
    )
    admin = create_topic(bt.bootstrap, TOPIC, PARTITIONS)
    first = [300, 20, 150, 10, 90, 60]
    produce(bt.bootstrap, first, 1)
    spec = {**CONSUMER, "remote_assignor": "lag-aware", "process": True, "stalled": True}
    members = [agents.start("confluent", f"lag-{i}", bt.bootstrap, GROUP, [TOPIC], **spec) for i in range(3)]

    def epochs() -> tuple[int, int, int]:
        def read(broker: Any) -> tuple[int, int, int]:
            group = broker.coordinator.shard_for(GROUP).consumer_groups.get(GROUP)
            return (len(group.members), group.group_epoch, group.assignment_epoch) if group is not None else (0, 0, 0)

        return bt.run(read)

    wait_until(lambda: epochs()[0] == 3 and epochs()[1] == epochs()[2], timeout=60, message="three members and their target")
    for m in members:
        m.send("resume")
    before = wait_group(admin, GROUP, members, everything(TOPIC, PARTITIONS))
    assert_lag_balanced(before, members, first)
    wait_until(lambda: committed_to(members, first), timeout=60, message="first batch committed")

    marks = {m.name: m.mark for m in members}
    for m in members:
        m.send("stall")
    for m in members:
        m.wait_event("stalled", since=marks[m.name])
    second = [5, 400, 0, 250, 30, 120]
    produce(bt.bootstrap, second, 2)
    _, epoch, _ = epochs()
    assert epochs()[1:] == (epoch, epoch)  # no rebalance on lag drift
    # Each member's assigned lag now: the second batch on the partitions it still holds, in describe and the metric.
    held = {a.member_id: sum(second[p] for _t, p in before[a.name]) for a in members}
    described = kaflet(bt.bootstrap, "groups", "describe", GROUP)
    assert {m["member_id"]: m["assigned_lag"] for m in described["groups"][0]["members"]} == held
    series = scrape(bt.metrics_address).series("kaflet_consumergroup_member_assigned_lag", group=GROUP)
    assert {dict(labels)["member"]: value for labels, value in series.items()} == held
    assert kaflet(bt.bootstrap, "groups", "rebalance", GROUP)["rebalanced"] is True
    wait_until(lambda: epochs()[1:] == (epoch + 1, epoch + 1), timeout=30, message="the target for the new group epoch")
    for m in members:
        m.send("resume")
    after = wait_group(admin, GROUP, members, everything(TOPIC, PARTITIONS))
    assert_lag_balanced(after, members, second)
    # From where the group was: no more moves than the from-scratch answer would make (issue 26, finding 5).
    assert moves(before, after) <= moves(before, from_scratch(members, second))
    last = bt.run(lambda broker: broker.coordinator.shard_for(GROUP).consumer_groups[GROUP].last_assignment)
    assert last["moves"] == moves(before, after)  # as the "target assignment computed" line says
    settled = kaflet(bt.bootstrap, "groups", "describe", GROUP)["groups"][0]
    assert settled["moves_to_target"] == 0 and settled["target_lag_spread"] is not None
    ends = [a + b for a, b in zip(first, second, strict=True)]
    wanted = {(p, o) for p in range(PARTITIONS) for o in range(ends[p])}
    wait_until(lambda: wanted <= consumed(members), timeout=60, message="every record consumed")
    never_owned_twice(members)
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "groups",
            "rebalance",
            "nobody",
            "--bootstrap-server",
            bt.bootstrap,
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"] == "GroupIdNotFoundError: Group nobody is not a consumer group."
