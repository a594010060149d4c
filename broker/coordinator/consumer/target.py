"""One target assignment computation (KH-9, KA-1, KA-2), from a snapshot of the group.

`TargetInput` is taken on the event loop: shallow copies of what the computation reads (members, their
targets, the resolved regexes), so `compute()` may run on the loop (a small group) or in the background
thread (a large one) alike; a member's fields are replaced, never changed in place, by replay, and the topic
catalog and offsets are read with single dict lookups. `compute()` builds the assignor's input (each
member's subscribed topics that exist, its current target by topic name), runs the assignor, and answers
the target records of the members whose target changed, with the moves and the lag spread it made.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator import assignors
from broker.coordinator.consumer.group import ConsumerMember, Partitions, from_partitions, regex_of
from storage import offsets_records as orec

Record = tuple[bytes, bytes | None]


@dataclass
class TargetInput:
    group_id: str
    group_epoch: int
    assignor: str
    members: dict[str, ConsumerMember]  # as they will be once the operation's records apply
    targets: dict[str, Partitions]  # the current targets, the replaced static member's under its successor's id
    resolved: dict[str, frozenset[str]]  # regex -> topics
    topics: Any  # the catalog (get by name)
    lag: Any
    racks: Any = None


@dataclass
class TargetOutput:
    targets: dict[str, Partitions]
    records: list[tuple[str, Record]] = field(default_factory=list)  # (member, its target record) where it changed
    moves: int = 0
    lag_spread: int = 0
    lag_max: int = 0
    lag_total: int = 0
    assignor_ms: float = 0.0  # wall clock
    total_ms: float = 0.0  # wall clock
    cpu_ms: float = 0.0  # the computing thread's CPU time: its cost, whatever else the machine runs


def compute(inp: TargetInput) -> TargetOutput:
    started = time.monotonic()
    cpu_started = time.thread_time()
    topics = inp.topics
    partitions: dict[str, int] = {}
    ids: dict[str, uuid.UUID] = {}
    by_id: dict[uuid.UUID, str] = {}
    specs = {}
    for mid, m in inp.members.items():
        names = set(m.subscribed_topic_names)
        regex = regex_of(m)
        if regex is not None:
            names |= inp.resolved.get(regex, frozenset())
        subscribed = []
        for n in names:
            if n not in partitions:
                topic = topics.get(n)
                if topic is None:
                    continue
                partitions[n] = topic.partitions
                ids[n] = topic.topic_id
                by_id[topic.topic_id] = n
            subscribed.append(n)
        current = inp.targets.get(mid) or {}
        current_by_name = {by_id[t]: ps for t, ps in current.items() if t in by_id}
        specs[mid] = assignors.MemberSpec(mid, m.instance_id, m.rack_id, frozenset(subscribed), current_by_name)
    spec = assignors.GroupSpec(inp.group_id, specs, partitions, inp.lag, racks=inp.racks)
    assigned_at = time.monotonic()
    result = assignors.get(inp.assignor).assign(spec)
    out = TargetOutput({}, assignor_ms=(time.monotonic() - assigned_at) * 1000)
    key = orec.consumer_group_key
    value = orec.consumer_target_assignment_value
    for mid in inp.members:
        parts: Partitions = {}
        mine = result.get(mid) or {}
        before = specs[mid].current
        for topic, ps in mine.items():
            if ps:
                parts[ids[topic]] = frozenset(ps)
                out.moves += len(ps) - len(ps & before.get(topic, frozenset()))
        out.targets[mid] = parts
        if inp.targets.get(mid) != parts:
            out.records.append(
                (mid, (key(orec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, inp.group_id, mid), value(from_partitions(parts))))
            )
    if inp.assignor == "lag-aware" and inp.lag is not None:
        lags = assignors.base.member_lags(result, inp.lag)
        if lags:
            out.lag_spread = max(lags.values()) - min(lags.values())
            out.lag_max = max(lags.values())
            out.lag_total = sum(lags.values())
    out.total_ms = (time.monotonic() - started) * 1000
    out.cpu_ms = (time.thread_time() - cpu_started) * 1000
    return out
