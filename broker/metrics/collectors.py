"""kaflet's own metrics (`kaflet_*`): a prometheus_client collector reading broker state when scraped.

Names follow Prometheus conventions; where Kafka has an equivalent it is named alongside:
- kaflet_requests_total{api,version}, kaflet_request_errors_total{api,version,error}:
  kafka.network RequestMetrics RequestsPerSec / ErrorsPerSec (every error code in a response
  counts once, NONE excluded); kaflet_request_duration_seconds{api}: TotalTimeMs, from taking
  up the frame to writing the answer, parked time included;
- kaflet_open_connections: kafka.server socket-server connection-count;
  kaflet_connections_refused_total{reason}: connections refused by max.connections or
  max.connections.per.ip; kaflet_queued_request_bytes: the queued.max.request.bytes pool in use
  (counted only while that limit is set), Kafka's MemoryPoolAvailable seen from the other side;
- kaflet_chaos_operations_total{op}, kaflet_chaos_injected_total{kind}: chaos operations done
  and requests answered by an injected fault (no Kafka equivalent);
- kaflet_groups{protocol}, kaflet_classic_groups{state}, kaflet_consumer_groups{state}:
  group-coordinator-metrics group-count, classic-group-count and consumer-group-count;
- kaflet_consumer_group_heartbeats_total, kaflet_consumer_group_rebalances_total (group epoch
  bumps: Kafka's consumer-group-rebalance-count), kaflet_consumer_group_members_fenced_total
  (session and rebalance timeouts), kaflet_consumer_group_reconciliations_total (groups reaching
  Stable);
- kaflet_streams_groups{state}: streams-group-count; kaflet_streams_group_heartbeats_total,
  kaflet_streams_group_rebalances_total (group epoch bumps: Kafka's streams-group-rebalance-count),
  kaflet_streams_group_members_fenced_total, kaflet_streams_group_reconciliations_total (KIP-1071);
- kaflet_group_rebalances_total, kaflet_group_rebalance_duration_seconds:
  group-completed-rebalance-count, and how long each took (PreparingRebalance to Stable);
- kaflet_offset_commits_total, _expirations_total, _deletions_total, kaflet_committed_offsets:
  offset-commit-count, offset-expiration-count, offset-deletion-count, offset-count;
- kaflet_consumergroup_member_assigned_lag{group,member}: the lag of each consumer-protocol member's
  assigned partitions (issue 13; no Kafka equivalent);
- kaflet_log_size_bytes / kaflet_log_segments{topic,partition}: kafka.log Log Size / NumLogSegments;
- kaflet_log_append_duration_seconds, kaflet_log_fsync_duration_seconds: LogFlushStats and the
  append part of the produce path;
- kaflet_coordinator_partition_load_seconds{partition}, kaflet_coordinator_load_seconds,
  kaflet_coordinator_partitions{state}: partition-load-time and num-partitions{state};
- kaflet_share_groups{state}, kaflet_share_group_heartbeats_total, _rebalances_total,
  _members_fenced_total: share groups (KIP-932), Kafka's share-group-count and
  share-group-rebalance-count; kaflet_share_sessions, kaflet_share_fetches_total,
  kaflet_share_acknowledgements_total: ShareSessionCache's share-sessions-count and the
  share-fetch/acknowledgement request counts; per share partition {group,topic,partition}:
  kaflet_share_partition_in_flight_records and _acquired_records (now: Kafka's
  in-flight-message-count), and kaflet_share_partition_records_acquired_total, _acknowledged_total,
  _released_total, _rejected_total, _archived_total, _lock_timeouts_total, _redeliveries_total
  (since the share partition was loaded on this broker; Kafka's in-flight-batch and
  acquisition-lock-timeout counts are per broker);
- kaflet_transactions_open (Ongoing now), kaflet_transactions_committed_total,
  kaflet_transactions_aborted_total (timed-out and fenced ones included),
  kaflet_transactions_timed_out_total, kaflet_transactional_ids_expired_total,
  kaflet_transactional_ids: the transaction coordinator (Kafka's TransactionMetrics has only
  partition-load times; these follow Redpanda's tx counters).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from broker.coordinator.classic import GroupState
from broker.metrics.requests import error_name
from broker.metrics.stats import REQUEST_BUCKETS, Histogram
from broker.network.registry import REGISTRY
from protocol.apis import message_name

if TYPE_CHECKING:
    from broker.metrics.service import MetricsService

SHARD_STATES = ("loading", "active", "failed", "unloaded")


def api_name(api_key: int) -> str:
    """Kafka's name for the API ("OffsetCommit"), as its request metrics label it."""
    if api_key not in REGISTRY:
        return str(api_key)
    return message_name(api_key)  # the name of its kafka-python classes, without building them


def _histogram(family: HistogramMetricFamily, labels: list[str], h: Histogram) -> None:
    family.add_metric(labels, h.cumulative(), h.sum)


class KafletCollector(Collector):
    def __init__(self, service: MetricsService) -> None:
        self.service = service

    def collect(self) -> Iterator[Any]:
        service = self.service
        broker = service.broker
        yield from self._info()
        yield from self._requests()
        connections = GaugeMetricFamily("kaflet_open_connections", "Client connections open now.")
        connections.add_metric([], len(broker.connections))
        yield connections
        refused = CounterMetricFamily(
            "kaflet_connections_refused",
            "Connections closed at once because max.connections or max.connections.per.ip was reached.",
            labels=["reason"],
        )
        for reason, n in sorted(broker.limits.refused.items()):
            refused.add_metric([reason], n)
        yield refused
        pool = GaugeMetricFamily(
            "kaflet_queued_request_bytes", "Bytes of complete requests waiting for or being handled (queued.max.request.bytes counts them)."
        )
        pool.add_metric([], broker.limits.pool_used)
        yield pool
        yield from self._chaos()
        yield from self._security()
        yield from self._groups()
        yield from self._member_lag()
        yield from self._share()
        yield from self._logs()
        yield from self._coordinator_load()
        yield from self._transactions()

    def _security(self) -> Iterator[Any]:
        """Authentication outcomes and the ACL count (broker/security/): labels are outcomes only,
        never a user, a mechanism's token or anything secret."""
        security = self.service.broker.security
        outcomes = CounterMetricFamily(
            "kaflet_authentications",
            "SASL authentications by outcome (authenticated, reauthenticated, failed, expired, timed_out, unsupported_mechanism, unexpected_request).",
            labels=["outcome"],
        )
        for outcome, n in sorted(security.counters.items()):
            outcomes.add_metric([outcome], n)
        yield outcomes
        if security.authorizer is not None:
            acls = GaugeMetricFamily("kaflet_acls", "ACLs the authorizer holds (Kafka's acls-total-count).")
            acls.add_metric([], security.authorizer.count)
            yield acls

    def _chaos(self) -> Iterator[Any]:
        faults = self.service.broker.faults
        ops = CounterMetricFamily(
            "kaflet_chaos_operations", "Chaos operations done on this broker (broker/cluster/chaos.py).", labels=["op"]
        )
        for op, n in sorted(faults.operations.items()):
            ops.add_metric([op], n)
        yield ops
        injected = CounterMetricFamily(
            "kaflet_chaos_injected", "Requests answered by an injected fault, by kind (error, delay, close, error_stack).", labels=["kind"]
        )
        for kind, n in sorted(faults.injected.items()):
            injected.add_metric([kind], n)
        yield injected

    def _info(self) -> Iterator[Any]:
        from broker.metrics.service import version

        broker = self.service.broker
        info = InfoMetricFamily("kaflet_broker", "This broker: version, node id, cluster id.")
        info.add_metric([], {"version": version(), "node_id": str(broker.config.node_id), "cluster_id": broker.cluster_id})
        yield info

    def _requests(self) -> Iterator[Any]:
        stats = self.service.requests
        requests = CounterMetricFamily("kaflet_requests", "Requests answered, by API and version.", labels=["api", "version"])
        by_api: dict[int, list[Histogram]] = {}
        for (api, version), h in sorted(stats.latency.items()):
            requests.add_metric([api_name(api), str(version)], h.count)
            by_api.setdefault(api, []).append(h)
        yield requests
        errors = CounterMetricFamily(
            "kaflet_request_errors",
            "Error codes in responses (each occurrence, NONE excluded), by API, version and error.",
            labels=["api", "version", "error"],
        )
        for (api, version, code), n in sorted(stats.errors.items()):
            errors.add_metric([api_name(api), str(version), error_name(code)], n)
        yield errors
        latency = HistogramMetricFamily(
            "kaflet_request_duration_seconds",
            "Time from taking up a request to writing its response (parked time included), by API.",
            labels=["api"],
        )
        for api, parts in by_api.items():
            _histogram(latency, [api_name(api)], Histogram.merged(REQUEST_BUCKETS, parts))
        yield latency

    def _groups(self) -> Iterator[Any]:
        service = self.service
        coordinator = service.broker.coordinator
        states = dict.fromkeys(GroupState, 0)
        consumer_states = dict.fromkeys(("Empty", "Assigning", "Reconciling", "Stable"), 0)
        streams_states = dict.fromkeys(("Empty", "NotReady", "Assigning", "Reconciling", "Stable"), 0)
        committed = 0
        if coordinator is not None:
            for shard in coordinator.active_shards():
                committed += shard.offsets.count
                for group in shard.groups.values():
                    states[group.state] += 1
                for cgroup in shard.consumer_groups.values():
                    consumer_states[cgroup.state] += 1
                for sgroup in shard.streams_groups.values():
                    streams_states[sgroup.state] += 1
        groups = GaugeMetricFamily("kaflet_groups", "Groups held, by protocol (Kafka's group-count).", labels=["protocol"])
        groups.add_metric(["classic"], sum(states.values()))
        groups.add_metric(["consumer"], sum(consumer_states.values()))
        groups.add_metric(["streams"], sum(streams_states.values()))
        if coordinator is not None:
            groups.add_metric(["share"], sum(len(shard.share_groups) for shard in coordinator.active_shards()))
        yield groups
        streams = GaugeMetricFamily(
            "kaflet_streams_groups", "KIP-1071 streams groups by state (Kafka's streams-group-count).", labels=["state"]
        )
        for sstate, n in streams_states.items():
            streams.add_metric([sstate], n)
        yield streams
        consumer = GaugeMetricFamily(
            "kaflet_consumer_groups", "KIP-848 consumer groups by state (Kafka's consumer-group-count).", labels=["state"]
        )
        for cstate, n in consumer_states.items():
            consumer.add_metric([cstate], n)
        yield consumer
        classic = GaugeMetricFamily("kaflet_classic_groups", "Classic groups by state (Kafka's classic-group-count).", labels=["state"])
        for state, n in states.items():
            classic.add_metric([state.value], n)
        yield classic
        stats = coordinator.stats if coordinator is not None else None
        for name, attr, text in (
            ("kaflet_group_rebalances", "rebalances_completed", "Rebalances completed (groups reaching Stable)."),
            ("kaflet_offset_commits", "offset_commits", "Offsets committed (one per partition)."),
            ("kaflet_offset_expirations", "offset_expirations", "Committed offsets removed by retention."),
            ("kaflet_offset_deletions", "offset_deletions", "Committed offsets deleted (OffsetDelete, deleted topics)."),
            ("kaflet_consumer_group_heartbeats", "consumer_heartbeats", "ConsumerGroupHeartbeat requests served."),
            (
                "kaflet_consumer_group_rebalances",
                "consumer_epoch_bumps",
                "Consumer-group epoch bumps (Kafka's consumer-group-rebalance-count).",
            ),
            (
                "kaflet_consumer_group_members_fenced",
                "consumer_members_fenced",
                "Consumer-group members fenced by a session or rebalance timeout.",
            ),
            (
                "kaflet_consumer_group_reconciliations",
                "consumer_reconciliations",
                "Consumer groups reaching Stable after a reconciliation.",
            ),
            ("kaflet_streams_group_heartbeats", "streams_heartbeats", "StreamsGroupHeartbeat requests served."),
            (
                "kaflet_streams_group_rebalances",
                "streams_epoch_bumps",
                "Streams-group epoch bumps (Kafka's streams-group-rebalance-count).",
            ),
            (
                "kaflet_streams_group_members_fenced",
                "streams_members_fenced",
                "Streams-group members fenced by a session or rebalance timeout.",
            ),
            ("kaflet_streams_group_reconciliations", "streams_reconciliations", "Streams groups reaching Stable after a reconciliation."),
        ):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], getattr(stats, attr) if stats is not None else 0)
            yield counter
        duration = HistogramMetricFamily(
            "kaflet_group_rebalance_duration_seconds", "How long completed rebalances took, from PreparingRebalance to Stable."
        )
        _histogram(duration, [], service.rebalance_duration)
        yield duration
        offsets = GaugeMetricFamily("kaflet_committed_offsets", "Committed offsets held by the coordinator (Kafka's offset-count).")
        offsets.add_metric([], committed)
        yield offsets

    def _member_lag(self) -> Iterator[Any]:
        """Issue 13: each consumer-group member's assigned lag, as the lag-aware assignor counts it."""
        broker = self.service.broker
        family = GaugeMetricFamily(
            "kaflet_consumergroup_member_assigned_lag",
            "Lag of the partitions a consumer-protocol group member is assigned (log end minus committed offset; "
            "never-committed partitions per lag.aware.uncommitted).",
            labels=["group", "member"],
        )
        coordinator = broker.coordinator
        if coordinator is not None and broker.config.group_metrics:
            for shard in coordinator.active_shards():
                for group_id, group in sorted(shard.consumer_groups.items()):
                    for member_id, lag in sorted(shard.consumer.assigned_lags(group).items()):
                        family.add_metric([group_id, member_id], lag)
        yield family

    def _share(self) -> Iterator[Any]:
        """Share groups (KIP-932): groups by state, the membership counters, sessions, and each
        share partition's records."""
        broker = self.service.broker
        coordinator = broker.coordinator
        states = dict.fromkeys(("Empty", "Stable"), 0)
        heartbeats = rebalances = fenced = 0
        if coordinator is not None:
            for shard in coordinator.active_shards():
                for group in shard.share_groups.values():
                    states[group.state] = states.get(group.state, 0) + 1
                heartbeats += shard.share.heartbeats
                rebalances += shard.share.epoch_bumps
                fenced += shard.share.members_fenced
        family = GaugeMetricFamily("kaflet_share_groups", "Share groups by state (Kafka's share-group-count).", labels=["state"])
        for state, n in states.items():
            family.add_metric([state], n)
        yield family
        for name, value, text in (
            ("kaflet_share_group_heartbeats", heartbeats, "ShareGroupHeartbeat requests served."),
            ("kaflet_share_group_rebalances", rebalances, "Share-group epoch bumps (Kafka's share-group-rebalance-count)."),
            ("kaflet_share_group_members_fenced", fenced, "Share-group members removed by a session timeout."),
        ):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], value)
            yield counter
        manager = getattr(broker, "share_partitions", None)
        sessions = GaugeMetricFamily("kaflet_share_sessions", "Share sessions open (Kafka's share-sessions-count).")
        sessions.add_metric([], len(manager.sessions) if manager is not None else 0)
        yield sessions
        for name, attr, text in (
            ("kaflet_share_fetches", "fetches", "ShareFetch requests that reached share partitions."),
            (
                "kaflet_share_acknowledgements",
                "acknowledgements",
                "Acknowledgements applied to share partitions (one per partition and request).",
            ),
        ):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], getattr(manager, attr) if manager is not None else 0)
            yield counter
        labels = ["group", "topic", "partition"]
        in_flight = GaugeMetricFamily(
            "kaflet_share_partition_in_flight_records", "Records between a share partition's start and end offsets.", labels=labels
        )
        acquired_now = GaugeMetricFamily("kaflet_share_partition_acquired_records", "Records acquired by a member now.", labels=labels)
        counters = {
            attr: CounterMetricFamily(f"kaflet_share_partition_{name}", text, labels=labels)
            for attr, name, text in (
                ("acquired", "records_acquired", "Records acquired by share fetches."),
                ("acknowledged", "records_acknowledged", "Records acknowledged with ACCEPT."),
                ("released", "records_released", "Records released (RELEASE, or their member left)."),
                ("rejected", "records_rejected", "Records acknowledged with REJECT."),
                ("archived", "records_archived", "Records archived at the delivery count limit."),
                ("lock_timeouts", "lock_timeouts", "Records whose acquisition lock ran out."),
                ("redeliveries", "redeliveries", "Records delivered again (delivery count above 1)."),
            )
        }
        if manager is not None and broker.config.group_metrics:
            for (group, _topic_id, partition), sp in sorted(manager.partitions.items(), key=lambda kv: (kv[0][0], kv[1].topic, kv[0][2])):
                values = [group, sp.topic, str(partition)]
                in_flight.add_metric(values, sp.in_flight_records())
                acquired_now.add_metric(values, sp.acquired_records())
                for attr, family in counters.items():
                    family.add_metric(values, getattr(sp.stats, attr))
        yield in_flight
        yield acquired_now
        yield from counters.values()

    def _logs(self) -> Iterator[Any]:
        service = self.service
        size = GaugeMetricFamily("kaflet_log_size_bytes", "Bytes of a partition's log segments.", labels=["topic", "partition"])
        segments = GaugeMetricFamily("kaflet_log_segments", "Segments of a partition's log.", labels=["topic", "partition"])
        for (topic, partition), plog in sorted(service.broker.logs.logs.items()):
            if plog.closed:
                continue
            labels = [topic, str(partition)]
            size.add_metric(labels, plog.size_bytes)
            segments.add_metric(labels, len(plog.segments))
        yield size
        yield segments
        append = HistogramMetricFamily("kaflet_log_append_duration_seconds", "Time to append one batch to a partition log (no fsync).")
        _histogram(append, [], service.append_duration)
        yield append
        fsync = HistogramMetricFamily(
            "kaflet_log_fsync_duration_seconds", "Time of one fsync pass (group commit, interval, rolled segment)."
        )
        _histogram(fsync, [], service.fsync_duration)
        yield fsync

    def _coordinator_load(self) -> Iterator[Any]:
        coordinator = self.service.broker.coordinator
        shards = coordinator.shards if coordinator is not None else []
        states = GaugeMetricFamily(
            "kaflet_coordinator_partitions", "Coordinator shards (__consumer_offsets partitions) by state.", labels=["state"]
        )
        counts = dict.fromkeys(SHARD_STATES, 0)
        for shard in shards:
            counts[shard.state.value] += 1
        for state, n in counts.items():
            states.add_metric([state], n)
        yield states
        per_shard = GaugeMetricFamily(
            "kaflet_coordinator_partition_load_seconds",
            "Time to load each coordinator shard from its __consumer_offsets partition at start-up.",
            labels=["partition"],
        )
        for shard in shards:
            if shard.state.value != "loading":
                per_shard.add_metric([str(shard.partition)], shard.context.load_ms / 1000)
        yield per_shard
        total = GaugeMetricFamily(
            "kaflet_coordinator_load_seconds", "Time to load every coordinator shard at start-up (0 until all are loaded)."
        )
        total.add_metric([], (coordinator.load_ms / 1000) if coordinator is not None else 0.0)
        yield total

    def _transactions(self) -> Iterator[Any]:
        txn = self.service.broker.txn
        shards = txn.active_shards() if txn is not None else []
        open_now = GaugeMetricFamily("kaflet_transactions_open", "Transactions in progress (transactional ids in state Ongoing).")
        open_now.add_metric([], txn.open_transactions() if txn is not None else 0)
        yield open_now
        ids = GaugeMetricFamily("kaflet_transactional_ids", "Transactional ids the transaction coordinator holds.")
        ids.add_metric([], sum(len(s.txns) for s in shards))
        yield ids
        stats = txn.stats if txn is not None else None
        for name, attr, text in (
            ("kaflet_transactions_committed", "committed", "Transactions committed (markers written, CompleteCommit)."),
            ("kaflet_transactions_aborted", "aborted", "Transactions aborted, by their producer, by fencing or on timeout."),
            ("kaflet_transactions_timed_out", "timed_out", "Transactions aborted because they outlived transaction.timeout.ms."),
            ("kaflet_transactional_ids_expired", "expired_ids", "Idle transactional ids removed (transactional.id.expiration.ms)."),
        ):
            counter = CounterMetricFamily(name, text)
            counter.add_metric([], getattr(stats, attr) if stats is not None else 0)
            yield counter
