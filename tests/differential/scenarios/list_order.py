"""ListGroups' order (LI-4): partition by partition as Kafka's ConcurrentHashMap of its coordinator
partitions iterates them (0, 3, 4, 1, 2 of 5), and within one the groups of every type
interleaved in the order of its one table of groups (broker/coordinator/list_order.py).

Both brokers hold other scenarios' groups (and the reference Kafka other tests' too), so the size
of each partition's table, which decides most of the order, differs between them. The scenario's
groups are chosen so that their order does not depend on it: groups whose ids have one
String.hashCode ("Aa" and "BB" in the same places) share a slot at every size, newest first;
two such clusters on one partition are in different slots already at the smallest size the
scenario's own groups give the table (8 slots for 6 groups), and so in the same order at any
larger one. Within a cluster the order shows when each group entered the table: a consumer group
at its first record, a simple group at its commit, a deleted one leaving it, a group that changes
type re-entering after its old records' tombstones."""

from __future__ import annotations

from typing import Any

from broker.coordinator.list_order import slot_of
from protocol.javahash import partition_for
from tests.differential.harness import Registry
from tests.differential.scenarios.common import T1, T3, ApiKey, Side, commit, stable_group
from tests.differential.scenarios.consumer import first_join, hb

scenarios = Registry()

OFFSETS_PARTITIONS = 5  # both brokers' __consumer_offsets (tests/differential/conftest.py)
SAME_HASH = ("AaAa", "AaBB", "BBAa", "BBBB")  # suffixes of one String.hashCode


def cluster(s: Side, tag: str, partition: int, size: int, avoid_slot: int | None = None) -> list[str]:
    """`size` ids of one hashCode on `partition`, the first tag `<tag><n>.` that gives them (and,
    with `avoid_slot`, a slot of an 8-slot table other than that one)."""
    n = 0
    while True:
        ids = [s.group(f"{tag}{n}.{suffix}") for suffix in SAME_HASH[:size]]
        if partition_for(ids[0], OFFSETS_PARTITIONS) == partition and (avoid_slot is None or slot_of(ids[0], 8) != avoid_slot):
            return ids
        n += 1


async def share_group(s: Side, group: str) -> None:
    member = {"member_id": "s-member-id-of-22chars", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": [T1]}
    await s.call("s", ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=group, **member)


async def note_listing(s: Side, own: list[str], version: int = 5, **filters: Any) -> None:
    fields: dict[str, Any] = {}
    if version >= 4:
        fields["states_filter"] = filters.get("states", [])
    if version >= 5:
        fields["types_filter"] = filters.get("types", [])
    resp = await s.call("ctl", ApiKey.LIST_GROUPS, version, **fields)
    mine = set(own)
    # the answer's own order (the normalizer sorts ListGroups' list before comparing it)
    s.note("listed in order", [(g.group_id, getattr(g, "group_type", "")) for g in resp.groups if g.group_id in mine])


@scenarios("li_4_groups_of_every_type_in_kafkas_table_order", rule="LI-4")
async def _(s: Side) -> None:
    a = cluster(s, "a", 1, 4)  # four groups sharing a slot of partition 1
    b = cluster(s, "b", 1, 2, avoid_slot=slot_of(a[0], 8))  # two more on partition 1, in another slot
    c = cluster(s, "c", 4, 2)  # partition 4, which Kafka lists before partition 1
    own = [*a, *b, *c]
    s.note("the chosen ids", own)

    k = await first_join(s, "k", 1, a[0], [T3])  # a consumer group: enters at its first record
    await commit(s, "ctl", a[1], 9, {(T3, 0): 1})  # a simple classic group: enters at its commit
    await stable_group(s, b[0])  # a classic group of the consumer protocol
    await commit(s, "ctl", c[0], 9, {(T3, 0): 1})
    await share_group(s, a[2])
    await first_join(s, "m", 1, c[1], [T3])
    await first_join(s, "n", 1, b[1], [T3])
    await commit(s, "ctl", a[3], 9, {(T3, 1): 2})
    await note_listing(s, own)

    # Deleted and made again (as a consumer group): first in its slot.
    await s.call("ctl", ApiKey.DELETE_GROUPS, 2, groups_names=[a[1]])
    await note_listing(s, own)
    await first_join(s, "p", 1, a[1], [T3])
    # An empty classic group joined by a consumer member: its tombstone, then a consumer group's records.
    await first_join(s, "q", 1, a[3], [T3])
    await note_listing(s, own)

    # A consumer group emptied, then joined with the classic protocol: a classic group again, first.
    await hb(s, "k", 1, a[0], k.member_id, -1)
    await stable_group(s, a[0], ("j",))
    await note_listing(s, own)

    await note_listing(s, own, types=["consumer", "share"])
    await note_listing(s, own, 4, states=["Stable", "Empty"])
    await note_listing(s, own, 0)
