"""Issue 13 on the coordinator: the lag the lag-aware assignor gets (LEO minus the group's committed offset,
uncommitted partitions per `lag.aware.uncommitted`), the rebalance on demand, the log line and the metric."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from structlog.testing import capture_logs

from broker import Broker
from broker.node import logging as kaflet_logging
from tests.support import data as d
from tests.support.consumer_groups import CgMember, converge
from tests.support.groups import commit
from tests.support.raw_client import RawClient

LAG_AWARE = {"group_consumer_assignors": "uniform,range,lag-aware"}


@contextmanager
def info_logs() -> Iterator[list[dict[str, Any]]]:
    """The events logged at info and above (the suite logs at warning)."""
    kaflet_logging.configure("json", "info")
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        kaflet_logging.configure("json", "warning")


def topic_id(broker: Broker, name: str) -> uuid.UUID:
    topic = broker.topics.get(name)
    assert topic is not None
    return topic.topic_id


async def fill(client: RawClient, topic: str, counts: list[int]) -> None:
    for partition, n in enumerate(counts):
        if n:
            res = d.produce_result(await client.request(d.produce(topic, partition, d.batch(n))))
            assert res.error_code == 0


async def two_members(broker: Broker, raw: Callable[..., Any], group: str = "g") -> tuple[CgMember, CgMember]:
    c0 = CgMember(await raw(), group, ["t"], member_id="C0", assignor="lag-aware")
    c1 = CgMember(await raw(), group, ["t"], member_id="C1", assignor="lag-aware")
    await c0.join()
    await c1.join()
    await converge([c0, c1])
    return c0, c1


def owned(broker: Broker, m: CgMember) -> set[int]:
    return set(m.owned.get(topic_id(broker, "t"), []))


@pytest.mark.broker_config(**LAG_AWARE)
async def test_lag_aware_proposal_example_over_the_wire(broker: Broker, raw: Callable[..., Any]) -> None:
    """Lags 100/60/50 (never committed, `earliest`: the whole log). C0 joins first and gets all three; when C1
    joins, the from-scratch answer (C0 p0, C1 p1 and p2: 100 / 110) would move two partitions, the sticky one
    moves p0 alone (C0 p1 and p2, C1 p0: 110 / 100), the same spread."""
    broker.topics.create("t", 3)
    await fill(await raw(), "t", [100, 60, 50])
    with info_logs() as logs:
        c0, c1 = await two_members(broker, raw)
    assert owned(broker, c0) == {1, 2} and owned(broker, c1) == {0}
    computed = [e for e in logs if e.get("event") == "target assignment computed" and e.get("members") == 2]
    assert computed and computed[-1]["assignor"] == "lag-aware" and (computed[-1]["lag_spread"], computed[-1]["moves"]) == (10, 1)
    shard = broker.coordinator.shard_for("g")
    assert shard.consumer.assigned_lags(shard.consumer_groups["g"]) == {"C0": 110, "C1": 100}


@pytest.mark.broker_config(**LAG_AWARE, lag_aware_uncommitted="latest")
async def test_lag_aware_uncommitted_latest_counts_nothing(broker: Broker, raw: Callable[..., Any]) -> None:
    """`latest`: uncommitted partitions lag 0, so only counts decide: C0 gives up its lowest partition."""
    broker.topics.create("t", 3)
    await fill(await raw(), "t", [100, 60, 50])
    c0, c1 = await two_members(broker, raw)
    assert owned(broker, c0) == {1, 2} and owned(broker, c1) == {0}


@pytest.mark.broker_config(**LAG_AWARE)
async def test_lag_aware_counts_from_the_committed_offset(broker: Broker, raw: Callable[..., Any]) -> None:
    """p0 committed at its end (lag 0), p1 at 20 (lag 40), p2 uncommitted (earliest: lag 50)."""
    broker.topics.create("t", 3)
    client = await raw()
    await fill(client, "t", [100, 60, 50])
    assert await commit(client, "g", {("t", 0): 100, ("t", 1): 20}) == {("t", 0): 0, ("t", 1): 0}
    c0, c1 = await two_members(broker, raw)
    # C0 held all three (90); it gives up the one that brings it nearest the mean (45): p1 (40).
    assert owned(broker, c0) == {0, 2} and owned(broker, c1) == {1}
    # A commit ahead of the log (after a truncation) counts 0, not a negative lag.
    shard = broker.coordinator.shard_for("g")
    lag = shard.consumer._lag_function("g")
    assert [lag("t", p) for p in range(3)] == [0, 40, 50]
    assert lag("absent", 0) == 0
    assert lag.topic_lags("t", 4) == [0, 40, 50, 0]  # the bulk form agrees; a partition that does not exist lags 0
    # The broker default `latest` makes an uncommitted partition lag 0, a committed one still counts.
    broker.config.lag_aware_uncommitted = "latest"
    latest = shard.consumer._lag_function("g")
    assert [latest("t", p) for p in range(3)] == latest.topic_lags("t", 3) == [0, 40, 0]


@pytest.mark.broker_config(**LAG_AWARE)
async def test_rebalance_on_demand_moves_to_the_new_balance(broker: Broker, raw: Callable[..., Any]) -> None:
    """New uneven produce changes nothing by itself (no rebalance on lag drift); a requested rebalance bumps the
    group epoch and the next target follows the lags now, from the current assignment (sticky, issue 26)."""
    broker.topics.create("t", 3)
    client = await raw()
    await fill(client, "t", [100, 60, 50])
    c0, c1 = await two_members(broker, raw)
    assert owned(broker, c0) == {1, 2} and owned(broker, c1) == {0}
    shard = broker.coordinator.shard_for("g")
    group = shard.consumer_groups["g"]
    epoch = group.group_epoch
    await fill(client, "t", [0, 1000, 1000])  # C0 now lags 2110, C1 100: beyond the from-scratch spread plus one lag
    await converge([c0, c1])
    assert group.group_epoch == epoch and owned(broker, c0) == {1, 2}
    with info_logs() as logs:
        waiter = broker.coordinator.request_rebalance("g")
        if waiter is not None:
            await waiter
        assert group.group_epoch == epoch + 1
        await converge([c0, c1])
    # Lags 100 / 1060 / 1050. From scratch: C0 {1}, C1 {2, 0} (1060 / 1150, spread 90), two moves.
    # Sticky: one, p2 to C1 (1060 / 1150 as well).
    assert owned(broker, c0) == {1} and owned(broker, c1) == {0, 2}
    assert group.assignment_epoch == epoch + 1
    computed = [e for e in logs if e.get("event") == "target assignment computed"]
    assert (computed[-1]["moves"], computed[-1]["lag_spread"]) == (1, 90)


@pytest.mark.broker_config(**LAG_AWARE)
async def test_rebalance_of_an_unknown_group_is_refused(broker: Broker) -> None:
    from broker.runtime.errors import CoordinatorError
    from protocol.errors import ErrorCode

    with pytest.raises(CoordinatorError) as err:
        broker.coordinator.request_rebalance("nobody")
    assert err.value.code is ErrorCode.GROUP_ID_NOT_FOUND


# -- through IncrementalAlterConfigs on the GROUP resource ------------------------------------------


@pytest.mark.broker_config(**LAG_AWARE)
async def test_lag_aware_uncommitted_group_config_wins_over_the_broker_default(broker: Broker, raw: Callable[..., Any]) -> None:
    from tests.limits.test_alter_configs import DEFAULT, GROUP, GROUP_CONFIG, SET, describe, incremental, results

    broker.topics.create("t", 3)
    client = await raw()
    await fill(client, "t", [100, 60, 50])
    configs = await describe(client, GROUP, "g", ["lag.aware.uncommitted"])
    assert configs["lag.aware.uncommitted"].value == "earliest" and configs["lag.aware.uncommitted"].config_source == DEFAULT
    bad = await client.request(incremental([(GROUP, "g", [("lag.aware.uncommitted", SET, "oldest")])]))
    assert results(bad) == [(40, "Invalid value oldest for configuration lag.aware.uncommitted: String must be one of: earliest, latest")]
    done = await client.request(incremental([(GROUP, "g", [("lag.aware.uncommitted", SET, "latest")])]))
    assert results(done) == [(0, None)]
    configs = await describe(client, GROUP, "g", ["lag.aware.uncommitted"])
    assert configs["lag.aware.uncommitted"].value == "latest" and configs["lag.aware.uncommitted"].config_source == GROUP_CONFIG
    c0, c1 = await two_members(broker, raw)
    assert owned(broker, c0) == {1, 2} and owned(broker, c1) == {0}  # as with --lag-aware-uncommitted latest


@pytest.mark.broker_config(**LAG_AWARE)
async def test_kaflet_rebalance_group_config_bumps_the_group_epoch(broker: Broker, raw: Callable[..., Any]) -> None:
    from tests.limits.test_alter_configs import DELETE, GROUP, SET, describe, incremental, results

    broker.topics.create("t", 3)
    client = await raw()
    await fill(client, "t", [100, 60, 50])
    c0, c1 = await two_members(broker, raw)
    group = broker.coordinator.shard_for("g").consumer_groups["g"]
    epoch = group.group_epoch

    checked = await client.request(incremental([(GROUP, "g", [("kaflet.rebalance", SET, "now")])], validate_only=True))
    assert results(checked) == [(0, None)] and group.group_epoch == epoch
    done = await client.request(incremental([(GROUP, "g", [("kaflet.rebalance", SET, "now")])]))
    assert results(done) == [(0, None)] and group.group_epoch == epoch + 1
    await converge([c0, c1])
    assert group.assignment_epoch == epoch + 1
    assert "kaflet.rebalance" not in await describe(client, GROUP, "g")  # an action, never stored
    assert broker.coordinator.group_configs.get("g") == {}

    unknown = await client.request(incremental([(GROUP, "nobody", [("kaflet.rebalance", SET, "now")])]))
    assert results(unknown) == [(69, "Group nobody is not a consumer group.")]  # GROUP_ID_NOT_FOUND
    deleted = await client.request(incremental([(GROUP, "g", [("kaflet.rebalance", DELETE, None)])]))
    assert results(deleted) == [(42, "kaflet.rebalance can only be SET")]  # INVALID_REQUEST
    assert group.group_epoch == epoch + 1
