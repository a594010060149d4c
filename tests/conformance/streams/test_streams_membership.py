"""KIP-1071 streams groups: members and their ids (KS-6), the group epoch (KS-7), owned tasks
checked against the topology (KS-9) and the metadata hash of the topics a topology reads (KS-14),
on one in-process broker."""

from __future__ import annotations

from typing import Any

from broker import Broker
from tests.support.streams_groups import (
    INVALID_REQUEST,
    NONE,
    UNKNOWN_MEMBER_ID,
    StreamsMember,
    converge,
    describe_one,
    heartbeat,
    subtopology,
    topology,
    word_count,
)


async def test_ks_6_members_choose_their_ids_and_an_unknown_one_is_refused(broker: Broker, raw: Any) -> None:
    broker.topics.create("p-input", 2)
    client = await raw()
    member = StreamsMember(client, "g", "chosen-by-the-client", word_count("p", "app"))
    assert (await member.beat()).error_code == NONE
    assert [m.member_id for m in (await describe_one(client, "g")).members] == ["chosen-by-the-client"]
    ghost = await heartbeat(client, "g", "ghost", member.epoch, active={}, standby={}, warmup={})
    assert ghost.error_code == UNKNOWN_MEMBER_ID


async def test_ks_7_ks_14_the_group_epoch_moves_with_members_and_with_the_topics_partitions(broker: Broker, raw: Any) -> None:
    broker.topics.create("p-input", 2)
    client = await raw()
    reader = topology(subtopology("0", ["p-input"]))  # no repartition topic, whose count was derived at 2
    a = StreamsMember(client, "g", "a", reader)
    await converge([a], client)
    first = (await describe_one(client, "g")).group_epoch
    b = StreamsMember(client, "g", "b", reader, process_id="process-2")
    await converge([a, b], client)
    joined = (await describe_one(client, "g")).group_epoch
    assert joined > first  # a member's metadata bumps the group epoch
    await converge([a, b], client)
    assert (await describe_one(client, "g")).group_epoch == joined  # heartbeats changing nothing do not
    broker.topics.add_partitions("p-input", 4)
    await converge([a, b], client)
    grown = await describe_one(client, "g")
    assert grown.group_epoch > joined  # the source topic's new partitions changed the metadata hash
    assert sorted(p for m in grown.members for t in m.assignment.active_tasks if t.subtopology_id == "0" for p in t.partitions) == [
        0,
        1,
        2,
        3,
    ]


async def test_ks_9_owned_tasks_must_name_the_topologys_subtopologies_and_partitions(broker: Broker, raw: Any) -> None:
    broker.topics.create("p-input", 2)
    client = await raw()
    member = StreamsMember(client, "g", "m", word_count("p", "app"))
    await converge([member], client)
    unknown_subtopology = await member.beat(active={"9": [0]})
    assert unknown_subtopology.error_code == INVALID_REQUEST, unknown_subtopology
    unknown_partition = await member.beat(active={"0": [7]})
    assert unknown_partition.error_code == INVALID_REQUEST, unknown_partition
