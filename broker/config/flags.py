"""Broker configuration: one table of options, each a CLI flag with a KAFLET_* environment twin.

Flags and variables go through one conversion (`Config.from_namespace`), so the same mistake
gets the same message whichever way it was made: it names the flag and its variable, and the
command exits 2 with its usage.

`KAFKA_DEFAULTS` lists every field whose default differs from Kafka's (field name -> Kafka's
value); `--kafka-defaults` applies each entry the user did not set explicitly (flag or env).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

MIB = 1024 * 1024

# Kafka's own value of every field whose kaflet default differs, for development's sake
# (field name -> Kafka's value). `--kafka-defaults` restores each entry not set explicitly.
# Add yours where you change a default; docs/decisions.md says why each differs.
KAFKA_DEFAULTS: dict[str, Any] = {
    # Kafka waits 3 s for more members before the first generation of a new group; kaflet
    # answers at once, so a lone test consumer is assigned in milliseconds.
    "group_initial_rebalance_delay_ms": 3000,
    # Kafka's members heartbeat every 5 s, so each reconciliation step (a revocation, then the
    # grant to the next member) can wait up to 5 s; kaflet's 250 ms makes a group stable in well
    # under a second (issue 12).
    "group_consumer_heartbeat_interval_ms": 5000,
    # The lower bound of a group's own heartbeat interval follows kaflet's 250 ms default (issue 11).
    "group_consumer_min_heartbeat_interval_ms": 5000,
    # Streams groups, likewise: members heartbeat every 250 ms (and so see their tasks, and the internal
    # topics the broker created, within a quarter second), the first assignment is made at once, and a
    # new target assignment is computed as soon as membership changes (docs/decisions.md).
    "group_streams_heartbeat_interval_ms": 5000,
    "group_streams_min_heartbeat_interval_ms": 5000,
    "group_streams_initial_rebalance_delay_ms": 3000,
    "group_streams_assignment_interval_ms": 1000,
    # Share groups likewise (KIP-932): a new member's partitions come with its second heartbeat
    # (after the share coordinator has initialized their state), 5 s after the first at Kafka's default.
    "group_share_heartbeat_interval_ms": 5000,
    "group_share_min_heartbeat_interval_ms": 5000,
    # Kafka recomputes a share group's target assignment at most once a second; kaflet at every
    # change, so a second consumer gets its partitions at its next heartbeat.
    "group_share_assignment_interval_ms": 1000,
    # Kafka 4.4 computes a group's target assignment at most once a second; kaflet at every change,
    # bounded by the computation's own cost (broker/coordinator/consumer/manager.py), so a small
    # group's members get their partitions in one heartbeat round.
    "group_consumer_assignment_interval_ms": 1000,
    # Kafka leaves every page it writes in the page cache until the OS needs the memory; kaflet
    # hands back what lies more than 64 MiB behind each partition's head once it is written
    # (a development broker need not hold GBs of produce in memory, and on VMs that return free
    # memory to their host, writing into never-used pages costs 4-7x the CPU of reusing them).
    "log_page_cache_bytes": 0,
}

# The port of the metrics endpoint when none is given: `kaflet serve` binds this one, an
# embedded Broker (no CLI) a free one, so that embedding never collides with a running broker.
SERVE_METRICS_PORT = 9644
# The longest rack name --broker-rack takes (Kafka sets no bound; every Metadata answer carries it).
MAX_RACK_LENGTH = 255


class ConfigError(ValueError):
    """A setting has a bad value; the message names the flag and its KAFLET_* variable."""


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_name(name: str) -> str:
    return "KAFLET_" + name.upper()


def names(name: str) -> str:
    """How messages name a setting: '--port (KAFLET_PORT)'."""
    return f"{flag_name(name)} ({env_name(name)})"


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false (also 1/0, yes/no, on/off)")


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def _fsync(text: str) -> str:
    value = text.strip().lower()
    if value in ("never", "always") or (value.isdigit() and int(value) > 0):
        return value
    raise ValueError("expected never, always or an interval in milliseconds")


def _opt(default: Any, help: str, type: Any = None, choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "type": type, "choices": choices})


@dataclass
class Config:
    """Every setting of a broker. Field names map to `--field-name` and `KAFLET_FIELD_NAME`."""

    host: str = _opt("127.0.0.1", "listen address; 'localhost' listens on 127.0.0.1 and ::1")
    port: int = _opt(9092, "listen port (0 picks a free one)")
    advertised_host: str | None = _opt(None, "host clients are told to connect to (default: --host)")
    advertised_port: int | None = _opt(None, "port clients are told to connect to (default: the bound port)")
    node_id: int = _opt(1, "this broker's node id")
    data_dir: str = _opt("./data", "directory for topics, logs and metadata")
    offsets_partitions: int = _opt(50, "partitions of __consumer_offsets (fixed per data dir)")
    auto_create_topics: bool = _opt(True, "create unknown topics on Metadata/Produce")
    default_partitions: int = _opt(1, "partitions of auto-created topics")
    max_request_bytes: int = _opt(100 * MIB, "largest request frame accepted (socket.request.max.bytes)")
    connections_max_idle_ms: int = _opt(600_000, "close connections idle this long")
    log_format: str | None = _opt(None, "json or console (default: console on a terminal)", None, ("json", "console"))
    log_level: str = _opt("info", "debug, info, warning or error", None, ("debug", "info", "warning", "error"))
    fsync: str = _opt("never", "never, always, or an interval in ms between fsyncs", _fsync, ("never", "always", "MS"))
    # Log defaults (topic-level configs override them).
    log_segment_bytes: int = _opt(1024 * MIB, "default segment.bytes")
    log_segment_ms: int = _opt(7 * 24 * 3600 * 1000, "default segment.ms")
    log_retention_ms: int = _opt(7 * 24 * 3600 * 1000, "default retention.ms (-1: forever)")
    log_retention_bytes: int = _opt(-1, "default retention.bytes (-1: unlimited)")
    log_retention_check_interval_ms: int = _opt(300_000, "how often retention runs")
    message_max_bytes: int = _opt(1_048_588, "default max.message.bytes")
    # Group coordinator (names follow Kafka's broker configs).
    group_initial_rebalance_delay_ms: int = _opt(0, "group.initial.rebalance.delay.ms (Kafka: 3000)")
    group_min_session_timeout_ms: int = _opt(6000, "group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _opt(1_800_000, "group.max.session.timeout.ms")
    group_max_size: int = _opt(2_147_483_647, "group.max.size")
    offsets_retention_minutes: int = _opt(10080, "offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _opt(600_000, "offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = _opt(4096, "offset.metadata.max.bytes")
    offsets_topic_segment_bytes: int = _opt(100 * MIB, "offsets.topic.segment.bytes")
    offsets_delete_retention_ms: int = _opt(86_400_000, "delete.retention.ms of __consumer_offsets")
    offsets_compaction_interval_ms: int = _opt(60_000, "how often __consumer_offsets is compacted")
    # Transaction coordinator (names follow Kafka's broker configs).
    transaction_state_partitions: int = _opt(
        50, "partitions of __transaction_state (transaction.state.log.num.partitions; fixed per data dir)"
    )
    transaction_max_timeout_ms: int = _opt(900_000, "transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for")
    transactional_id_expiration_ms: int = _opt(604_800_000, "transactional.id.expiration.ms: idle transactional ids are forgotten")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _opt(
        10_000, "transaction.abort.timed.out.transaction.cleanup.interval.ms: how often timed-out transactions are aborted"
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _opt(
        3_600_000, "transaction.remove.expired.transaction.cleanup.interval.ms: how often idle transactional ids are expired"
    )
    transaction_state_log_segment_bytes: int = _opt(100 * MIB, "transaction.state.log.segment.bytes")
    # KIP-848 consumer groups (issue 12; names follow Kafka's group.consumer.* broker configs).
    group_consumer_session_timeout_ms: int = _opt(45_000, "group.consumer.session.timeout.ms")
    group_consumer_heartbeat_interval_ms: int = _opt(250, "group.consumer.heartbeat.interval.ms (Kafka: 5000)")
    group_consumer_max_size: int = _opt(2_147_483_647, "group.consumer.max.size")
    group_consumer_assignors: str = _opt("uniform,range", "group.consumer.assignors: server-side assignors by name, the first the default")
    group_coordinator_rebalance_protocols: str = _opt(
        "classic,consumer,streams,share",
        "group.coordinator.rebalance.protocols: without `consumer` (`streams`, `share`), KIP-848's (KIP-1071's, KIP-932's) APIs are neither advertised nor served",
    )
    group_consumer_migration_policy: str = _opt(
        "bidirectional", "group.consumer.migration.policy", None, ("bidirectional", "upgrade", "downgrade", "disabled")
    )
    # KIP-1071 streams groups (Kafka's group.streams.* broker configs; docs/kafka-streams.md).
    group_streams_session_timeout_ms: int = _opt(45_000, "group.streams.session.timeout.ms")
    group_streams_min_session_timeout_ms: int = _opt(45_000, "group.streams.min.session.timeout.ms")
    group_streams_max_session_timeout_ms: int = _opt(60_000, "group.streams.max.session.timeout.ms")
    group_streams_heartbeat_interval_ms: int = _opt(250, "group.streams.heartbeat.interval.ms (Kafka: 5000)")
    group_streams_min_heartbeat_interval_ms: int = _opt(250, "group.streams.min.heartbeat.interval.ms (Kafka: 5000)")
    group_streams_max_heartbeat_interval_ms: int = _opt(15_000, "group.streams.max.heartbeat.interval.ms")
    group_streams_max_size: int = _opt(2_147_483_647, "group.streams.max.size")
    group_streams_num_standby_replicas: int = _opt(0, "group.streams.num.standby.replicas")
    group_streams_max_standby_replicas: int = _opt(2, "group.streams.max.standby.replicas")
    group_streams_initial_rebalance_delay_ms: int = _opt(0, "group.streams.initial.rebalance.delay.ms (Kafka: 3000)")
    group_streams_assignment_interval_ms: int = _opt(0, "group.streams.assignment.interval.ms (Kafka: 1000)")
    group_streams_min_assignment_interval_ms: int = _opt(0, "group.streams.min.assignment.interval.ms")
    group_streams_max_assignment_interval_ms: int = _opt(15_000, "group.streams.max.assignment.interval.ms")
    group_streams_assignors: str = _opt("sticky", "group.streams.assignors: server-side task assignors by name, the first the default")
    group_streams_task_offset_interval_ms: int = _opt(60_000, "group.streams.task.offset.interval.ms")
    group_streams_min_task_offset_interval_ms: int = _opt(15_000, "group.streams.min.task.offset.interval.ms")
    group_streams_num_warmup_replicas: int = _opt(2, "group.streams.num.warmup.replicas")
    group_streams_max_warmup_replicas: int = _opt(20, "group.streams.max.warmup.replicas")
    group_streams_acceptable_recovery_lag: int = _opt(10_000, "group.streams.acceptable.recovery.lag")
    group_streams_rack_aware_assignment_tags: str = _opt("", "group.streams.rack.aware.assignment.tags: client tag keys, comma-separated")
    group_consumer_assignment_interval_ms: int = _opt(
        0, "group.consumer.assignment.interval.ms: least time between two target assignments of a group (Kafka: 1000)"
    )
    # The lag-aware assignor (issue 13): the lag of a partition the group never committed, unless the
    # group's own `lag.aware.uncommitted` config says otherwise.
    lag_aware_uncommitted: str = _opt(
        "earliest", "lag.aware.uncommitted default: earliest (log end - log start) or latest (0)", None, ("earliest", "latest")
    )
    # KIP-932 share groups (names follow Kafka's group.share.* and share.coordinator.* broker configs).
    group_share_session_timeout_ms: int = _opt(45_000, "group.share.session.timeout.ms")
    group_share_min_session_timeout_ms: int = _opt(45_000, "group.share.min.session.timeout.ms")
    group_share_max_session_timeout_ms: int = _opt(60_000, "group.share.max.session.timeout.ms")
    group_share_heartbeat_interval_ms: int = _opt(250, "group.share.heartbeat.interval.ms (Kafka: 5000)")
    group_share_min_heartbeat_interval_ms: int = _opt(250, "group.share.min.heartbeat.interval.ms (Kafka: 5000)")
    group_share_max_heartbeat_interval_ms: int = _opt(15_000, "group.share.max.heartbeat.interval.ms")
    group_share_max_size: int = _opt(200, "group.share.max.size")
    group_share_assignment_interval_ms: int = _opt(
        0, "group.share.assignment.interval.ms: least time between two target assignments of a share group (Kafka: 1000)"
    )
    group_share_min_assignment_interval_ms: int = _opt(0, "group.share.min.assignment.interval.ms")
    group_share_max_assignment_interval_ms: int = _opt(15_000, "group.share.max.assignment.interval.ms")
    group_share_record_lock_duration_ms: int = _opt(30_000, "group.share.record.lock.duration.ms")
    group_share_min_record_lock_duration_ms: int = _opt(15_000, "group.share.min.record.lock.duration.ms")
    group_share_max_record_lock_duration_ms: int = _opt(60_000, "group.share.max.record.lock.duration.ms")
    group_share_delivery_count_limit: int = _opt(5, "group.share.delivery.count.limit")
    group_share_min_delivery_count_limit: int = _opt(2, "group.share.min.delivery.count.limit")
    group_share_max_delivery_count_limit: int = _opt(10, "group.share.max.delivery.count.limit")
    group_share_partition_max_record_locks: int = _opt(
        2000, "group.share.partition.max.record.locks: the in-flight record limit per share partition"
    )
    group_share_min_partition_max_record_locks: int = _opt(100, "group.share.min.partition.max.record.locks")
    group_share_max_partition_max_record_locks: int = _opt(4000, "group.share.max.partition.max.record.locks")
    group_share_max_share_sessions: int = _opt(2000, "group.share.max.share.sessions: share sessions per broker")
    group_share_initialize_retry_interval_ms: int = _opt(
        30_000, "group.share.initialize.retry.interval.ms: a share state initialization that has not finished is retried after this"
    )
    share_coordinator_state_topic_num_partitions: int = _opt(
        50, "partitions of __share_group_state (share.coordinator.state.topic.num.partitions; fixed per data dir)"
    )
    share_coordinator_state_topic_segment_bytes: int = _opt(100 * MIB, "share.coordinator.state.topic.segment.bytes")
    share_coordinator_snapshot_update_records_per_snapshot: int = _opt(500, "share.coordinator.snapshot.update.records.per.snapshot")
    share_coordinator_state_topic_prune_interval_ms: int = _opt(300_000, "share.coordinator.state.topic.prune.interval.ms")
    share_coordinator_cold_partition_snapshot_interval_ms: int = _opt(300_000, "share.coordinator.cold.partition.snapshot.interval.ms")
    # Observability.
    metrics_host: str = _opt("127.0.0.1", "Prometheus endpoint address")
    metrics_port: int | None = _opt(
        None, f"Prometheus endpoint port: {SERVE_METRICS_PORT} for `kaflet serve`, a free one for an embedded Broker; 0 picks a free one"
    )
    metrics: bool = _opt(True, "serve /metrics, /healthz and /readyz")
    group_metrics: bool = _opt(True, "export per-group series (off for very many groups)")
    # Resource limits (issue 11; Kafka's names, see broker/network/limits.py).
    max_connections: int = _opt(2_147_483_647, "max.connections: connections beyond it are refused")
    max_connections_per_ip: int = _opt(2_147_483_647, "max.connections.per.ip: connections from one address beyond it are refused")
    queued_max_request_bytes: int = _opt(-1, "queued.max.request.bytes: stop reading requests while more are in flight (-1: no limit)")
    request_read_timeout_ms: int = _opt(30_000, "close a connection whose started request frame has not arrived within this (0: never)")
    # Bounds of per-group configs (GROUP resources of IncrementalAlterConfigs; Kafka's names).
    group_consumer_min_session_timeout_ms: int = _opt(45_000, "group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms: int = _opt(60_000, "group.consumer.max.session.timeout.ms")
    group_consumer_min_heartbeat_interval_ms: int = _opt(250, "group.consumer.min.heartbeat.interval.ms (Kafka: 5000)")
    group_consumer_max_heartbeat_interval_ms: int = _opt(15_000, "group.consumer.max.heartbeat.interval.ms")
    group_consumer_min_assignment_interval_ms: int = _opt(0, "group.consumer.min.assignment.interval.ms")
    group_consumer_max_assignment_interval_ms: int = _opt(15_000, "group.consumer.max.assignment.interval.ms")
    # Corruption at rest (issue 11): not a Kafka setting; Kafka trusts data below its recovery point.
    verify_on_start: bool = _opt(
        False, "CRC-check every segment and index at start-up, cut out corrupt batches and rebuild indexes (kaflet check --repair)"
    )
    # Chaos (issue 15): the control API lets anyone who reaches the metrics listener break the broker.
    brokers: int = _opt(1, "brokers in this process, one event loop (node ids from --node-id, ports from --port up, 0: free ones)")
    # The cluster (docs/cluster.md; Kafka's names).
    broker_rack: str | None = _opt(
        None, "broker.rack: this broker's rack; with --brokers N one per node, comma-separated (r1,r2,r3), or one for all"
    )
    default_replication_factor: int = _opt(1, "default.replication.factor: replicas of auto-created topics and of replication factor -1")
    auto_leader_rebalance_enable: bool = _opt(
        True, "auto.leader.rebalance.enable: with --brokers N, preferred replicas lead again once back in sync"
    )
    leader_imbalance_check_interval_seconds: int = _opt(300, "leader.imbalance.check.interval.seconds: how often leaders are balanced")
    replica_selector: str = _opt(
        "none",
        "replica.selector.class: none (consumers fetch from leaders), or rack (Kafka's RackAwareReplicaSelector:"
        " a consumer whose client.rack holds a follower is sent to it)",
        None,
        ("none", "rack"),
    )
    control: bool = _opt(False, "serve the chaos control API (/control/...) on the metrics listener; off by default")
    # Page cache of the logs (issue 17): not a Kafka setting; Kafka leaves every written page to the OS.
    log_page_cache_bytes: int = _opt(
        64 * MIB,
        "newest bytes of each partition's active segment kept in the OS page cache; older pages are handed back"
        " to the OS once written (never before: nothing is dropped unwritten). 0: the OS decides, as in Kafka",
    )
    # The fetch path (issue 17): record sets sent from the segment files, as Kafka's zero-copy transfer.
    fetch_sendfile: bool = _opt(True, "send fetched record sets from the segment files with sendfile (off: read them into memory first)")
    # Security (docs/security.md; Kafka's names): listeners and their protocols, TLS, SASL, ACLs.
    listeners: str | None = _opt(
        None,
        "listeners, NAME://host:port,... (e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093); default: PLAINTEXT on --host/--port",
    )
    advertised_listeners: str | None = _opt(
        None, "what Metadata tells clients per listener, NAME://host:port,... (default: each listener's address)"
    )
    listener_security_protocol_map: str | None = _opt(
        None, "NAME:PROTOCOL,... for custom listener names (default: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL map to themselves)"
    )
    sasl_enabled_mechanisms: str = _opt(
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER", "SASL mechanisms of SASL listeners (Kafka: GSSAPI, which kaflet lacks)"
    )
    listener_sasl_enabled_mechanisms: str | None = _opt(
        None, "per listener: NAME=MECH,MECH;NAME2=MECH (listener.name.NAME.sasl.enabled.mechanisms)"
    )
    ssl_cert: str | None = _opt(None, "PEM certificate chain of SSL/SASL_SSL listeners (kaflet certs makes one)")
    ssl_key: str | None = _opt(None, "PEM private key of --ssl-cert")
    ssl_key_password: str | None = _opt(None, "password of an encrypted --ssl-key (ssl.key.password)")
    ssl_ca: str | None = _opt(None, "PEM CA certificates client certificates are checked against (ssl.truststore)")
    ssl_client_auth: str = _opt("none", "ssl.client.auth: none, requested or required", None, ("none", "requested", "required"))
    ssl_enabled_protocols: str = _opt("TLSv1.2,TLSv1.3", "ssl.enabled.protocols: TLSv1.2 and/or TLSv1.3")
    ssl_principal_mapping_rules: str = _opt("DEFAULT", "ssl.principal.mapping.rules: RULE:pattern/replacement/[LU],...,DEFAULT")
    sasl_plain_users: str | None = _opt(None, "SASL/PLAIN users, user:password,... (Kafka: JAAS user_NAME entries)")
    sasl_plain_users_file: str | None = _opt(None, "SASL/PLAIN users from a file: JSON {user: password} or user=password lines")
    scram_users: str | None = _opt(None, "SCRAM users salted and stored at start-up (both SHA-256 and SHA-512), user:password,...")
    sasl_oauthbearer_jwks_file: str | None = _opt(
        None, "validate OAUTHBEARER tokens as signed JWTs against this JWKS file (default: Kafka's unsecured validator)"
    )
    sasl_oauthbearer_expected_audience: str | None = _opt(None, "sasl.oauthbearer.expected.audience (signed JWTs)")
    sasl_oauthbearer_expected_issuer: str | None = _opt(None, "sasl.oauthbearer.expected.issuer (signed JWTs)")
    sasl_oauthbearer_sub_claim_name: str = _opt("sub", "sasl.oauthbearer.sub.claim.name: the claim naming the principal")
    sasl_oauthbearer_scope_claim_name: str = _opt("scope", "sasl.oauthbearer.scope.claim.name")
    sasl_oauthbearer_required_scope: str | None = _opt(None, "unsecured validator: scopes every token must have, space-separated")
    sasl_oauthbearer_clock_skew_seconds: int = _opt(30, "sasl.oauthbearer.clock.skew.seconds (signed JWTs)")
    connections_max_reauth_ms: int = _opt(
        0, "connections.max.reauth.ms: SASL sessions last at most this long (KIP-368); 0: until the token expires"
    )
    authorizer: str = _opt("none", "none, or standard (Kafka's StandardAuthorizer: ACLs)", None, ("none", "standard"))
    super_users: str | None = _opt(None, "super.users: principals allowed everything, User:admin;User:ops")
    allow_everyone_if_no_acl_found: bool = _opt(False, "allow.everyone.if.no.acl.found: a resource with no ACL is open to all")
    inter_broker_listener_name: str | None = _opt(
        None, "inter.broker.listener.name: a listener exempt from the broker-wide max.connections (the operator's way in)"
    )
    flags_override_dynamic: bool = _opt(
        False,
        "flags and KAFLET_* variables given explicitly win over dynamic broker configs stored in the data dir (kaflet configs lists them)",
    )
    control_token: str | None = _opt(
        None, "bearer token the control API requires (Authorization: Bearer ...); needed when --metrics-host is not loopback"
    )
    metrics_max_connections: int = _opt(64, "connections the metrics/control listener holds at once; more are closed at once")
    # Kafka's defaults (issue 10): KAFKA_DEFAULTS above lists what this restores.
    kafka_defaults: bool = _opt(False, "use Kafka's value for every default kaflet changes (KAFKA_DEFAULTS) unless set explicitly")
    # Not a flag: the fields a user set explicitly (flag or variable), which --kafka-defaults
    # leaves alone. from_namespace fills it; an embedder may name fields here too.
    explicit: frozenset[str] = field(default=frozenset(), repr=False, metadata={"internal": True})

    def __post_init__(self) -> None:
        if self.kafka_defaults:
            for name, value in self.kafka_defaults_applied().items():
                setattr(self, name, value)

    def kafka_defaults_applied(self) -> dict[str, Any]:
        """The KAFKA_DEFAULTS entries --kafka-defaults sets here: those not set explicitly (for an
        embedded Config: still at kaflet's default, or already at Kafka's)."""
        if not self.kafka_defaults:
            return {}
        defaults = _defaults()
        return {
            name: value
            for name, value in KAFKA_DEFAULTS.items()
            if name not in self.explicit and getattr(self, name) in (defaults[name], value)
        }

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in _option_fields()]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One flag per field (booleans also get --no-NAME). Values stay text here: from_namespace
        converts flags and KAFLET_* variables alike, so both fail with the same message."""
        for f in _option_fields():
            flag = flag_name(f.name)
            kind = _converter(f)
            choices = f.metadata.get("choices")
            default = SERVE_METRICS_PORT if f.name == "metrics_port" else _render(f.default)
            help_text = f"{f.metadata['help']} [env {env_name(f.name)}; default {default}]"
            if kind is _bool:
                parser.add_argument(flag, dest=f.name, nargs="?", const="true", metavar="BOOL", help=help_text)
                parser.add_argument(
                    "--no-" + f.name.replace("_", "-"), dest=f.name, action="store_const", const="false", help=f"same as {flag} false"
                )
            else:
                metavar = "{" + ",".join(choices) + "}" if choices else ("N" if kind is _int else None)
                parser.add_argument(flag, dest=f.name, metavar=metavar, help=help_text)
        parser.set_defaults(**{f.name: None for f in _option_fields()})

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Config:
        """Flags win over KAFLET_* variables, which win over defaults. Raises ConfigError."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in _option_fields():
            raw = getattr(ns, f.name, None)
            source = flag_name(f.name)
            if raw is None:
                raw = environ.get(env_name(f.name)) or None
                source = env_name(f.name)
            if raw is not None:
                values[f.name] = convert(f.name, raw, source)
        values["explicit"] = frozenset(values)
        values.setdefault("metrics_port", SERVE_METRICS_PORT)
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.offsets_partitions < 1:
            raise ConfigError(f"{names('offsets_partitions')} must be at least 1")
        if self.transaction_state_partitions < 1:
            raise ConfigError(f"{names('transaction_state_partitions')} must be at least 1")
        if self.transaction_max_timeout_ms < 1:
            raise ConfigError(f"{names('transaction_max_timeout_ms')} must be at least 1")
        if self.default_partitions < 1:
            raise ConfigError(f"{names('default_partitions')} must be at least 1")
        if self.max_request_bytes < 1024:
            raise ConfigError(f"{names('max_request_bytes')} must be at least 1024")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"{names('port')} must be between 0 and 65535")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"{names('metrics_port')} must be between 0 and 65535")
        if self.max_connections < 0 or self.max_connections_per_ip < 0:
            raise ConfigError(f"{names('max_connections')} and {names('max_connections_per_ip')} must be at least 0")
        if self.queued_max_request_bytes == 0 or self.queued_max_request_bytes < -1:
            raise ConfigError(f"{names('queued_max_request_bytes')} must be -1 (no limit) or positive")
        if self.request_read_timeout_ms < 0:
            raise ConfigError(f"{names('request_read_timeout_ms')} must be at least 0")
        if self.log_page_cache_bytes < 0:
            raise ConfigError(f"{names('log_page_cache_bytes')} must be at least 0 (0: the OS decides)")
        if not 1 <= self.brokers <= 64:
            raise ConfigError(f"{names('brokers')} must be between 1 and 64")
        self.broker_racks()
        if self.leader_imbalance_check_interval_seconds < 1:
            raise ConfigError(f"{names('leader_imbalance_check_interval_seconds')} must be at least 1")
        if not 1 <= self.default_replication_factor <= 32767:
            raise ConfigError(f"{names('default_replication_factor')} must be between 1 and 32767")
        if self.metrics_max_connections < 1:
            raise ConfigError(f"{names('metrics_max_connections')} must be at least 1")
        if self.connections_max_reauth_ms < 0:
            raise ConfigError(f"{names('connections_max_reauth_ms')} must be at least 0")
        from broker.security.listeners import ListenerError, parse_listeners

        try:
            parse_listeners(self)
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None
        if self.control and not self.control_token:
            from broker.security.control_guard import is_loopback

            if not is_loopback(self.metrics_host):
                raise ConfigError(f"{names('control')} on a non-loopback {names('metrics_host')} needs {names('control_token')}")
        if self.control and not self.metrics:
            raise ConfigError(f"{names('control')} is served on the metrics listener: it needs {names('metrics')}")
        self._validate_consumer_groups()

    def broker_racks(self) -> list[str | None]:
        """The rack of each of the --brokers nodes (None: no rack). ConfigError unless
        --broker-rack names one rack, or one per node."""
        if self.broker_rack is None:
            return [None] * self.brokers
        racks = [r.strip() for r in self.broker_rack.split(",")]
        if any(not r for r in racks) or any(len(r) > MAX_RACK_LENGTH for r in racks):
            raise ConfigError(f"{names('broker_rack')} must name racks of 1 to {MAX_RACK_LENGTH} characters, comma-separated")
        if len(racks) == 1:
            return racks * self.brokers
        if len(racks) != self.brokers:
            raise ConfigError(f"{names('broker_rack')} names {len(racks)} racks for {self.brokers} brokers: give one, or one per broker")
        return list(racks)

    @property
    def streams_protocol_enabled(self) -> bool:
        """KS-1: KIP-1071 streams groups are served (`streams` in --group-coordinator-rebalance-protocols)."""
        return "streams" in {p.strip().lower() for p in self.group_coordinator_rebalance_protocols.split(",")}

    @property
    def share_groups_enabled(self) -> bool:
        """KIP-932 share groups are served (`share` in --group-coordinator-rebalance-protocols)."""
        return "share" in {p.strip().lower() for p in self.group_coordinator_rebalance_protocols.split(",")}

    @property
    def consumer_protocol_enabled(self) -> bool:
        """KH-1: KIP-848 consumer groups are served (`consumer` in --group-coordinator-rebalance-protocols)."""
        return "consumer" in {p.strip().lower() for p in self.group_coordinator_rebalance_protocols.split(",")}

    def _validate_consumer_groups(self) -> None:
        """Kafka's start-up checks of the group.consumer.* configs."""
        if self.group_consumer_session_timeout_ms < 1:
            raise ConfigError(f"{names('group_consumer_session_timeout_ms')} must be at least 1")
        if self.group_consumer_heartbeat_interval_ms < 1:
            raise ConfigError(f"{names('group_consumer_heartbeat_interval_ms')} must be at least 1")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ConfigError(
                f"{names('group_consumer_heartbeat_interval_ms')} must be less than {names('group_consumer_session_timeout_ms')}"
            )
        protocols = {p.strip().lower() for p in self.group_coordinator_rebalance_protocols.split(",") if p.strip()}
        if not protocols <= {"classic", "consumer", "streams", "share"} or "classic" not in protocols:
            raise ConfigError(
                f"{names('group_coordinator_rebalance_protocols')} must list classic, and may list consumer, streams and share"
            )
        if self.group_consumer_max_size < 1:
            raise ConfigError(f"{names('group_consumer_max_size')} must be at least 1")
        listed = [n.strip() for n in self.group_consumer_assignors.split(",") if n.strip()]
        from broker.coordinator import assignors

        unknown = [n for n in listed if n not in assignors.names()]
        if not listed or unknown:
            raise ConfigError(
                f"{names('group_consumer_assignors')} must list assignors among {', '.join(assignors.names())}"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )
        self.group_consumer_assignors = ",".join(listed)
        self._validate_streams_groups()
        self._validate_share_groups()

    def _validate_streams_groups(self) -> None:
        """Kafka's start-up checks of the group.streams.* configs (ConfigDef ranges, then GroupCoordinatorConfig's requires)."""
        at_least = {
            "group_streams_session_timeout_ms": 1,
            "group_streams_min_session_timeout_ms": 1,
            "group_streams_max_session_timeout_ms": 1,
            "group_streams_heartbeat_interval_ms": 1,
            "group_streams_min_heartbeat_interval_ms": 1,
            "group_streams_max_heartbeat_interval_ms": 1,
            "group_streams_max_size": 1,
            "group_streams_num_standby_replicas": 0,
            "group_streams_max_standby_replicas": 0,
            "group_streams_initial_rebalance_delay_ms": 0,
            "group_streams_assignment_interval_ms": 0,
            "group_streams_min_assignment_interval_ms": 0,
            "group_streams_max_assignment_interval_ms": 0,
            "group_streams_task_offset_interval_ms": 1,
            "group_streams_min_task_offset_interval_ms": 1,
            "group_streams_num_warmup_replicas": 0,
            "group_streams_max_warmup_replicas": 0,
            "group_streams_acceptable_recovery_lag": 0,
        }
        for name, low in at_least.items():
            if getattr(self, name) < low:
                raise ConfigError(f"{names(name)} must be at least {low}")
        checks = [
            ("group_streams_max_heartbeat_interval_ms", ">=", "group_streams_min_heartbeat_interval_ms"),
            ("group_streams_heartbeat_interval_ms", ">=", "group_streams_min_heartbeat_interval_ms"),
            ("group_streams_heartbeat_interval_ms", "<=", "group_streams_max_heartbeat_interval_ms"),
            ("group_streams_max_session_timeout_ms", ">=", "group_streams_min_session_timeout_ms"),
            ("group_streams_session_timeout_ms", ">=", "group_streams_min_session_timeout_ms"),
            ("group_streams_session_timeout_ms", "<=", "group_streams_max_session_timeout_ms"),
            ("group_streams_heartbeat_interval_ms", "<", "group_streams_session_timeout_ms"),
            ("group_streams_max_assignment_interval_ms", ">=", "group_streams_min_assignment_interval_ms"),
            ("group_streams_assignment_interval_ms", ">=", "group_streams_min_assignment_interval_ms"),
            ("group_streams_assignment_interval_ms", "<=", "group_streams_max_assignment_interval_ms"),
            ("group_streams_num_standby_replicas", "<=", "group_streams_max_standby_replicas"),
            ("group_streams_task_offset_interval_ms", ">=", "group_streams_min_task_offset_interval_ms"),
            ("group_streams_num_warmup_replicas", "<=", "group_streams_max_warmup_replicas"),
        ]
        words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
        for left, op, right in checks:
            a, b = getattr(self, left), getattr(self, right)
            if not (a >= b if op == ">=" else a <= b if op == "<=" else a < b):
                raise ConfigError(f"{names(left)} must be {words[op]} {names(right)}")
        tags = [t.strip() for t in self.group_streams_rack_aware_assignment_tags.split(",") if t.strip()]
        if len(set(tags)) != len(tags):
            raise ConfigError(f"{names('group_streams_rack_aware_assignment_tags')} must not contain duplicate tag keys.")
        listed = [n.strip() for n in self.group_streams_assignors.split(",") if n.strip()]
        if not listed or any(n != "sticky" for n in listed) or len(set(listed)) != len(listed):
            raise ConfigError(f"{names('group_streams_assignors')} must list task assignors among sticky")
        self.group_streams_assignors = ",".join(listed)

    def _validate_share_groups(self) -> None:
        """Kafka's start-up checks of the group.share.* and share.coordinator.* configs
        (GroupCoordinatorConfig.verifyShareGroupConfigs, ShareGroupConfig.validate), in their words."""

        def require(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        for name, low, high in (
            ("group_share_delivery_count_limit", 2, 10),
            ("group_share_max_delivery_count_limit", 5, 25),
            ("group_share_min_delivery_count_limit", 2, 5),
            ("group_share_record_lock_duration_ms", 1000, 3_600_000),
            ("group_share_min_record_lock_duration_ms", 1000, 30_000),
            ("group_share_max_record_lock_duration_ms", 30_000, 3_600_000),
            ("group_share_partition_max_record_locks", 100, 10_000),
            ("group_share_max_partition_max_record_locks", 2000, 10_000),
            ("group_share_min_partition_max_record_locks", 100, 2000),
        ):
            require(low <= getattr(self, name) <= high, f"{names(name)} must be between {low} and {high}")
        for name in (
            "group_share_session_timeout_ms",
            "group_share_heartbeat_interval_ms",
            "group_share_max_size",
            "group_share_max_share_sessions",
            "share_coordinator_state_topic_num_partitions",
            "share_coordinator_snapshot_update_records_per_snapshot",
            "share_coordinator_state_topic_prune_interval_ms",
            "share_coordinator_cold_partition_snapshot_interval_ms",
        ):
            require(getattr(self, name) >= 1, f"{names(name)} must be at least 1")
        for name in (
            "group_share_assignment_interval_ms",
            "group_share_min_assignment_interval_ms",
            "group_share_max_assignment_interval_ms",
        ):
            require(getattr(self, name) >= 0, f"{names(name)} must be at least 0")
        k = {f.name: "group." + f.name[len("group_") :].replace("_", ".") for f in fields(self) if f.name.startswith("group_share_")}
        pairs = (
            ("group_share_max_heartbeat_interval_ms", ">=", "group_share_min_heartbeat_interval_ms"),
            ("group_share_heartbeat_interval_ms", ">=", "group_share_min_heartbeat_interval_ms"),
            ("group_share_heartbeat_interval_ms", "<=", "group_share_max_heartbeat_interval_ms"),
            ("group_share_max_assignment_interval_ms", ">=", "group_share_min_assignment_interval_ms"),
            ("group_share_assignment_interval_ms", ">=", "group_share_min_assignment_interval_ms"),
            ("group_share_assignment_interval_ms", "<=", "group_share_max_assignment_interval_ms"),
            ("group_share_max_session_timeout_ms", ">=", "group_share_min_session_timeout_ms"),
            ("group_share_session_timeout_ms", ">=", "group_share_min_session_timeout_ms"),
            ("group_share_session_timeout_ms", "<=", "group_share_max_session_timeout_ms"),
            ("group_share_heartbeat_interval_ms", "<", "group_share_session_timeout_ms"),
            ("group_share_max_delivery_count_limit", ">=", "group_share_delivery_count_limit"),
            ("group_share_delivery_count_limit", ">=", "group_share_min_delivery_count_limit"),
            ("group_share_max_partition_max_record_locks", ">=", "group_share_partition_max_record_locks"),
            ("group_share_partition_max_record_locks", ">=", "group_share_min_partition_max_record_locks"),
            ("group_share_record_lock_duration_ms", ">=", "group_share_min_record_lock_duration_ms"),
            ("group_share_max_record_lock_duration_ms", ">=", "group_share_record_lock_duration_ms"),
        )
        words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
        for a, op, b in pairs:
            va, vb = getattr(self, a), getattr(self, b)
            ok = va >= vb if op == ">=" else va <= vb if op == "<=" else va < vb
            require(ok, f"{k[a]} must be {words[op]} {k[b]} ({names(a)} is {va}, {names(b)} is {vb})")


def convert(name: str, raw: str, source: str) -> Any:
    """The typed value of one setting, or ConfigError naming the flag and its variable."""
    f = next(f for f in _option_fields() if f.name == name)
    choices = f.metadata.get("choices")
    try:
        value = _converter(f)(raw)
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise ConfigError(f"invalid value {raw!r} for {names(name)}, given as {source}: {exc}") from None
    if choices and f.metadata.get("type") is None and value not in choices:
        raise ConfigError(f"invalid value {raw!r} for {names(name)}, given as {source}: expected one of {', '.join(choices)}")
    return value


def _option_fields() -> list[Any]:
    return [f for f in fields(Config) if not f.metadata.get("internal")]


def _defaults() -> dict[str, Any]:
    return {f.name: f.default for f in fields(Config) if f.default is not MISSING}


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


def _converter(f: Any) -> Callable[[str], Any]:
    kind = f.metadata.get("type")
    if kind is not None:
        return kind  # type: ignore[no-any-return]
    text = str(f.type)
    if "bool" in text:
        return _bool
    if "int" in text:
        return _int
    return str
