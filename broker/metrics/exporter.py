"""kafka_exporter's metrics (danielqsj/kafka_exporter), computed from broker state when scraped.

Same names, labels and meaning as the exporter run with its defaults against this broker
(`--topic.filter .*`, `--group.filter .*`, `--offset.show-all true`), so its dashboards and
alerts work unchanged. What the exporter does, read from its kafka_exporter.go, and how it
maps here:

- Topics: every topic of a full Metadata answer. sarama keeps internal topics in its
  metadata and the default filters match them, so `__consumer_offsets` is exported too.
- `kafka_topic_partition_current_offset`: ListOffsets latest = the high watermark;
  `_oldest_offset`: ListOffsets earliest = the log start offset. A lone broker leads every
  partition: leader = node id, replicas = in-sync replicas = 1, leader is preferred (1), never
  under-replicated (0). In a cluster (`--brokers N`) `kafka_brokers` and `kafka_broker_info`
  count the live brokers (Metadata's), and each partition has its leader, its number of replicas
  and of in-sync replicas, whether its first replica leads and whether its ISR is short; a
  partition without a leader has no leader and no offset series (the exporter's Leader and
  GetOffset fail for it).
- Groups: those ListGroups returns, i.e. every group of every loaded coordinator shard, simple
  groups (offsets only) included. While any shard loads, ListGroups fails with
  COORDINATOR_LOAD_IN_PROGRESS and the exporter emits no group series for that scrape: neither
  does kaflet.
- `kafka_consumergroup_members`: len(DescribeGroups members) = the group's members (pending
  members, which have no member entry yet, are not counted).
- Offsets: the exporter asks OffsetFetch (v4: committed offsets, pending transactional ones
  excluded) for every partition of every topic, then keeps the topics where at least one
  partition has an offset other than -1. For those, every partition of the topic gets
  `_current_offset` (the committed offset, or -1) and `_lag` (high watermark - committed, or -1
  without a commit; negative if the commit is ahead of the log). `_lag_sum` adds the lags of
  the partitions with a commit; `_current_offset_sum` adds every partition's value, so each
  partition without a commit counts -1 (the exporter's arithmetic, kept as is).
  Offsets of topics that no longer exist are not exported.

Departures, none of which changes a value: values are written as integers (the Go client
writes floats, e.g. 1.234567e+06); the exporter's `--kafka.labels` constant labels and its
ZooKeeper lag family do not exist here; series come in a stable order. `_lag_sum` and
`_current_offset_sum` are declared `untyped` where the exporter declares them gauges: a gauge
whose name ends in `_sum` fails `promtool check metrics` (exit 3, "non-histogram and non-summary
metrics should not have "_sum" suffix"), the exporter's own exposition included, while promtool
lints no untyped name. Prometheus stores and queries both alike, so every dashboard and alert
reads the same series; only its metadata API says "unknown" instead of "gauge".

The text is written directly rather than through prometheus_client's families: with 1,000
groups x 10 partitions (23,000 samples) its generic encoder alone took ~350 ms, this ~20 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.offsets_records import committed_offset

if TYPE_CHECKING:
    from broker.metrics.source import MetricsSource

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def label_value(text: str) -> str:
    """A label value escaped for the text format (backslash, double quote, newline)."""
    if "\\" in text or '"' in text or "\n" in text:
        return text.translate(_ESCAPES)
    return text


def _header(out: list[str], name: str, help_text: str, kind: str = "gauge") -> None:
    out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")


def render(broker: MetricsSource, group_metrics: bool = True) -> str:
    """The kafka_* families in Prometheus text format 0.0.4."""
    out: list[str] = []
    node = str(broker.config.node_id)
    cluster = getattr(broker, "cluster", None)
    brokers = [(node, broker.bootstrap)] if cluster is None else [(str(n.config.node_id), n.bootstrap) for n in cluster.alive_nodes()]
    _header(out, "kafka_brokers", "Number of brokers in the Kafka cluster.")
    out.append(f"kafka_brokers {len(brokers)}\n")
    _header(out, "kafka_broker_info", "Information about the Kafka broker.")
    for node_id, address in brokers:
        out.append(f'kafka_broker_info{{address="{label_value(address)}",id="{node_id}"}} 1\n')

    topic_lines: list[str] = []
    per_partition: dict[str, list[str]] = {
        "current_offset": [],
        "oldest_offset": [],
        "leader": [],
        "replicas": [],
        "in_sync_replica": [],
        "leader_is_preferred": [],
        "under_replicated_partition": [],
    }
    # topic -> high watermark per partition (None where the log is missing): the lag's base.
    watermarks: dict[str, list[int | None]] = {}
    logs = broker.logs
    for topic in sorted(broker.topics.topics.values(), key=lambda t: t.name):
        name = topic.name
        label = label_value(name)
        topic_lines.append(f'kafka_topic_partitions{{topic="{label}"}} {topic.partitions}\n')
        marks: list[int | None] = []
        for p in range(topic.partitions):
            labels = f'{{partition="{p}",topic="{label}"}}'
            plog = logs.get(name, p)
            if cluster is None:
                leader, replicas, in_sync, preferred = node, 1, 1, 1
            else:
                state = cluster.partition(name, p)
                leader = str(state.leader) if state is not None and state.leader >= 0 else ""
                replicas = len(state.replicas) if state is not None else 0
                in_sync = len(state.isr) if state is not None else 0
                preferred = 1 if leader and state is not None and state.replicas[0] == state.leader else 0
            if leader:
                per_partition["leader"].append(f"kafka_topic_partition_leader{labels} {leader}\n")
            if plog is not None and not plog.closed and leader:
                hw = plog.high_watermark
                per_partition["current_offset"].append(f"kafka_topic_partition_current_offset{labels} {hw}\n")
                per_partition["oldest_offset"].append(f"kafka_topic_partition_oldest_offset{labels} {plog.log_start_offset}\n")
                marks.append(hw)
            else:
                marks.append(None)
            per_partition["replicas"].append(f"kafka_topic_partition_replicas{labels} {replicas}\n")
            per_partition["in_sync_replica"].append(f"kafka_topic_partition_in_sync_replica{labels} {in_sync}\n")
            per_partition["leader_is_preferred"].append(f"kafka_topic_partition_leader_is_preferred{labels} {preferred}\n")
            under = 1 if in_sync < replicas else 0
            per_partition["under_replicated_partition"].append(f"kafka_topic_partition_under_replicated_partition{labels} {under}\n")
        watermarks[name] = marks
    _header(out, "kafka_topic_partitions", "Number of partitions for this topic.")
    out += topic_lines
    helps = {
        "current_offset": "Current (newest) offset of the topic partition: its high watermark.",
        "oldest_offset": "Oldest offset of the topic partition: its log start offset.",
        "leader": "Leader broker id of the topic partition.",
        "replicas": "Number of replicas of the topic partition.",
        "in_sync_replica": "Number of in-sync replicas of the topic partition.",
        "leader_is_preferred": "1 if the topic partition is led by its preferred broker.",
        "under_replicated_partition": "1 if the topic partition is under-replicated.",
    }
    for key, lines in per_partition.items():
        _header(out, f"kafka_topic_partition_{key}", helps[key])
        out += lines
    if group_metrics:
        _render_groups(broker, watermarks, out)
    return "".join(out)


def _render_groups(broker: MetricsSource, watermarks: dict[str, list[int | None]], out: list[str]) -> None:
    coordinator = broker.coordinator
    members: list[str] = []
    current: list[str] = []
    current_sum: list[str] = []
    lags: list[str] = []
    lag_sum: list[str] = []
    if coordinator is not None and coordinator.active and not coordinator.any_loading():
        for shard in coordinator.active_shards():
            by_group = shard.offsets.by_group
            # KIP-848 consumer groups count their members too (kafka-exporter's DescribeGroups would see them Dead).
            all_groups: dict[str, Any] = {**shard.groups, **shard.consumer_groups}
            for group_id, group in all_groups.items():
                g = label_value(group_id)
                members.append(f'kafka_consumergroup_members{{consumergroup="{g}"}} {len(group.members)}\n')
                offsets = by_group.get(group_id)
                if not offsets:
                    continue
                for topic, committed in offsets.items():
                    marks = watermarks.get(topic)
                    if marks is None:
                        continue  # not in the cluster's metadata any more
                    values = [committed_offset(raw) if raw is not None else -1 for raw in map(committed.get, range(len(marks)))]
                    if all(v == -1 for v in values):
                        continue  # the exporter skips topics the group has not consumed
                    t = label_value(topic)
                    total = 0
                    lag_total = 0
                    for p, value in enumerate(values):
                        labels = f'{{consumergroup="{g}",partition="{p}",topic="{t}"}}'
                        total += value
                        current.append(f"kafka_consumergroup_current_offset{labels} {value}\n")
                        hw = marks[p]
                        if hw is None:
                            continue  # the exporter skips a lag it cannot read
                        if value == -1:
                            lags.append(f"kafka_consumergroup_lag{labels} -1\n")
                        else:
                            lag = hw - value
                            lag_total += lag
                            lags.append(f"kafka_consumergroup_lag{labels} {lag}\n")
                    topic_labels = f'{{consumergroup="{g}",topic="{t}"}}'
                    current_sum.append(f"kafka_consumergroup_current_offset_sum{topic_labels} {total}\n")
                    lag_sum.append(f"kafka_consumergroup_lag_sum{topic_labels} {lag_total}\n")
    _header(out, "kafka_consumergroup_current_offset", "Current (committed) offset of a consumer group at a topic partition.")
    out += current
    # Untyped, not gauges: promtool refuses a gauge named *_sum (see the module docstring).
    _header(
        out, "kafka_consumergroup_current_offset_sum", "Sum of a consumer group's current offsets over a topic's partitions.", "untyped"
    )
    out += current_sum
    _header(out, "kafka_consumergroup_lag", "Current approximate lag of a consumer group at a topic partition.")
    out += lags
    _header(out, "kafka_consumergroup_lag_sum", "Current approximate lag of a consumer group at a topic, over all partitions.", "untyped")
    out += lag_sum
    _header(out, "kafka_consumergroup_members", "Number of members of a consumer group.")
    out += members
