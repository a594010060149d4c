"""Racks in KIP-848 groups as Kafka 4.4 has them (issue 26, part "rack-aware assignment").

A member's RackId is stored and described; the racks of a subscribed partition's replicas enter the group's
metadata hash (Kafka's computeTopicHash), so a change of placement bumps the group epoch; and neither moves a
partition: Kafka 4.4's uniform and range do not read racks (tests/unit/assignors/test_racks.py). kaflet's
coordinator reads placement through its metadata image's `racks_of(topic, partition)`.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker import Broker
from tests.support.consumer_groups import NONE, CgMember, converge, describe_one


@pytest.mark.parametrize("assignor", ["uniform", "range"])
async def test_rack_ids_described_and_replica_racks_bump_the_epoch_without_moving_partitions(
    broker: Broker, raw: Any, monkeypatch: Any, assignor: str
) -> None:
    placement: dict[tuple[str, int], frozenset[str]] = {}
    monkeypatch.setattr(broker.topics, "racks_of", lambda t, p: placement.get((t, p), frozenset()))
    topic = broker.topics.create("racked", 4)
    client = await raw()
    a = CgMember(client, "g-racks", ["racked"], rack_id="r0", assignor=assignor)
    b = CgMember(client, "g-racks", ["racked"], rack_id="r1", assignor=assignor)
    for m in (a, b):
        assert (await m.join()).error_code == NONE
    await converge([a, b])
    d = await describe_one(client, "g-racks")
    assert {m.member_id: m.rack_id for m in d.members} == {a.member_id: "r0", b.member_id: "r1"}
    epoch, owned = d.group_epoch, {a.member_id: a.partitions(), b.member_id: b.partitions()}

    # Every partition's replica moves to the rack of the member that does not own it (as a reassignment would,
    # announced to the coordinator as a metadata update): the group epoch moves, no partition does.
    rack_of = {a.member_id: "r1", b.member_id: "r0"}
    placement.update({("racked", p): frozenset({rack_of[mid]}) for mid, parts in owned.items() for _, p in parts})
    broker.coordinator._on_topic_changed(topic, False)
    await converge([a, b])
    d = await describe_one(client, "g-racks")
    assert d.group_epoch == epoch + 1, "the replica racks are part of the subscription's metadata hash"
    assert {a.member_id: a.partitions(), b.member_id: b.partitions()} == owned, "Kafka 4.4's assignors do not read racks"

    # The same placement again: no new epoch.
    broker.coordinator._on_topic_changed(topic, False)
    await converge([a, b])
    assert (await describe_one(client, "g-racks")).group_epoch == epoch + 1
