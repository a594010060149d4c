"""What two brokers may answer differently and still agree: every normalization rule, in one place.

An answer is normalized field by field, by the field's name (the same name means the same thing
in every group API), before the two transcripts are compared:

- `throttle_time_ms` -> 0: quotas are not compared.
- `error_message` and other human texts -> "<text>" when not null: the words may differ, the
  nullness may not.
- `node_id`, `host`, `port` of a coordinator -> "<node>", "<host>", "<port>" (kept when -1 / "",
  the values of "no coordinator"); `cluster_id` -> "<cluster>".
- ids the broker generates: member ids -> the name of the actor that received them ("<a>"),
  their shape compared separately (harness.id_shape); topic ids -> "<topic NAME>"; producer
  ids -> "<pid1>", "<pid2>" in order of appearance (-1 kept).
- timestamps (`transaction_start_time_ms`) -> "<time>" (-1 and 0 kept: no time, or a default).
- lists whose order Kafka leaves to a hash map (UNORDERED) are sorted.
- answers that list the whole broker (ListGroups, ListTransactions) keep only this scenario's
  own names: every scenario shares the brokers with the others running beside it.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.differential.harness import Entry, Side

TEXT_FIELDS = frozenset({"error_message"})
COORDINATOR_FIELDS = {"node_id": (-1, "<node>"), "host": ("", "<host>"), "port": (-1, "<port>")}
TIMESTAMP_FIELDS = frozenset({"transaction_start_time_ms"})
ZERO_UUID = uuid.UUID(int=0)

# (api, path of a list) whose order is not part of the protocol: sorted before comparing. Kafka
# builds these from hash maps (members, groups listed or described per coordinator partition,
# assignments keyed by topic id), or merges the entries the API layer refused (unknown topics)
# before those the coordinator answered; clients look entries up by name.
UNORDERED: dict[str, frozenset[str]] = {
    "JoinGroup": frozenset({"members"}),
    "DescribeGroups": frozenset({"groups", "groups[].members"}),
    "ListGroups": frozenset({"groups"}),
    "DeleteGroups": frozenset({"results"}),
    "OffsetCommit": frozenset({"topics", "topics[].partitions"}),
    "TxnOffsetCommit": frozenset({"topics", "topics[].partitions"}),
    "OffsetDelete": frozenset({"topics", "topics[].partitions"}),
    "OffsetFetch": frozenset({"topics", "topics[].partitions", "groups", "groups[].topics", "groups[].topics[].partitions"}),
    "ConsumerGroupHeartbeat": frozenset({"assignment.topic_partitions", "assignment.topic_partitions[].partitions"}),
    "ConsumerGroupDescribe": frozenset(
        {
            "groups",
            "groups[].members",
            "groups[].members[].subscribed_topic_names",
            "groups[].members[].assignment.topic_partitions",
            "groups[].members[].target_assignment.topic_partitions",
        }
    ),
    "ListTransactions": frozenset({"transaction_states"}),
    "DescribeTransactions": frozenset({"transaction_states", "transaction_states[].topics", "transaction_states[].topics[].partitions"}),
    "AddPartitionsToTxn": frozenset(
        {
            "results_by_topic_v3_and_below",
            "results_by_topic_v3_and_below[].results_by_partition",
            "results_by_transaction",
            "results_by_transaction[].topic_results",
            "results_by_transaction[].topic_results[].results_by_partition",
        }
    ),
    "DescribeConfigs": frozenset({"results", "results[].configs"}),
    "IncrementalAlterConfigs": frozenset({"responses"}),
}

# Answers listing every group / transaction of the broker: (list field, name field).
BROKER_WIDE: dict[str, tuple[str, str]] = {
    "ListGroups": ("groups", "group_id"),
    "ListTransactions": ("transaction_states", "transactional_id"),
}


class Normalizer:
    """Normalizes one side's transcript (ids are that side's own)."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.pids: dict[int, str] = {}

    def entries(self) -> list[tuple[str, Any]]:
        out = [(e.label, self.entry(e)) for e in self.side.transcript]
        if self.side.id_shapes:
            out.append(("generated ids", [f"{alias} {shape}" for alias, shape in self.side.id_shapes]))
        return out

    def entry(self, e: Entry) -> Any:
        answer = e.answer
        if e.api in BROKER_WIDE and isinstance(answer, dict):
            list_field, name_field = BROKER_WIDE[e.api]
            own = self.side.own
            answer = dict(answer)
            answer[list_field] = [x for x in answer[list_field] or [] if str(x.get(name_field, "")).startswith(own)]
        return self.value(e.api, "", answer, None)

    def value(self, api: str, path: str, v: Any, name: str | None) -> Any:
        if isinstance(v, dict):
            return {k: self.value(api, f"{path}.{k}" if path else k, x, k) for k, x in v.items()}
        if isinstance(v, list):
            items = [self.value(api, f"{path}[]", x, name) for x in v]
            if path in UNORDERED.get(api, ()):
                items.sort(key=repr)
            return items
        return self.scalar(name, v)

    def scalar(self, name: str | None, v: Any) -> Any:
        if name == "throttle_time_ms":
            return 0
        if name in TEXT_FIELDS:
            return None if v is None else "<text>"
        if name in COORDINATOR_FIELDS:
            none, masked = COORDINATOR_FIELDS[name]
            return v if v == none else masked
        if name == "cluster_id":
            return "<cluster>"
        if name in TIMESTAMP_FIELDS:
            return v if v in (-1, 0) else "<time>"  # -1 "none" and 0 a schema default are no times
        if name == "producer_id" and isinstance(v, int) and v >= 0:
            if v not in self.pids:
                self.pids[v] = f"<pid{len(self.pids) + 1}>"
            return self.pids[v]
        if isinstance(v, uuid.UUID):
            if v == ZERO_UUID:
                return "<zero uuid>"
            topic = self.side.broker.topic_ids.get(v)
            return f"<topic {topic}>" if topic else self.side.alias(str(v))
        if isinstance(v, str) and v in self.side.aliases:
            return self.side.aliases[v]
        return v


def normalized(side: Side) -> list[tuple[str, Any]]:
    return Normalizer(side).entries()


# -- comparing --------------------------------------------------------------------------------

Difference = tuple[str, Any, Any]  # (path, kaflet's value, Kafka's value)


def compare(ours: list[tuple[str, Any]], theirs: list[tuple[str, Any]]) -> list[Difference]:
    """Field-by-field differences between two normalized transcripts, in transcript order."""
    diffs: list[Difference] = []
    for i in range(max(len(ours), len(theirs))):
        a = ours[i] if i < len(ours) else None
        b = theirs[i] if i < len(theirs) else None
        if a is None or b is None or a[0] != b[0]:
            diffs.append((f"step {i + 1}", a[0] if a else "<missing>", b[0] if b else "<missing>"))
            continue
        _diff(a[0], a[1], b[1], diffs)
    return diffs


def _diff(path: str, a: Any, b: Any, out: list[Difference]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in dict.fromkeys([*a, *b]):
            _diff(f"{path}.{k}", a.get(k, "<absent>"), b.get(k, "<absent>"), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(f"{path}[{i}]", x, y, out)
    elif a != b:
        out.append((path, a, b))
