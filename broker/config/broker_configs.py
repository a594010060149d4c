"""The broker configs DescribeConfigs reports for this node, derived from `Config`.

Names are Kafka's, so admin tools find what they look for (num.partitions,
offsets.topic.num.partitions, log.retention.ms, ...). A value set by the operator (flag or
KAFLET_* variable, i.e. different from kaflet's default) is a STATIC_BROKER_CONFIG, as a
line in Kafka's server.properties would be; anything else is DEFAULT_CONFIG.

The configs kaflet can change at run time (broker/config/dynamic_configs.py: the log defaults
and the connection limits) are reported writable (read_only=false), with their dynamic
source and synonyms; every other one is read-only, since an attempt to change it is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.config.topic_configs import TOPIC_CONFIGS, config_default, config_field_changed
from broker.config.types import LONG_MAX, ConfigEntry, ConfigSource, ConfigType, Synonym, render

if TYPE_CHECKING:
    from broker.config import Config
    from broker.config.dynamic_configs import DynamicBrokerConfigs

T = ConfigType


class DescribedBroker(Protocol):
    """What describing a node's broker configs reads of it: its config, listener, advertised
    address and dynamic configs."""

    config: Config
    bound_port: int
    bound_hosts: list[str]
    dynamic_configs: DynamicBrokerConfigs
    listeners: list[Any]  # broker/security/listeners.py's Listener, one per --listeners entry

    @property
    def advertised_host(self) -> str: ...

    @property
    def advertised_port(self) -> int: ...


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    type: ConfigType
    value: Callable[[DescribedBroker], Any]
    doc: str
    # The Config field(s) behind the value; any of them changed makes it a static setting.
    config_fields: tuple[str, ...] = ()
    # kaflet's default when no Config field is behind it (None: Kafka has no default either).
    default: Any = None


def _field(name: str) -> Callable[[DescribedBroker], Any]:
    return lambda broker: getattr(broker.config, name)


def _const(value: Any) -> Callable[[DescribedBroker], Any]:
    return lambda _broker: value


def _listeners(broker: DescribedBroker) -> str:
    if broker.config.listeners:  # every listener (broker/security/listeners.py)
        return ",".join(lst.describe() for lst in broker.listeners)
    return (
        ",".join(f"PLAINTEXT://{h}:{broker.bound_port}" for h in broker.bound_hosts)
        or f"PLAINTEXT://{broker.config.host}:{broker.config.port}"
    )


def _advertised(broker: DescribedBroker) -> str:
    if broker.config.listeners:
        return ",".join(f"{lst.name}://{lst.advertised[0]}:{lst.advertised[1]}" for lst in broker.listeners)
    return f"PLAINTEXT://{broker.advertised_host}:{broker.advertised_port}"


def _replica_selector(broker: DescribedBroker) -> str | None:
    return "org.apache.kafka.common.replica.RackAwareReplicaSelector" if broker.config.replica_selector == "rack" else None


def _internal_replicas(broker: DescribedBroker) -> int:
    return min(3, broker.config.brokers)


_OWN: tuple[BrokerConfigDef, ...] = (
    BrokerConfigDef("node.id", T.INT, _field("node_id"), "This node's id (--node-id).", ("node_id",)),
    BrokerConfigDef("broker.id", T.INT, _field("node_id"), "This broker's id; the same as node.id.", ("node_id",)),
    BrokerConfigDef("process.roles", T.LIST, _const(["broker", "controller"]), "kaflet is a single combined broker and controller.", default=["broker", "controller"]),
    BrokerConfigDef("listeners", T.LIST, lambda b: _listeners(b).split(","), "Addresses the broker listens on (--host, --port).", ("host", "port")),
    BrokerConfigDef("advertised.listeners", T.LIST, lambda b: _advertised(b).split(","), "Address clients are told to connect to (--advertised-host, --advertised-port).", ("advertised_host", "advertised_port")),
    BrokerConfigDef("log.dirs", T.LIST, lambda b: [str(b.datadir.path) if b.datadir else b.config.data_dir], "Directory holding topics, logs and metadata (--data-dir).", ("data_dir",)),
    BrokerConfigDef("num.partitions", T.INT, _field("default_partitions"), "Partitions of auto-created topics, and of topics created with num_partitions -1 (--default-partitions).", ("default_partitions",)),
    BrokerConfigDef("default.replication.factor", T.INT, _field("default_replication_factor"), "Replication factor of auto-created topics and of topics created with replication_factor -1 (--default-replication-factor).", ("default_replication_factor",)),
    BrokerConfigDef("broker.rack", T.STRING, _field("broker_rack"), "This broker's rack (--broker-rack).", ("broker_rack",)),
    BrokerConfigDef("replica.selector.class", T.CLASS, _replica_selector, "How a leader picks the replica a consumer fetches from: none (the leader), or Kafka's RackAwareReplicaSelector (--replica-selector rack).", ("replica_selector",)),
    BrokerConfigDef("auto.leader.rebalance.enable", T.BOOLEAN, _field("auto_leader_rebalance_enable"), "Whether preferred replicas lead again once back in sync (--auto-leader-rebalance-enable).", ("auto_leader_rebalance_enable",)),
    BrokerConfigDef("leader.imbalance.check.interval.seconds", T.LONG, _field("leader_imbalance_check_interval_seconds"), "How often leaders are balanced (--leader-imbalance-check-interval-seconds).", ("leader_imbalance_check_interval_seconds",)),
    BrokerConfigDef("auto.create.topics.enable", T.BOOLEAN, _field("auto_create_topics"), "Whether Metadata and Produce create unknown topics (--auto-create-topics).", ("auto_create_topics",)),
    BrokerConfigDef("delete.topic.enable", T.BOOLEAN, _const(True), "Topics can be deleted.", default=True),
    BrokerConfigDef("offsets.topic.num.partitions", T.INT, _field("offsets_partitions"), "Partitions of __consumer_offsets, fixed per data dir (--offsets-partitions).", ("offsets_partitions",)),
    BrokerConfigDef("offsets.topic.replication.factor", T.SHORT, _internal_replicas, "Replication factor of __consumer_offsets: 3, or every broker of a smaller cluster.", default=1),
    BrokerConfigDef("transaction.state.log.replication.factor", T.SHORT, _internal_replicas, "Replication factor of __transaction_state: 3, or every broker of a smaller cluster.", default=1),
    BrokerConfigDef("offsets.topic.segment.bytes", T.INT, _field("offsets_topic_segment_bytes"), "Segment size of __consumer_offsets.", ("offsets_topic_segment_bytes",)),
    BrokerConfigDef("offsets.retention.minutes", T.INT, _field("offsets_retention_minutes"), "How long committed offsets of an empty group are kept.", ("offsets_retention_minutes",)),
    BrokerConfigDef("offsets.retention.check.interval.ms", T.LONG, _field("offsets_retention_check_interval_ms"), "How often expired offsets are looked for.", ("offsets_retention_check_interval_ms",)),
    BrokerConfigDef("offset.metadata.max.bytes", T.INT, _field("offset_metadata_max_bytes"), "Largest metadata string an offset commit may carry.", ("offset_metadata_max_bytes",)),
    BrokerConfigDef("group.initial.rebalance.delay.ms", T.INT, _field("group_initial_rebalance_delay_ms"), "How long the first rebalance of a new classic group waits for more members.", ("group_initial_rebalance_delay_ms",)),
    BrokerConfigDef("group.min.session.timeout.ms", T.INT, _field("group_min_session_timeout_ms"), "Smallest session timeout a classic group member may ask for.", ("group_min_session_timeout_ms",)),
    BrokerConfigDef("group.max.session.timeout.ms", T.INT, _field("group_max_session_timeout_ms"), "Largest session timeout a classic group member may ask for.", ("group_max_session_timeout_ms",)),
    BrokerConfigDef("group.max.size", T.INT, _field("group_max_size"), "Largest number of members in a group.", ("group_max_size",)),
    BrokerConfigDef("socket.request.max.bytes", T.INT, _field("max_request_bytes"), "Largest request frame accepted (--max-request-bytes).", ("max_request_bytes",)),
    BrokerConfigDef("max.connections", T.INT, _field("max_connections"), "Connections beyond it are refused (--max-connections).", ("max_connections",)),
    BrokerConfigDef("max.connections.per.ip", T.INT, _field("max_connections_per_ip"), "Connections from one address beyond it are refused (--max-connections-per-ip).", ("max_connections_per_ip",)),
    BrokerConfigDef("queued.max.request.bytes", T.LONG, _field("queued_max_request_bytes"), "No request is read while more request bytes than this are in flight; -1: no limit.", ("queued_max_request_bytes",)),
    BrokerConfigDef("connections.max.idle.ms", T.LONG, _field("connections_max_idle_ms"), "Idle connections are closed after this long.", ("connections_max_idle_ms",)),
    BrokerConfigDef("connections.max.reauth.ms", T.LONG, _field("connections_max_reauth_ms"), "SASL sessions last at most this long (KIP-368); 0: until the credential expires (--connections-max-reauth-ms).", ("connections_max_reauth_ms",)),
    BrokerConfigDef("log.retention.check.interval.ms", T.LONG, _field("log_retention_check_interval_ms"), "How often retention runs.", ("log_retention_check_interval_ms",)),
    BrokerConfigDef("log.retention.hours", T.INT, _const(168), "Retention in hours, used by Kafka when log.retention.ms and log.retention.minutes are unset.", default=168),
    BrokerConfigDef("log.retention.minutes", T.INT, _const(None), "Retention in minutes, used by Kafka when log.retention.ms is unset."),
    BrokerConfigDef("log.roll.hours", T.INT, _const(168), "Segment roll time in hours, used by Kafka when log.roll.ms is unset.", default=168),
    BrokerConfigDef("log.roll.jitter.hours", T.INT, _const(0), "Segment roll jitter in hours, used by Kafka when log.roll.jitter.ms is unset.", default=0),
    BrokerConfigDef("log.flush.scheduler.interval.ms", T.LONG, _const(LONG_MAX), "How often the flusher checks for logs to flush.", default=LONG_MAX),
)  # fmt: skip


def _server_defaults() -> tuple[BrokerConfigDef, ...]:
    """A broker config for every topic config's server default (log.segment.bytes, ...)."""
    out: list[BrokerConfigDef] = []
    for topic_def in TOPIC_CONFIGS.values():
        if topic_def.server_default is None:
            continue
        field_name = topic_def.config_field
        if field_name is None and not topic_def.default_synonym:
            # Kafka has no static default for these (log.roll.jitter.ms, log.flush.interval.ms).
            out.append(
                BrokerConfigDef(topic_def.server_default, topic_def.type, _const(None), f"Server default of topic config {topic_def.name}.")
            )
            continue
        default_value = topic_def.default
        out.append(
            BrokerConfigDef(
                topic_def.server_default,
                topic_def.type,
                lambda broker, d=default_value: d(broker.config),
                f"Server default of topic config {topic_def.name}: {topic_def.doc}",
                (field_name,) if field_name else (),
                None if field_name else default_value(None),  # type: ignore[arg-type]
            )
        )
    return tuple(out)


BROKER_CONFIGS: dict[str, BrokerConfigDef] = {d.name: d for d in (*_OWN, *_server_defaults())}


def describe(broker: DescribedBroker) -> list[ConfigEntry]:
    """Every broker config of this node, sorted by name."""
    from broker.config.dynamic_configs import DEFAULT, DYNAMIC, NODE

    config = broker.config
    dynamic = broker.dynamic_configs
    entries: list[ConfigEntry] = []
    for definition in sorted(BROKER_CONFIGS.values(), key=lambda d: d.name):
        value = render(definition.value(broker), definition.type)
        fields = definition.config_fields
        writable = definition.name in DYNAMIC and len(fields) == 1
        if writable:
            static_value = dynamic.static[fields[0]]
            static = static_value != config_default(fields[0])
            static_text = render(static_value, definition.type)
        else:
            static = any(config_field_changed(config, f) for f in fields)
            static_text = value
        if fields:
            default = _default_of(definition, broker)
        else:
            default = render(definition.default, definition.type)
        synonyms: list[Synonym] = []
        source = ConfigSource.STATIC_BROKER_CONFIG if static else ConfigSource.DEFAULT_CONFIG
        if writable:
            for level, level_source in ((DEFAULT, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), (NODE, ConfigSource.DYNAMIC_BROKER_CONFIG)):
                if definition.name in dynamic.levels[level]:
                    synonyms.insert(0, Synonym(definition.name, dynamic.levels[level][definition.name], level_source))
                    source = level_source
        if static:
            synonyms.append(Synonym(definition.name, static_text, ConfigSource.STATIC_BROKER_CONFIG))
        if default is not None:
            synonyms.append(Synonym(definition.name, default, ConfigSource.DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name=definition.name,
                value=value,
                source=source,
                type=definition.type,
                doc=definition.doc,
                read_only=not writable,
                synonyms=synonyms,
            )
        )
    return sorted(entries + _security_entries(broker), key=lambda e: e.name)


def _security_entries(broker: DescribedBroker) -> list[ConfigEntry]:
    """The dynamic security configs set on this broker (broker/security/dynamic.py)."""
    from broker.config.dynamic_configs import DEFAULT, NODE
    from broker.security import dynamic as security

    levels = broker.dynamic_configs.levels
    out = []
    for name in sorted(n for n in {**levels[DEFAULT], **levels[NODE]} if security.known(n)):
        source = ConfigSource.DYNAMIC_BROKER_CONFIG if name in levels[NODE] else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        value = levels[NODE].get(name, levels[DEFAULT].get(name))
        out.append(
            ConfigEntry(
                name, value, source, security.kind(name), "A security config changed at run time.", synonyms=[Synonym(name, value, source)]
            )
        )
    return out


def describe_dynamic_defaults(broker: DescribedBroker) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (resource name ""), as Kafka lists them: only those set."""
    from broker.config.dynamic_configs import DEFAULT, DYNAMIC

    entries = []
    for name, value in sorted(broker.dynamic_configs.levels[DEFAULT].items()):
        kind = DYNAMIC[name][1]
        synonym = Synonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        entries.append(
            ConfigEntry(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, kind, BROKER_CONFIGS[name].doc, synonyms=[synonym])
        )
    return entries


def _default_of(definition: BrokerConfigDef, broker: DescribedBroker) -> str | None:
    """The value this config would have with kaflet's defaults for its Config fields."""
    if len(definition.config_fields) != 1:
        # Derived from several settings (listeners, advertised.listeners): no single default.
        return None
    field_name = definition.config_fields[0]
    if field_name in ("data_dir", "replica_selector"):
        return None  # a path relative to wherever kaflet was started; no selector class (Kafka's null)
    default = config_default(field_name)
    if default is None:
        return None
    if definition.type is ConfigType.LIST:
        return render([default], definition.type)
    return render(default, definition.type)
