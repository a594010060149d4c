"""`kaflet groups` for share groups (KIP-932), as kafka-share-groups.sh shows them.

describe: the group's state, epochs and assignor (ShareGroupDescribe), each member's epoch and
partitions, and per partition the share-partition start offset and lag (DescribeShareGroupOffsets:
the records not yet delivered and acknowledged, Kafka's own count). lag: those per partition,
with the log end offset and the members the partition is assigned to. reset-offsets: a new start
offset per partition (AlterShareGroupOffsets), only while the group has no members, as Kafka's
tool; --shift-by moves from the current start offset. delete and list need nothing of their own.
"""

from __future__ import annotations

import argparse
from typing import Any

from broker.admin_cli import FAILED, GROUP_ACTIVE, OK
from broker.admin_cli.output import CommandError, Result, table


def describe_all(admin: Any, group_ids: list[str]) -> dict[str, Any]:
    """ShareGroupDescribe for each group from its coordinator: group id -> the described group, for
    the groups that are share groups (others answer GROUP_ID_NOT_FOUND; a broker without share
    groups does not serve the API, and then none is)."""
    from protocol.kip932 import ShareGroupDescribeRequest

    async def run() -> dict[str, Any]:
        by_node: dict[int, list[str]] = {}
        for group_id, node in (await admin._find_coordinator_ids(group_ids)).items():
            by_node.setdefault(node, []).append(group_id)
        out: dict[str, Any] = {}
        for node, ids in by_node.items():
            request = ShareGroupDescribeRequest(version=1, group_ids=ids, include_authorized_operations=False)
            response = await admin._manager.send(request, node_id=node)
            out.update({g.group_id: g for g in response.groups if g.error_code == 0})
        return out

    try:
        return dict(admin._manager.run(run))
    except Exception:
        return {}


def _offsets(admin: Any, group_id: str) -> list[dict[str, Any]]:
    """DescribeShareGroupOffsets v1 of every partition with share state: topic, partition, start offset, lag."""
    from protocol.kip932 import DescribeShareGroupOffsetsRequest

    group = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)

    async def run() -> Any:
        node = (await admin._find_coordinator_ids([group_id]))[group_id]
        return await admin._manager.send(DescribeShareGroupOffsetsRequest(version=1, groups=[group]), node_id=node)

    (answer,) = admin._manager.run(run).groups
    if answer.error_code:
        raise CommandError(f"Group '{group_id}': {answer.error_message or answer.error_code}", FAILED)
    return [
        {
            "topic": t.topic_name,
            "partition": p.partition_index,
            "start_offset": p.start_offset if p.start_offset >= 0 else None,
            "lag": p.lag if p.lag >= 0 else None,
        }
        for t in sorted(answer.topics, key=lambda t: t.topic_name)
        for p in sorted(t.partitions, key=lambda p: p.partition_index)
        if p.error_code == 0
    ]


def _parts(assignment: Any) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic_name, "partitions": sorted(tp.partitions)}
        for tp in sorted(assignment.topic_partitions, key=lambda t: t.topic_name)
    ]


def _render(parts: list[dict[str, Any]]) -> str:
    return " ".join(f"{a['topic']}:{','.join(map(str, a['partitions']))}" for a in parts) or "-"


def describe(d: Any, admin: Any) -> tuple[dict[str, Any], str]:
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "rack": m.rack_id,
            "member_epoch": m.member_epoch,
            "subscribed_topics": list(m.subscribed_topic_names),
            "assignment": _parts(m.assignment),
        }
        for m in d.members
    ]
    offsets = _offsets(admin, d.group_id)
    out = {
        "group": d.group_id,
        "exists": True,
        "type": "share",
        "state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor_name,
        "protocol_type": "share",
        "members": members,
        "partitions": offsets,
    }
    head = (
        f"Group: {d.group_id}\tType: share\tState: {d.group_state}\tGroupEpoch: {d.group_epoch}"
        f"\tAssignmentEpoch: {d.assignment_epoch}\tAssignor: {d.assignor_name}"
    )
    rows = [[d.group_id, m["member_id"], m["client_id"], m["host"], m["member_epoch"], _render(m["assignment"])] for m in members]
    blocks = [head, table(["GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT"], rows)]
    if offsets:
        rows = [[d.group_id, o["topic"], o["partition"], o["start_offset"], o["lag"]] for o in offsets]
        blocks.append(table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], rows))
    return out, "\n".join(blocks)


def lag(admin: Any, group_ids: list[str], described: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Per partition of each share group: start offset, log end, lag and the members assigned it."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    out = []
    rows = []
    for group_id in group_ids:
        d = described[group_id]
        owners: dict[tuple[str, int], list[str]] = {}
        for m in d.members:
            for tp in m.assignment.topic_partitions:
                for p in tp.partitions:
                    owners.setdefault((tp.topic_name, p), []).append(m.member_id)
        offsets = {(o["topic"], o["partition"]): o for o in _offsets(admin, group_id)}
        keys = sorted(set(offsets) | set(owners))
        ends = {}
        if keys:
            listed = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p in keys})
            ends = {(tp.topic, tp.partition): r.offset for tp, r in listed.items()}
        entries = []
        for key in keys:
            o = offsets.get(key, {})
            entry = {
                "topic": key[0],
                "partition": key[1],
                "start_offset": o.get("start_offset"),
                "log_end": ends.get(key),
                "lag": o.get("lag"),
                "members": sorted(owners.get(key, [])),
            }
            entries.append(entry)
            rows.append(
                [group_id, key[0], key[1], entry["start_offset"], entry["log_end"], entry["lag"], ",".join(entry["members"]) or "-"]
            )
        total = sum(e["lag"] for e in entries if e["lag"] is not None)
        out.append({"group": group_id, "exists": True, "type": "share", "state": d.group_state, "partitions": entries, "total_lag": total})
    headers = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBERS"]
    return out, table(headers, rows)


def reset_offsets(args: argparse.Namespace, admin: Any, d: Any, partitions: list[Any], timestamp: int | None) -> Result:
    """A share group's new start offsets (AlterShareGroupOffsets), only while it has no members."""
    from kafka.admin import OffsetSpec, OffsetTimestamp

    from protocol.kip932 import AlterShareGroupOffsetsRequest

    group = args.group
    if d.group_state != "Empty":
        raise CommandError(
            f"Share group '{group}' is not empty: its offsets can only be reset while it has no members (state {d.group_state}).",
            GROUP_ACTIVE,
        )
    current = {(o["topic"], o["partition"]): o["start_offset"] for o in _offsets(admin, group)}
    earliest = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
    latest = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))

    def clamp(tp: Any, offset: int) -> int:
        return min(max(offset, earliest[tp].offset), latest[tp].offset)

    planned: dict[Any, int] = {}
    for tp in partitions:
        if args.to_earliest:
            planned[tp] = earliest[tp].offset
        elif args.to_latest:
            planned[tp] = latest[tp].offset
        elif args.to_offset is not None:
            planned[tp] = clamp(tp, args.to_offset)
        elif args.shift_by is not None:
            start = current.get((tp.topic, tp.partition))
            if start is None:
                raise CommandError(
                    f"Cannot shift offset for partition {tp.topic}-{tp.partition} since the share group has no start offset for it", FAILED
                )
            planned[tp] = clamp(tp, start + args.shift_by)
    if timestamp is not None:
        found = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetTimestamp(timestamp)))
        planned = {tp: found[tp].offset if found[tp].offset >= 0 else latest[tp].offset for tp in partitions}
    errors: list[str] = []
    results: dict[Any, str | None] = dict.fromkeys(partitions)
    if args.execute:
        topic_cls = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(
                topic_cls.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=planned[tp])
            )
        request = AlterShareGroupOffsetsRequest(
            version=0, group_id=group, topics=[topic_cls(topic_name=t, partitions=ps) for t, ps in by_topic.items()]
        )

        async def run() -> Any:
            node = (await admin._find_coordinator_ids([group]))[group]
            return await admin._manager.send(request, node_id=node)

        answer = admin._manager.run(run)
        if answer.error_code:
            raise CommandError(f"Share group '{group}': {answer.error_message or answer.error_code}", FAILED)
        for t in answer.responses:
            for p in t.partitions:
                if p.error_code:
                    key = next(tp for tp in partitions if (tp.topic, tp.partition) == (t.topic_name, p.partition_index))
                    results[key] = p.error_message or str(p.error_code)
                    errors.append(f"Partition {t.topic_name}-{p.partition_index}: {results[key]}")
    entries = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current": current.get((tp.topic, tp.partition)),
            "new": planned[tp],
            "error": results[tp],
        }
        for tp in partitions
    ]
    rows = [[group, e["topic"], e["partition"], e["current"], e["new"]] for e in entries]
    text = table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"], rows)
    if not args.execute:
        text += "\n(dry run: nothing was changed; add --execute to write these offsets)"
    data = {"group": group, "type": "share", "state": d.group_state, "executed": bool(args.execute), "partitions": entries}
    return Result(data, text, FAILED if errors else OK, errors)
