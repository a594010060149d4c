"""`kaflet groups list|describe|delete|lag|reset-offsets|rebalance` (kafka-consumer-groups.sh's semantics;
share groups as kafka-share-groups.sh, broker/admin_cli/share_groups.py).

Streams groups (KIP-1071) are described with their tasks (broker/admin_cli/streams_groups.py).

lag: per partition the committed offset, the log end offset (ListOffsets latest, read
uncommitted, as Kafka's tool asks) and their difference, with the member that owns the
partition; partitions a member owns without a commit are listed with no offset and no lag.

describe adds each member's assigned lag: the lag of the partitions it is assigned, as the lag-aware assignor
counts it (log end minus committed offset; a partition never committed per the group's `lag.aware.uncommitted`,
read with DescribeConfigs on the GROUP resource, `earliest` when the broker does not say: log end minus log start).
For a KIP-848 group it also gives the lag of each member's target assignment, the lag spread (max minus min over
the members) of both, and the moves still to make: partitions in a member's target it does not own yet.

rebalance is kaflet's own (Kafka has no such API): an IncrementalAlterConfigs SET of the group config
`kaflet.rebalance` on the GROUP resource, which the coordinator answers by bumping the group epoch.

reset-offsets follows ConsumerGroupCommand: only while the group is Empty or Dead (else it
refuses with Kafka's message); --to-offset and --shift-by are clamped to [log start, log end];
--shift-by needs a committed offset; --to-datetime falls back to the log end offset where no
record is that recent; nothing is written without --execute.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable
from typing import Any

from broker.admin_cli import FAILED, GROUP_ACTIVE, OK
from broker.admin_cli import share_groups as share
from broker.admin_cli.output import CommandError, Result, table

INACTIVE_STATES = ("Empty", "Dead")


def add_actions(actions: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """The actions of `kaflet groups`: each takes its group(s) as arguments (GROUP), and `common(p)`
    adds the options every action takes."""
    p = actions.add_parser("list", help="groups with their state, protocol type and type")
    p.add_argument("--state", action="append", default=[], help="only groups in this state (repeatable)")
    p.set_defaults(run=list_groups)
    common(p)
    p = actions.add_parser("describe", help="state, protocol and members of groups, with each member's assigned lag")
    _group_arguments(p, "+")
    p.set_defaults(run=describe_groups)
    p = actions.add_parser("delete", help="delete groups (they must have no members)")
    _group_arguments(p, "+")
    p.set_defaults(run=delete_groups)
    p = actions.add_parser("lag", help="committed offset, log end, lag and owner per partition")
    _group_arguments(p, "+")
    p.set_defaults(run=lag)
    p = actions.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    _group_arguments(p, 1)
    p.add_argument("--topic", required=True, action="append", metavar="TOPIC[:P[,P...]]", help="topic, or topic:partitions (repeatable)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    how.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="the first offset at or after this time (UTC unless given)")
    how.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (clamped to the log)")
    p.add_argument("--execute", action="store_true", help="write the new offsets (default: only show them)")
    p.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    p.set_defaults(run=reset_offsets)
    p = actions.add_parser("rebalance", help="kaflet only: recompute a consumer group's target assignment now (bumps its group epoch)")
    _group_arguments(p, 1)
    p.set_defaults(run=rebalance)
    for action in ("describe", "delete", "lag", "reset-offsets", "rebalance"):
        common(actions.choices[action])


USAGE_EXTRA = {"reset-offsets": " --topic TOPIC[:P,...] (--to-earliest|--to-latest|--to-offset N|--to-datetime T|--shift-by N) [--execute]"}


def _group_arguments(p: argparse.ArgumentParser, count: int | str) -> None:
    """GROUP as arguments; `--group G`, the spelling of earlier versions for reset-offsets and
    rebalance (and kafka-consumer-groups.sh's), still works everywhere, with a note."""
    p.add_argument("groups", nargs="*", metavar="GROUP", help="the group" if count == 1 else "the groups")
    # argparse would show GROUP as optional: it is required, given as an argument (or --group, above)
    extra = USAGE_EXTRA.get(p.prog.rsplit(" ", 1)[-1], "")
    p.usage = f"%(prog)s {'GROUP' if count == 1 else 'GROUP [GROUP ...]'}{extra} [OPTIONS]"
    p.add_argument("--group", action="append", default=[], dest="group_option", help=argparse.SUPPRESS)
    p.set_defaults(check=lambda args: _resolve_groups(args, p, count))


def _resolve_groups(args: argparse.Namespace, p: argparse.ArgumentParser, count: int | str) -> None:
    if args.group_option:
        sys.stderr.write(f"{p.prog}: --group is deprecated; give the group as an argument: {p.prog} {' '.join(args.group_option)}\n")
    groups = [*args.groups, *args.group_option]
    if not groups:
        p.error("the following arguments are required: GROUP")
    if count == 1 and len(groups) > 1:
        p.error(f"one group only, got {len(groups)}: {' '.join(groups)}")
    args.groups = groups
    args.group = groups[0]


# -- helpers --------------------------------------------------------------------------------


def _describe(admin: Any, group_ids: list[str]) -> dict[str, dict[str, Any]]:
    """DescribeGroups, with KIP-848 groups (which DescribeGroups reports Dead) described by
    ConsumerGroupDescribe in the same shape: state, and members with their assigned partitions."""
    from broker.admin_cli import streams_groups

    consumer_groups = _consumer_describe(admin, group_ids)
    streams = streams_groups.streams_describe(admin, [g for g in group_ids if g not in consumer_groups])
    rest = [g for g in group_ids if g not in consumer_groups and g not in streams]
    out = dict(admin.describe_groups(rest)) if rest else {}
    for group_id, sd in streams.items():
        out[group_id] = streams_groups.as_partition_owners(admin, sd)
    for group_id, d in consumer_groups.items():
        out[group_id] = {
            "group_state": d.group_state,
            "protocol_type": "consumer",
            "protocol_data": "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_assignment": {
                        "assigned_partitions": [
                            {"topic": tp.topic_name, "partitions": list(tp.partitions)} for tp in m.assignment.topic_partitions
                        ]
                    },
                }
                for m in d.members
            ],
        }
    return out


def _assignment(member: dict[str, Any]) -> list[tuple[str, int]]:
    raw = member.get("member_assignment")
    if not isinstance(raw, dict):
        return []
    return [(a["topic"], p) for a in raw.get("assigned_partitions", []) for p in a["partitions"]]


def _member_summary(member: dict[str, Any]) -> dict[str, Any]:
    owned: dict[str, list[int]] = {}
    for topic, partition in _assignment(member):
        owned.setdefault(topic, []).append(partition)
    return {
        "member_id": member["member_id"],
        "instance_id": member.get("group_instance_id"),
        "client_id": member.get("client_id"),
        "host": member.get("client_host"),
        "assignment": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(owned.items())],
    }


def _existing_partitions(admin: Any, topics: set[str]) -> dict[str, list[int]]:
    """topic -> partitions, for the topics of `topics` that exist."""
    if not topics:
        return {}
    return {
        t["name"]: sorted(p["partition_index"] for p in t["partitions"])
        for t in admin.describe_topics(sorted(topics))
        if t["error_code"] == 0
    }


def _offsets(admin: Any, partitions: list[Any], spec: Any) -> dict[Any, int]:
    from kafka.admin import OffsetSpec  # noqa: F401  (the specs come from there)

    if not partitions:
        return {}
    return {tp: r.offset for tp, r in admin.list_partition_offsets(dict.fromkeys(partitions, spec)).items()}


def _committed(admin: Any, group: str) -> dict[Any, int]:
    offsets = admin.list_group_offsets({group: None}).get(group, {})
    return {tp: om.offset for tp, om in offsets.items() if om.offset >= 0}


REBALANCE_CONFIG = "kaflet.rebalance"
LAG_CONFIG = "lag.aware.uncommitted"


def _uncommitted_mode(admin: Any, group: str) -> str:
    """The group's `lag.aware.uncommitted` (DescribeConfigs, GROUP resource); `earliest` if the broker has none."""
    from kafka.admin import ConfigResource, ConfigResourceType

    try:
        answer = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, group, [LAG_CONFIG])], config_filter="all")
    except Exception:
        return "earliest"
    for configs in _walk(answer):
        value = configs.get(LAG_CONFIG)
        if isinstance(value, dict):
            value = value.get("value")
        if value in ("earliest", "latest"):
            return str(value)
    return "earliest"


def _walk(answer: Any) -> list[dict[str, Any]]:
    """The config dicts in a describe_configs answer (nested by resource type and name)."""
    found: list[dict[str, Any]] = []
    stack = [answer]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if LAG_CONFIG in item:
                found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def _assigned_lags(admin: Any, group: str, members: list[dict[str, Any]]) -> dict[str, int | None]:
    """Member id -> total lag of its assigned partitions (None when a partition's offsets are unknown)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    assigned = {m["member_id"]: [TopicPartition(a["topic"], p) for a in m["assignment"] for p in a["partitions"]] for m in members}
    wanted = sorted({tp for tps in assigned.values() for tp in tps}, key=lambda tp: (tp.topic, tp.partition))
    if not wanted:
        return dict.fromkeys(assigned, 0)
    committed = _committed(admin, group)
    ends = _offsets(admin, wanted, OffsetSpec.LATEST)
    uncommitted = [tp for tp in wanted if tp not in committed]
    mode = _uncommitted_mode(admin, group) if uncommitted else "earliest"
    starts = _offsets(admin, uncommitted, OffsetSpec.EARLIEST) if uncommitted and mode == "earliest" else {}
    out: dict[str, int | None] = {}
    for member_id, tps in assigned.items():
        total: int | None = 0
        for tp in tps:
            end = ends.get(tp)
            if end is None or total is None:
                total = None
                continue
            if tp in committed:
                total += max(end - committed[tp], 0)
            elif mode == "earliest":
                start = starts.get(tp)
                total = None if start is None else total + max(end - start, 0)
        out[member_id] = total
    return out


# -- list, describe, delete ------------------------------------------------------------------


def list_groups(args: argparse.Namespace, admin: Any) -> Result:
    listed = admin.list_groups()
    wanted = {s.lower() for s in args.state}
    rows = [
        {
            "group": g["group_id"],
            "state": g.get("group_state") or "",
            "protocol_type": g.get("protocol_type") or "",
            "type": g.get("group_type"),
        }
        for g in sorted(listed, key=lambda g: g["group_id"])
        if not wanted or (g.get("group_state") or "").lower() in wanted
    ]
    text = table(["GROUP", "STATE", "PROTOCOL-TYPE", "TYPE"], [list(r.values()) for r in rows])
    return Result({"groups": rows}, text)


def _consumer_describe(admin: Any, group_ids: list[str]) -> dict[str, Any]:
    """ConsumerGroupDescribe (KIP-848) for each group, from its coordinator: group id -> the
    described group, for the groups that are consumer groups (others answer GROUP_ID_NOT_FOUND)."""
    from protocol.kip848 import ConsumerGroupDescribeRequest

    async def run() -> dict[str, Any]:
        by_node: dict[int, list[str]] = {}
        for group_id, node in (await admin._find_coordinator_ids(group_ids)).items():
            by_node.setdefault(node, []).append(group_id)
        out: dict[str, Any] = {}
        for node, ids in by_node.items():
            request = ConsumerGroupDescribeRequest(version=0, group_ids=ids, include_authorized_operations=False)
            response = await admin._manager.send(request, node_id=node)
            out.update({g.group_id: g for g in response.groups if g.error_code == 0})
        return out

    return dict(admin._manager.run(run))


def _parts(assignment: Any) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic_name, "partitions": sorted(tp.partitions)}
        for tp in sorted(assignment.topic_partitions, key=lambda t: t.topic_name)
    ]


def _render_parts(parts: list[dict[str, Any]]) -> str:
    return " ".join(f"{a['topic']}:{','.join(map(str, a['partitions']))}" for a in parts) or "-"


def _describe_consumer_group(d: Any, admin: Any) -> tuple[dict[str, Any], str]:
    """A KIP-848 group: its epochs, assignor, and each member's epoch, current and target assignment and
    assigned lag."""
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "member_epoch": m.member_epoch,
            "subscribed_topics": list(m.subscribed_topic_names),
            "subscribed_regex": m.subscribed_topic_regex or None,
            "assignment": _parts(m.assignment),
            "target_assignment": _parts(m.target_assignment),
        }
        for m in d.members
    ]
    if members:
        lags = _assigned_lags(admin, d.group_id, members)
        target_lags = _assigned_lags(
            admin, d.group_id, [{"member_id": m["member_id"], "assignment": m["target_assignment"]} for m in members]
        )
        for m in members:
            m["assigned_lag"] = lags.get(m["member_id"])
            m["target_lag"] = target_lags.get(m["member_id"])
    owned = {m["member_id"]: {(a["topic"], p) for a in m["assignment"] for p in a["partitions"]} for m in members}
    pending = sum(len({(a["topic"], p) for a in m["target_assignment"] for p in a["partitions"]} - owned[m["member_id"]]) for m in members)
    out = {
        "group": d.group_id,
        "exists": True,
        "type": "consumer",
        "state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor_name,
        "protocol_type": "consumer",
        "lag_spread": _spread([m.get("assigned_lag") for m in members]),
        "target_lag_spread": _spread([m.get("target_lag") for m in members]),
        "moves_to_target": pending,
        "members": members,
    }
    head = (
        f"Group: {d.group_id}\tType: consumer\tState: {d.group_state}\tGroupEpoch: {d.group_epoch}"
        f"\tAssignmentEpoch: {d.assignment_epoch}\tAssignor: {d.assignor_name}"
        f"\tLagSpread: {out['lag_spread']}\tTargetLagSpread: {out['target_lag_spread']}\tMovesToTarget: {pending}"
    )
    rows = [
        [
            d.group_id,
            m["member_id"],
            m["instance_id"],
            m["client_id"],
            m["host"],
            m["member_epoch"],
            _render_parts(m["assignment"]),
            _render_parts(m["target_assignment"]),
            m["assigned_lag"],
            m["target_lag"],
        ]
        for m in members
    ]
    headers = [
        "GROUP",
        "MEMBER-ID",
        "INSTANCE-ID",
        "CLIENT-ID",
        "HOST",
        "EPOCH",
        "ASSIGNMENT",
        "TARGET-ASSIGNMENT",
        "ASSIGNED-LAG",
        "TARGET-LAG",
    ]
    return out, head + "\n" + table(headers, rows)


def _spread(lags: list[int | None]) -> int | None:
    """Max minus min of the members' lags; None when a lag is unknown (0 for an empty group)."""
    if any(v is None for v in lags):
        return None
    known = [v for v in lags if v is not None]
    return max(known) - min(known) if known else 0


def describe_groups(args: argparse.Namespace, admin: Any) -> Result:
    from broker.admin_cli import streams_groups

    share_groups = share.describe_all(admin, args.groups)
    consumer_groups = _consumer_describe(admin, [g for g in args.groups if g not in share_groups])
    streams = streams_groups.streams_describe(admin, [g for g in args.groups if g not in consumer_groups and g not in share_groups])
    classic_ids = [g for g in args.groups if g not in consumer_groups and g not in streams and g not in share_groups]
    described = dict(admin.describe_groups(classic_ids)) if classic_ids else {}
    out = []
    errors = []
    blocks = []
    for group_id in args.groups:
        if group_id in share_groups or group_id in streams:
            if group_id in share_groups:
                summary, block = share.describe(share_groups[group_id], admin)
            else:
                summary, block = streams_groups.describe_streams_group(streams[group_id], admin)
            out.append(summary)
            blocks.append(block)
            continue
        if group_id in consumer_groups:
            summary, block = _describe_consumer_group(consumer_groups[group_id], admin)
            out.append(summary)
            blocks.append(block)
            continue
        d = described[group_id]
        exists = d["group_state"] != "Dead"
        if not exists:
            errors.append(f"Consumer group '{group_id}' does not exist.")
        members = [_member_summary(m) for m in d["members"]]
        if exists and members:
            lags = _assigned_lags(admin, group_id, members)
            for m in members:
                m["assigned_lag"] = lags.get(m["member_id"])
        out.append(
            {
                "group": group_id,
                "exists": exists,
                "type": "classic",
                "state": d["group_state"],
                "protocol_type": d["protocol_type"],
                "protocol": d["protocol_data"],
                "members": members,
            }
        )
        if exists:
            head = f"Group: {group_id}\tState: {d['group_state']}\tProtocolType: {d['protocol_type']}\tProtocol: {d['protocol_data']}"
            rows = [
                [
                    group_id,
                    m["member_id"],
                    m["instance_id"],
                    m["client_id"],
                    m["host"],
                    " ".join(f"{a['topic']}:{','.join(map(str, a['partitions']))}" for a in m["assignment"]) or "-",
                    m.get("assigned_lag"),
                ]
                for m in members
            ]
            headers = ["GROUP", "MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT", "ASSIGNED-LAG"]
            blocks.append(head + "\n" + table(headers, rows))
    return Result({"groups": out}, "\n\n".join(blocks), FAILED if errors else OK, errors)


def delete_groups(args: argparse.Namespace, admin: Any) -> Result:
    outcome = admin.delete_groups(args.groups)
    results = []
    errors = []
    busy = 0
    for group_id in args.groups:
        status = outcome.get(group_id, "OK")
        error = None if status == "OK" else _error_label(status)
        if error == "NON_EMPTY_GROUP":
            busy += 1
            errors.append(f"Group '{group_id}' could not be deleted: it has active members (NON_EMPTY_GROUP).")
        elif error is not None:
            errors.append(f"Group '{group_id}' could not be deleted: {error}.")
        results.append({"group": group_id, "deleted": error is None, "error": error})
    code = OK if not errors else (GROUP_ACTIVE if busy == len(errors) else FAILED)
    rows = [[r["group"], "deleted" if r["deleted"] else r["error"]] for r in results]
    return Result({"groups": results}, table(["GROUP", "RESULT"], rows), code, errors)


def _error_label(status: Any) -> str:
    """kafka-python reports a failed group as an error class or its name: Kafka's error name."""
    import kafka.errors as errors

    cls = status if isinstance(status, type) else getattr(errors, str(status), None)
    message = getattr(cls, "message", None)
    return str(message) if message else str(status)


# -- lag ------------------------------------------------------------------------------------


def lag(args: argparse.Namespace, admin: Any) -> Result:
    from kafka.admin import OffsetSpec

    share_groups = share.describe_all(admin, args.groups)
    others = [g for g in args.groups if g not in share_groups]
    shared, share_text = share.lag(admin, [g for g in args.groups if g in share_groups], share_groups)
    described = _describe(admin, others)
    out = []
    rows = []
    errors = []
    notes: list[str] = []
    for group_id in others:
        d = described[group_id]
        committed = _committed(admin, group_id)
        owners: dict[Any, dict[str, Any]] = {}
        from kafka import TopicPartition

        for m in d["members"]:
            for topic, partition in _assignment(m):
                owners[TopicPartition(topic, partition)] = m
        if d["group_state"] == "Dead" and not committed:
            errors.append(f"Consumer group '{group_id}' does not exist.")
            out.append({"group": group_id, "exists": False, "state": "Dead", "partitions": [], "total_lag": None})
            continue
        partitions = sorted(set(committed) | set(owners), key=lambda tp: (tp.topic, tp.partition))
        existing = _existing_partitions(admin, {tp.topic for tp in partitions})
        known = [tp for tp in partitions if tp.partition in existing.get(tp.topic, ())]
        ends = _offsets(admin, known, OffsetSpec.LATEST)
        entries = []
        for tp in partitions:
            current = committed.get(tp)
            end = ends.get(tp)
            owner = owners.get(tp)
            entry = {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed": current,
                "log_end": end,
                "lag": end - current if current is not None and end is not None else None,
                "member_id": owner["member_id"] if owner else None,
                "host": owner.get("client_host") if owner else None,
                "client_id": owner.get("client_id") if owner else None,
            }
            entries.append(entry)
            rows.append([group_id, *entry.values()])
        total = sum(e["lag"] for e in entries if e["lag"] is not None)
        entry_out = {"group": group_id, "exists": True, "state": d["group_state"], "partitions": entries, "total_lag": total}
        if not entries:  # say why there is no row, rather than print nothing
            entry_out["note"] = (
                f"Consumer group '{group_id}' ({d['group_state']}) has no committed offsets and no assigned partitions: "
                "no lag to show (deleting a topic deletes the group's offsets of it)."
            )
            notes.append(entry_out["note"])
        out.append(entry_out)
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    by_group = {g["group"]: g for g in out + shared}
    texts = (["\n".join(filter(None, [table(headers, rows), *notes]))] if others else []) + ([share_text] if shared else [])
    return Result({"groups": [by_group[g] for g in args.groups]}, "\n\n".join(texts), FAILED if errors else OK, errors)


# -- reset-offsets --------------------------------------------------------------------------


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch of 'YYYY-MM-DDTHH:mm:SS[.sss][zone]' (UTC when no zone is given,
    as Kafka's Utils.getDateTime)."""
    if "T" not in text:
        raise CommandError(f"Error parsing timestamp {text!r}: it does not contain a 'T' (ISO-8601, e.g. 2024-01-31T12:00:00.000)", 2)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise CommandError(f"Error parsing timestamp {text!r}: {exc}", 2) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _partitions_to_reset(admin: Any, specs: list[str]) -> list[Any]:
    from kafka import TopicPartition

    out: list[Any] = []
    whole: list[str] = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        if not topic:
            raise CommandError(f"--topic {spec!r}: no topic name", 2)
        if not sep:
            whole.append(topic)
            continue
        try:
            out += [TopicPartition(topic, int(p)) for p in parts.split(",") if p != ""]
        except ValueError:
            raise CommandError(f"--topic {spec!r}: partitions must be integers (TOPIC:0,1,2)", 2) from None
    existing = _existing_partitions(admin, {tp.topic for tp in out} | set(whole))
    for topic in whole:
        if topic not in existing:
            raise CommandError(f"Topic '{topic}' does not exist.", FAILED)
        out += [TopicPartition(topic, p) for p in existing[topic]]
    for tp in out:
        if tp.partition not in existing.get(tp.topic, ()):
            raise CommandError(f"Partition {tp.topic}-{tp.partition} does not exist.", FAILED)
    return sorted(dict.fromkeys(out), key=lambda tp: (tp.topic, tp.partition))


def reset_offsets(args: argparse.Namespace, admin: Any) -> Result:
    from kafka.admin import OffsetSpec, OffsetTimestamp
    from kafka.structs import OffsetAndMetadata

    if args.execute and args.dry_run:
        raise CommandError("--execute and --dry-run are mutually exclusive", 2)
    timestamp = parse_datetime(args.to_datetime) if args.to_datetime is not None else None
    group = args.group
    share_group = share.describe_all(admin, [group]).get(group)
    if share_group is not None:
        return share.reset_offsets(args, admin, share_group, _partitions_to_reset(admin, args.topic), timestamp)
    state = _describe(admin, [group])[group]["group_state"]
    if state not in INACTIVE_STATES:
        raise CommandError(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.", GROUP_ACTIVE
        )
    partitions = _partitions_to_reset(admin, args.topic)
    committed = _committed(admin, group)
    earliest = _offsets(admin, partitions, OffsetSpec.EARLIEST)
    latest = _offsets(admin, partitions, OffsetSpec.LATEST)

    def clamp(tp: Any, offset: int) -> int:
        return latest[tp] if offset > latest[tp] else max(offset, earliest[tp])

    if args.to_earliest:
        planned = dict(earliest)
    elif args.to_latest:
        planned = dict(latest)
    elif args.to_offset is not None:
        planned = {tp: clamp(tp, args.to_offset) for tp in partitions}
    elif args.shift_by is not None:
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            tp = missing[0]
            raise CommandError(
                f"Cannot shift offset for partition {tp.topic}-{tp.partition} since there is no current committed offset", FAILED
            )
        planned = {tp: clamp(tp, committed[tp] + args.shift_by) for tp in partitions}
    else:
        assert timestamp is not None
        found = _offsets(admin, partitions, OffsetTimestamp(timestamp))
        planned = {tp: found[tp] if found.get(tp, -1) >= 0 else latest[tp] for tp in partitions}
    errors: list[str] = []
    results: dict[Any, str | None] = dict.fromkeys(partitions)
    if args.execute:
        outcome = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(planned[tp], "", -1) for tp in partitions})
        for tp, error in outcome.items():
            if getattr(error, "errno", 0):
                results[tp] = str(error.message)
                errors.append(f"Partition {tp.topic}-{tp.partition}: {error.message}")
    entries = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current": committed.get(tp),
            "new": planned[tp],
            "error": results[tp],
        }
        for tp in partitions
    ]
    rows = [[group, e["topic"], e["partition"], e["current"], e["new"]] for e in entries]
    text = table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"], rows)
    if not args.execute:
        text += "\n(dry run: nothing was changed; add --execute to write these offsets)"
    data = {"group": group, "state": state, "executed": bool(args.execute), "partitions": entries}
    return Result(data, text, FAILED if errors else OK, errors)


# -- rebalance ------------------------------------------------------------------------


def rebalance(args: argparse.Namespace, admin: Any) -> Result:
    from kafka.admin import ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.GROUP, args.group, {REBALANCE_CONFIG: "now"})
    try:
        answer = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
    except Exception as exc:  # the broker's refusal comes back as an error code, raised by the client
        return Result({"group": args.group, "rebalanced": False, "error": str(exc)}, "", FAILED, [f"Group '{args.group}': {exc}"])
    error = _alter_error(answer)
    if error is not None:
        return Result(
            {"group": args.group, "rebalanced": False, "error": error}, "", FAILED, [f"Group '{args.group}' was not rebalanced: {error}"]
        )
    text = f"Group '{args.group}': rebalance requested (group epoch bumped; members get the new target on their next heartbeat)."
    return Result({"group": args.group, "rebalanced": True, "error": None}, text)


def _alter_error(answer: Any) -> str | None:
    """The first error in kafka-python's alter_configs answer ({type: {name: result}}), None when every resource
    succeeded. A failed resource's result is a string "[Error N] Name: message" (or an error class/instance)."""
    stack = [answer]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str):
            if item.startswith("[Error"):
                return item.split("] ", 1)[-1]
        elif isinstance(item, type) and issubclass(item, Exception):
            if getattr(item, "errno", 0):
                return _error_label(item)
        elif isinstance(item, Exception) and getattr(item, "errno", 0):
            return str(item)
    return None
