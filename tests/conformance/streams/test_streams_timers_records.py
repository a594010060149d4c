"""Streams groups over time and across restarts: the session timeout (KS-20) and the rebalance
timeout (KS-21) fence members, with their group-event log lines and metrics; a group's records
(types 17, 19-23) are replayed at load into the same group (KS-30), a deleted group's
tombstones keep it deleted (KS-28, KS-30), and a live group's offsets expire only outside its
topology (KS-27)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from broker import Broker, Config
from tests.support import groups as classic
from tests.support.coordinator import serving
from tests.support.streams_groups import (
    GROUP_ID_NOT_FOUND,
    NONE,
    UNKNOWN_MEMBER_ID,
    StreamsMember,
    converge,
    describe,
    describe_one,
    heartbeat,
    word_count,
)
from tests.support.waiting import async_wait_until as wait_until

# Short enough that a silent member goes within the test, long enough that a live one survives a
# second of stall of its event loop (the suite runs beside other work: make test runs it in parallel).
SHORT_SESSION = dict(
    group_streams_session_timeout_ms=1000,
    group_streams_min_session_timeout_ms=1000,
    group_streams_heartbeat_interval_ms=100,
    group_streams_min_heartbeat_interval_ms=100,
)


@contextlib.contextmanager
def info_logs() -> Iterator[list[dict[str, Any]]]:
    """The events logged at INFO and above meanwhile (the suite logs at WARNING)."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)


def word_count_topics(broker: Broker, partitions: int = 2) -> None:
    for name in ("p-input", "app-counts-repartition", "app-counts-changelog"):
        broker.topics.create(name, partitions)


@pytest.mark.broker_config(**SHORT_SESSION)
async def test_ks_20_a_silent_member_is_fenced_after_its_session(broker: Broker, raw: Any) -> None:
    word_count_topics(broker)
    client = await raw()
    a = StreamsMember(client, "g", "a", word_count("p", "app"), process_id="pa")
    b = StreamsMember(client, "g", "b", word_count("p", "app"), process_id="pb")
    with info_logs() as logs:
        await converge([a, b], client)
        stats = broker.coordinator.stats
        fenced_before = stats.streams_members_fenced

        async def only_a() -> bool:
            await a.beat()
            return [m.member_id for m in (await describe_one(client, "g")).members] == ["a"]

        await wait_until(only_a, timeout=10, message="b was not fenced")
        await converge([a], client)
    assert a.active == {"0": [0, 1], "1": [0, 1]}
    assert stats.streams_members_fenced == fenced_before + 1
    gone = await heartbeat(client, "g", "b", b.epoch, active={}, standby={}, warmup={})
    assert (gone.error_code, gone.error_message) == (UNKNOWN_MEMBER_ID, "Member b is not a member of group g.")
    events = [(e["event"], e.get("member")) for e in logs if e.get("group") == "g"]
    assert ("streams member fenced", "b") in events
    assert ("member joins the streams group", "a") in events and ("streams group stable", None) in events


async def test_ks_21_a_member_that_keeps_its_tasks_past_the_rebalance_timeout_is_fenced(broker: Broker, raw: Any) -> None:
    word_count_topics(broker)
    client = await raw()
    a = StreamsMember(client, "g", "a", word_count("p", "app"), process_id="pa")
    await a.beat(rebalance_timeout_ms=200)
    b = StreamsMember(client, "g", "b", word_count("p", "app"), process_id="pb")
    await b.beat()
    held = dict(a.active)
    told = await a.beat(active=held)  # asked to give up some tasks; never does
    assert (
        told.active_tasks is not None and {s: sorted(t.partitions) for s, t in ((t.subtopology_id, t) for t in told.active_tasks)} != held
    )

    async def a_gone() -> bool:
        await b.beat()
        return [m.member_id for m in (await describe_one(client, "g")).members] == ["b"]

    await wait_until(a_gone, timeout=10, message="a was not fenced by its rebalance timeout")
    await converge([b], client)
    assert b.active == {"0": [0, 1], "1": [0, 1]}


def _view(d: Any) -> Any:
    g = d.to_dict()
    g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
    return g


async def test_ks_30_a_group_is_replayed_at_load_as_it_was(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with serving(config) as served:
        word_count_topics(served.broker, partitions=3)
        client = await served.ready()
        members = [
            StreamsMember(client, "g", "a", word_count("p", "app"), process_id="pa", instance_id="ia"),
            StreamsMember(client, "g", "b", word_count("p", "app"), process_id="pb"),
        ]
        await converge(members, client)
        assert set(
            (await classic.commit(client, "g", {("p-input", 0): 7}, version=9, generation=members[0].epoch, member_id="a")).values()
        ) == {NONE}
        before = _view(await describe_one(client, "g"))
    async with serving(config) as served:
        client = await served.ready()
        after = _view(await describe_one(client, "g"))
        # The configured topology is soft state: until a heartbeat that writes records configures it
        # again, a loaded group is described with its topology as the members sent it (as in Kafka).
        configured, sent = before.pop("topology"), after.pop("topology")
        assert [s["subtopology_id"] for s in sent["subtopologies"]] == [s["subtopology_id"] for s in configured["subtopologies"]]
        assert {t["partitions"] for s in sent["subtopologies"] for t in s["state_changelog_topics"]} == {0}
        assert after == before
        for m in members:
            m.client = client
            resp = await m.beat()
            assert (resp.error_code, resp.member_epoch) == (NONE, before["group_epoch"])
        assert await classic.fetched_offsets(client, "g", {"p-input": [0]}) == {("p-input", 0): 7}
        for m in members:
            await m.leave()
        assert (await describe_one(client, "g")).group_state == "Empty"
        assert [(r.group_id, r.error_code) for r in (await classic.delete_groups(client, ["g"])).results] == [("g", NONE)]
    async with serving(config) as served:
        client = await served.ready()
        [d] = (await describe(client, "g")).groups
        assert (d.error_code, d.error_message) == (GROUP_ID_NOT_FOUND, "Group g not found.")
        assert "g" not in {x.group_id for x in (await classic.list_groups(client)).groups}


async def test_ks_27_offsets_of_a_live_streams_group_expire_only_outside_its_topology(make_config: Callable[..., Config]) -> None:
    """OR-2 for streams groups (StreamsGroup.isSubscribedToTopic): the offsets of a source or
    repartition topic of a group with members never expire; others do, from their commit time."""
    day = 24 * 60 * 60_000
    async with serving(make_config(offsets_retention_minutes=1440, offsets_retention_check_interval_ms=50)) as served:
        word_count_topics(served.broker)
        served.broker.topics.create("elsewhere", 1)
        client = await served.ready()
        m = StreamsMember(client, "g", "a", word_count("p", "app"))
        await m.beat()
        await m.beat()
        offsets = {("p-input", 0): 5, ("app-counts-repartition", 1): 2, ("elsewhere", 0): 3}
        assert set((await classic.commit(client, "g", offsets, version=9, generation=m.epoch, member_id="a")).values()) == {NONE}
        served.broker.clock.advance(3 * day)

        async def expired() -> bool:
            return ("elsewhere", 0) not in await classic.fetched_offsets(client, "g")

        await wait_until(expired, timeout=10, message="the offset outside the topology to expire")
        assert await classic.fetched_offsets(client, "g") == {("p-input", 0): 5, ("app-counts-repartition", 1): 2}
        assert (await describe_one(client, "g")).group_state == "Stable"
