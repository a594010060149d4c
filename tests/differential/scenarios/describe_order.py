"""Describes naming several groups over several coordinator partitions (ConsumerGroupDescribe,
DescribeGroups, StreamsGroupDescribe, ShareGroupDescribe): Kafka answers the blank ids first, then
partition by partition in the order its HashMap<TopicPartition, List<String>> iterates them, each
partition's groups in request order. The groups are picked so that this order is not the request's.
DeleteGroups goes partition by partition the same way, each partition's share groups it could not
delete first, then its other groups in the order of a HashSet of them."""

from __future__ import annotations

from typing import Any

from protocol.javahash import partition_for
from tests.differential.harness import Registry
from tests.differential.scenarios.common import T1, T3, ApiKey, Side, commit, stable_group
from tests.differential.scenarios.consumer import first_join

scenarios = Registry()

OFFSETS_PARTITIONS = 5  # both brokers' __consumer_offsets (tests/differential/conftest.py)
# The coordinator partitions of the requested groups, in request order; Kafka iterates 0, 3, 4, 1, 2.
REQUESTED = (4, 0, 3, 2, 1, 4, 0, 3)


def spread(s: Side, requested: tuple[int, ...] = REQUESTED) -> list[str]:
    """Group ids of this scenario's own on the partitions of `requested`, in that order."""
    out: list[str] = []
    i = 0
    for p in requested:
        while partition_for(s.group(f"d{i}"), OFFSETS_PARTITIONS) != p:
            i += 1
        out.append(s.group(f"d{i}"))
        i += 1
    return out


async def consumer_and_classic(s: Side, ids: list[str]) -> None:
    """A consumer group (the third id) and a Stable classic one (the fourth), the others absent."""
    await first_join(s, "a", 1, ids[2], [T1])
    await stable_group(s, ids[3])


def note_order(s: Side, resp: Any) -> None:
    # the answers' own order (the normalizer sorts some of these lists before comparing)
    s.note("answered in order", [g.group_id for g in resp.groups])


async def describe_spread(s: Side, api: ApiKey, versions: tuple[int, ...]) -> None:
    """The spread groups and a blank id described at once, at each version: the answers' order noted."""
    ids = spread(s)
    await consumer_and_classic(s, ids)
    for v in versions:
        note_order(s, await s.call("ctl", api, v, group_ids=[*ids, ""], include_authorized_operations=False))


@scenarios("kd_1_groups_in_coordinator_partition_order", rule="KD-1")
async def _(s: Side) -> None:
    await describe_spread(s, ApiKey.CONSUMER_GROUP_DESCRIBE, (0, 1))


@scenarios("dg_1_groups_in_coordinator_partition_order", rule="DG-1")
async def _(s: Side) -> None:
    ids = spread(s)
    await consumer_and_classic(s, ids)
    for v in (0, 5, 6):
        fields: dict[str, Any] = {"groups": ids}
        if v >= 3:
            fields["include_authorized_operations"] = False
        note_order(s, await s.call("ctl", ApiKey.DESCRIBE_GROUPS, v, **fields))


@scenarios("ks_26_groups_in_coordinator_partition_order", rule="KS-26")
async def _(s: Side) -> None:
    await describe_spread(s, ApiKey.STREAMS_GROUP_DESCRIBE, (0,))


@scenarios("qd_1_groups_in_coordinator_partition_order", rule="QD-1")
async def _(s: Side) -> None:
    await describe_spread(s, ApiKey.SHARE_GROUP_DESCRIBE, (1,))


@scenarios("dl_1_groups_in_coordinator_partition_order", rule="DL-1")
async def _(s: Side) -> None:
    # three or four groups on each partition, so that the order within one shows too
    ids = spread(s, REQUESTED * 2)
    await consumer_and_classic(s, ids)  # both not empty: NON_EMPTY_GROUP
    for g in ids[5::3]:  # empty groups of committed offsets: deleted
        await commit(s, "ctl", g, 9, {(T3, 0): 1})
    # a share group with a member: NON_EMPTY_GROUP from its share state's deletion, first in its partition
    share_member = {"member_id": "s-member-id-of-22chars", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": [T1]}
    await s.call("s", ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=ids[9], **share_member)
    names = [*ids, "", s.group("unknown"), ids[0]]  # a blank id, an unknown one, a repeated one
    for v in (0, 2):
        resp = await s.call("ctl", ApiKey.DELETE_GROUPS, v, groups_names=names)
        s.note("answered in order", [(r.group_id, r.error_code) for r in resp.results])
