"""Streams groups (KIP-1071) in `kaflet groups describe` and `kaflet groups lag`: StreamsGroupDescribe
from each group's coordinator; a member's tasks (active, standby, warm-up; current and target), and
its lag: the lag of the input partitions of its active tasks (a task `S_P` reads partition P of
each source and repartition topic of sub-topology S), log end minus the group's committed offset.
"""

from __future__ import annotations

from typing import Any

from broker.admin_cli.output import table


def streams_describe(admin: Any, group_ids: list[str]) -> dict[str, Any]:
    """group id -> the described group, for the groups that are streams groups (others answer
    GROUP_ID_NOT_FOUND, or UNSUPPORTED_VERSION from a broker without streams groups)."""
    from protocol.kip1071 import StreamsGroupDescribeRequest

    async def run() -> dict[str, Any]:
        by_node: dict[int, list[str]] = {}
        for group_id, node in (await admin._find_coordinator_ids(group_ids)).items():
            by_node.setdefault(node, []).append(group_id)
        out: dict[str, Any] = {}
        for node, ids in by_node.items():
            request = StreamsGroupDescribeRequest(version=0, group_ids=ids, include_authorized_operations=False)
            try:
                response = await admin._manager.send(request, node_id=node)
            except Exception:
                continue  # a broker that does not serve StreamsGroupDescribe has no streams groups
            out.update({g.group_id: g for g in response.groups if g.error_code == 0})
        return out

    return dict(admin._manager.run(run))


def _tasks(task_ids: list[Any]) -> list[str]:
    return [f"{t.subtopology_id}_{p}" for t in sorted(task_ids, key=lambda t: t.subtopology_id) for p in sorted(t.partitions)]


def input_partitions(group: Any, active: list[Any], existing: dict[str, list[int]]) -> list[tuple[str, int]]:
    """The topic partitions the active tasks read (as the coordinator's endpoint information does)."""
    inputs: dict[str, list[str]] = {}
    for s in (group.topology.subtopologies or []) if group.topology is not None else []:
        inputs[s.subtopology_id] = sorted({*s.source_topics, *(t.name for t in s.repartition_source_topics)})
    out = []
    for t in active:
        for topic in inputs.get(t.subtopology_id, []):
            out += [(topic, p) for p in t.partitions if p in existing.get(topic, ())]
    return sorted(out)


def owned_partitions(admin: Any, group: Any) -> dict[str, list[tuple[str, int]]]:
    """member id -> the input partitions of its active tasks."""
    from broker.admin_cli.groups import _existing_partitions

    topics = set()
    for s in (group.topology.subtopologies or []) if group.topology is not None else []:
        topics |= {*s.source_topics, *(t.name for t in s.repartition_source_topics)}
    existing = _existing_partitions(admin, topics)
    return {m.member_id: input_partitions(group, m.assignment.active_tasks, existing) for m in group.members}


def member_lags(admin: Any, group_id: str, owned: dict[str, list[tuple[str, int]]]) -> dict[str, int | None]:
    """member id -> total lag of its active tasks' input partitions (None while one has no committed offset)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    from broker.admin_cli.groups import _committed, _offsets

    wanted = sorted({TopicPartition(t, p) for parts in owned.values() for t, p in parts}, key=lambda tp: (tp.topic, tp.partition))
    if not wanted:
        return dict.fromkeys(owned, 0)
    committed = _committed(admin, group_id)
    ends = _offsets(admin, wanted, OffsetSpec.LATEST)
    out: dict[str, int | None] = {}
    for member_id, parts in owned.items():
        total: int | None = 0
        for topic, partition in parts:
            tp = TopicPartition(topic, partition)
            if total is None or tp not in committed or tp not in ends:
                total = None
                continue
            total += max(ends[tp] - committed[tp], 0)
        out[member_id] = total
    return out


def describe_streams_group(d: Any, admin: Any) -> tuple[dict[str, Any], str]:
    """A streams group: epochs, topology epoch, and per member its process, epoch, tasks and lag."""
    owned = owned_partitions(admin, d)
    lags = member_lags(admin, d.group_id, owned) if d.members else {}
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "process_id": m.process_id,
            "member_epoch": m.member_epoch,
            "topology_epoch": m.topology_epoch,
            "active": _tasks(m.assignment.active_tasks),
            "standby": _tasks(m.assignment.standby_tasks),
            "warmup": _tasks(m.assignment.warmup_tasks),
            "target_active": _tasks(m.target_assignment.active_tasks),
            "target_standby": _tasks(m.target_assignment.standby_tasks),
            "target_warmup": _tasks(m.target_assignment.warmup_tasks),
            "lag": lags.get(m.member_id),
        }
        for m in d.members
    ]
    subtopologies = [
        {
            "subtopology": s.subtopology_id,
            "source_topics": list(s.source_topics),
            "repartition_sink_topics": list(s.repartition_sink_topics),
            "repartition_source_topics": [{"name": t.name, "partitions": t.partitions} for t in s.repartition_source_topics],
            "changelog_topics": [{"name": t.name, "partitions": t.partitions} for t in s.state_changelog_topics],
        }
        for s in ((d.topology.subtopologies or []) if d.topology is not None else [])
    ]
    out = {
        "group": d.group_id,
        "exists": True,
        "type": "streams",
        "state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "topology_epoch": d.topology.epoch if d.topology is not None else None,
        "protocol_type": "streams",
        "subtopologies": subtopologies,
        "members": members,
    }
    head = (
        f"Group: {d.group_id}\tType: streams\tState: {d.group_state}\tGroupEpoch: {d.group_epoch}"
        f"\tAssignmentEpoch: {d.assignment_epoch}\tTopologyEpoch: {out['topology_epoch']}"
    )

    def render(tasks: list[str]) -> str:
        return ",".join(tasks) or "-"

    rows = [
        [
            d.group_id,
            m["member_id"],
            m["process_id"],
            m["client_id"],
            m["host"],
            m["member_epoch"],
            render(m["active"]),
            render(m["standby"]),
            render(m["target_active"]) if m["target_active"] != m["active"] else "=",
            m["lag"],
        ]
        for m in members
    ]
    headers = ["GROUP", "MEMBER-ID", "PROCESS-ID", "CLIENT-ID", "HOST", "EPOCH", "ACTIVE-TASKS", "STANDBY-TASKS", "TARGET-ACTIVE", "LAG"]
    return out, head + "\n" + table(headers, rows)


def as_partition_owners(admin: Any, d: Any) -> dict[str, Any]:
    """The group in `kaflet groups lag`'s shape: state, and members with the partitions their active tasks read."""
    owned = owned_partitions(admin, d)
    members = []
    for m in d.members:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in owned.get(m.member_id, []):
            by_topic.setdefault(topic, []).append(partition)
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_assignment": {"assigned_partitions": [{"topic": t, "partitions": ps} for t, ps in sorted(by_topic.items())]},
            }
        )
    return {"group_state": d.group_state, "protocol_type": "streams", "protocol_data": "", "members": members}
