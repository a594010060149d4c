"""The topic configs kaflet accepts, validates, stores and describes, in one table.

It mirrors Kafka 4's LogConfig: the same names, types, validators and defaults, in the
same order (validation reports the first bad value in this order, as ConfigDef.parse
does). A default that Kafka takes from a broker config ("server default") comes from
the kaflet `Config` field that sets it, when there is one.

Users of this module:
- CreateTopics validates and normalizes a request's configs (`validate_new_configs`).
- DescribeConfigs and CreateTopics v5+ describe them (`describe`).
- The storage layer reads the effective, typed values of a topic (`effective_configs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

from broker.config import Config
from broker.config.types import (
    LONG_MAX,
    AtLeast,
    Between,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigType,
    EachOneOf,
    GzipLevel,
    OneOf,
    Synonym,
    ThrottledReplicas,
    Validator,
    parse,
    render,
)

if TYPE_CHECKING:
    from broker.topics.catalog import Topic

T = ConfigType
MIB = 1024 * 1024
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: Callable[[Config], Any]
    validator: Validator | None
    doc: str
    # Kafka's "Server Default Property": the broker config this topic config falls back to.
    server_default: str | None = None
    # The kaflet Config field that sets that server default, if kaflet has one.
    config_field: str | None = None
    # Whether DescribeConfigs lists the server default as a DEFAULT_CONFIG synonym. Kafka does
    # not for retention.ms, segment.ms, segment.jitter.ms and flush.ms: their first broker
    # synonym (log.retention.ms, ...) has no static default, and ConfigHelper drops the
    # lower-priority synonyms (log.retention.hours, ...) when describing a topic.
    default_synonym: bool = True


def _const(value: Any) -> Callable[[Config], Any]:
    return lambda _config: value


def _field(name: str) -> Callable[[Config], Any]:
    return lambda config: getattr(config, name)


_DEFS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef(
        "segment.bytes", T.INT, _field("log_segment_bytes"), AtLeast(MIB),
        "Size of a log segment file; a new segment is rolled once the active one reaches it.",
        "log.segment.bytes", "log_segment_bytes",
    ),
    TopicConfigDef(
        "segment.ms", T.LONG, _field("log_segment_ms"), AtLeast(1),
        "Time after which a new segment is rolled even if the active one is not full, so retention or "
        "compaction can act on old data.",
        "log.roll.ms", "log_segment_ms", default_synonym=False,
    ),
    TopicConfigDef(
        "segment.jitter.ms", T.LONG, _const(0), AtLeast(0),
        "Maximum random jitter subtracted from segment.ms to avoid rolling many segments at once.",
        "log.roll.jitter.ms", default_synonym=False,
    ),
    TopicConfigDef(
        "segment.index.bytes", T.INT, _const(10 * MIB), AtLeast(4),
        "Size of the index that maps offsets to file positions.",
        "log.index.size.max.bytes",
    ),
    TopicConfigDef(
        "flush.messages", T.LONG, _const(LONG_MAX), AtLeast(1),
        "Number of messages written to a partition after which an fsync is forced.",
        "log.flush.interval.messages",
    ),
    TopicConfigDef(
        "flush.ms", T.LONG, _const(LONG_MAX), AtLeast(0),
        "Time after which an fsync of written data is forced.",
        "log.flush.interval.ms", default_synonym=False,
    ),
    TopicConfigDef(
        "retention.bytes", T.LONG, _field("log_retention_bytes"), None,
        "Maximum size a partition may grow to before old segments are discarded under the delete "
        "policy; -1 means no size limit.",
        "log.retention.bytes", "log_retention_bytes",
    ),
    TopicConfigDef(
        "retention.ms", T.LONG, _field("log_retention_ms"), AtLeast(-1),
        "Maximum time a segment is kept before it is discarded under the delete policy; -1 means no "
        "time limit.",
        "log.retention.ms", "log_retention_ms", default_synonym=False,
    ),
    TopicConfigDef(
        "max.message.bytes", T.INT, _field("message_max_bytes"), AtLeast(0),
        "Largest record batch size allowed in this topic (after compression).",
        "message.max.bytes", "message_max_bytes",
    ),
    TopicConfigDef(
        "index.interval.bytes", T.INT, _const(4096), AtLeast(0),
        "How many bytes of log are written between entries of the offset index.",
        "log.index.interval.bytes",
    ),
    TopicConfigDef(
        "delete.retention.ms", T.LONG, _const(86_400_000), AtLeast(0),
        "How long tombstones are kept in a compacted topic.",
        "log.cleaner.delete.retention.ms",
    ),
    TopicConfigDef(
        "min.compaction.lag.ms", T.LONG, _const(0), AtLeast(0),
        "Minimum time a record stays uncompacted in the log.",
        "log.cleaner.min.compaction.lag.ms",
    ),
    TopicConfigDef(
        "max.compaction.lag.ms", T.LONG, _const(LONG_MAX), AtLeast(1),
        "Maximum time a record may stay ineligible for compaction.",
        "log.cleaner.max.compaction.lag.ms",
    ),
    TopicConfigDef(
        "file.delete.delay.ms", T.LONG, _const(60_000), AtLeast(0),
        "Time to wait before deleting a file from the filesystem.",
        "log.segment.delete.delay.ms",
    ),
    TopicConfigDef(
        "min.cleanable.dirty.ratio", T.DOUBLE, _const(0.5), Between(0, 1),
        "Minimum ratio of uncompacted log to total log for the cleaner to compact a partition.",
        "log.cleaner.min.cleanable.ratio",
    ),
    TopicConfigDef(
        "cleanup.policy", T.LIST, _const(["delete"]), EachOneOf(CLEANUP_POLICIES),
        'How old segments are cleaned up: "delete" discards them by time or size, "compact" keeps the '
        "latest record per key; both may be given.",
        "log.cleanup.policy",
    ),
    TopicConfigDef(
        "unclean.leader.election.enable", T.BOOLEAN, _const(False), None,
        "Whether a replica outside the ISR may become leader (meaningless on a single node).",
        "unclean.leader.election.enable",
    ),
    TopicConfigDef(
        "min.insync.replicas", T.INT, _const(1), AtLeast(1),
        "Minimum number of in-sync replicas that must acknowledge a write with acks=all.",
        "min.insync.replicas",
    ),
    TopicConfigDef(
        "compression.type", T.STRING, _const("producer"), OneOf(COMPRESSION_TYPES),
        "Final compression of the topic's data; 'producer' keeps what the producer sent.",
        "compression.type",
    ),
    TopicConfigDef(
        "compression.gzip.level", T.INT, _const(-1), GzipLevel(),
        "Compression level when compression.type is gzip.",
        "compression.gzip.level",
    ),
    TopicConfigDef(
        "compression.lz4.level", T.INT, _const(9), Between(1, 17),
        "Compression level when compression.type is lz4.",
        "compression.lz4.level",
    ),
    TopicConfigDef(
        "compression.zstd.level", T.INT, _const(3), Between(-131072, 22),
        "Compression level when compression.type is zstd.",
        "compression.zstd.level",
    ),
    TopicConfigDef(
        "preallocate", T.BOOLEAN, _const(False), None,
        "Whether segment files are preallocated on disk.",
        "log.preallocate",
    ),
    TopicConfigDef(
        "message.timestamp.type", T.STRING, _const("CreateTime"), OneOf(TIMESTAMP_TYPES),
        "Whether record timestamps are the producer's create time or the broker's append time.",
        "log.message.timestamp.type",
    ),
    TopicConfigDef(
        "message.timestamp.before.max.ms", T.LONG, _const(LONG_MAX), AtLeast(0),
        "How far in the past a CreateTime timestamp may be relative to the broker's clock.",
        "log.message.timestamp.before.max.ms",
    ),
    TopicConfigDef(
        "message.timestamp.after.max.ms", T.LONG, _const(3_600_000), AtLeast(0),
        "How far in the future a CreateTime timestamp may be relative to the broker's clock.",
        "log.message.timestamp.after.max.ms",
    ),
    TopicConfigDef(
        "leader.replication.throttled.replicas", T.LIST, _const([]), ThrottledReplicas(),
        "Replicas throttled on the leader side ('*' or partition:broker pairs).",
    ),
    TopicConfigDef(
        "follower.replication.throttled.replicas", T.LIST, _const([]), ThrottledReplicas(),
        "Replicas throttled on the follower side ('*' or partition:broker pairs).",
    ),
    TopicConfigDef(
        "remote.storage.enable", T.BOOLEAN, _const(False), None,
        "Whether tiered storage is enabled for the topic (kaflet has no tiered storage).",
    ),
    TopicConfigDef(
        "local.retention.ms", T.LONG, _const(-2), AtLeast(-2),
        "Local retention time with tiered storage; -2 means retention.ms.",
        "log.local.retention.ms",
    ),
    TopicConfigDef(
        "local.retention.bytes", T.LONG, _const(-2), AtLeast(-2),
        "Local retention size with tiered storage; -2 means retention.bytes.",
        "log.local.retention.bytes",
    ),
    TopicConfigDef(
        "remote.log.copy.disable", T.BOOLEAN, _const(False), None,
        "Whether copying segments to tiered storage is disabled.",
    ),
    TopicConfigDef(
        "remote.log.delete.on.disable", T.BOOLEAN, _const(False), None,
        "Whether remote data is deleted when tiered storage is disabled for the topic.",
    ),
)  # fmt: skip

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _DEFS}

_CONFIG_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Config)}


def config_field_changed(config: Config, field_name: str | None) -> bool:
    """Whether the operator set this Config field to something other than kaflet's default
    (Kafka's STATIC_BROKER_CONFIG: set in the broker's own configuration)."""
    return field_name is not None and getattr(config, field_name) != _CONFIG_DEFAULTS[field_name]


def config_default(field_name: str) -> Any:
    return _CONFIG_DEFAULTS[field_name]


# -- validation -------------------------------------------------------------------------


def validate_new_configs(entries: Iterable[tuple[str, str | None]], config: Config) -> dict[str, str]:
    """Check a topic's requested configs as Kafka's controller does and return them normalized
    ({name: value as DescribeConfigs will show it}). Raises ConfigError with Kafka's message.

    Order of checks (ReplicationControlManager.computeConfigChanges, then LogConfig.validate):
    null values, unknown names, each value's type and validator in table order, the
    min/max compaction lag conflict, and tiered storage, which kaflet does not have.
    A name given twice keeps its last value, as Kafka's map does.
    """
    requested: dict[str, str] = {}
    nulls: list[str] = []
    for name, value in entries:
        if value is None:
            nulls.append(name)
        else:
            requested[name] = value
    if nulls:
        raise ConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    for name in requested:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    parsed: dict[str, Any] = {}
    for definition in _DEFS:
        if definition.name in requested:
            value = parse(definition.name, requested[definition.name], definition.type)
            if definition.validator is not None:
                definition.validator(definition.name, value)
            parsed[definition.name] = value
    merged = {d.name: parsed[d.name] if d.name in parsed else d.default(config) for d in _DEFS}
    if merged["min.compaction.lag.ms"] > merged["max.compaction.lag.ms"]:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({merged['min.compaction.lag.ms']}) > "
            f"max.compaction.lag.ms ({merged['max.compaction.lag.ms']})"
        )
    if merged["remote.storage.enable"]:
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
    return {name: render(value, TOPIC_CONFIGS[name].type) or "" for name, value in parsed.items()}


# -- effective values ------------------------------------------------------------------


def effective_configs(topic: Topic | Mapping[str, str], config: Config) -> dict[str, Any]:
    """Every topic config's effective, typed value for `topic` (a Topic or its stored configs):
    the topic's own setting, else the broker's default. INT/LONG are ints, DOUBLE a float,
    BOOLEAN a bool, STRING a str and LIST a list of str (e.g. cleanup.policy -> ["delete"]).

    Stored values were validated when they were set; one that no longer parses (a hand-edited
    topics.json) falls back to the default rather than breaking the topic.
    """
    stored = topic if isinstance(topic, Mapping) else topic.configs
    out: dict[str, Any] = {}
    for definition in _DEFS:
        raw = stored.get(definition.name)
        value = definition.default(config)
        if raw is not None:
            try:
                value = parse(definition.name, raw, definition.type)
            except ConfigError:
                pass
        out[definition.name] = list(value) if isinstance(value, list) else value
    return out


class DynamicLayer(Protocol):
    """Dynamic broker configs (broker/config/dynamic_configs.py), as describing needs them."""

    static: dict[str, Any]

    def source(self, field_name: str) -> ConfigSource | None: ...


def _static_changed(config: Config, field_name: str | None, dynamic: DynamicLayer | None) -> bool:
    if dynamic is None or field_name is None or field_name not in dynamic.static:
        return config_field_changed(config, field_name)
    return dynamic.static[field_name] != config_default(field_name)


def source_of(definition: TopicConfigDef, stored: Mapping[str, str], config: Config, dynamic: DynamicLayer | None = None) -> ConfigSource:
    if definition.name in stored:
        return ConfigSource.TOPIC_CONFIG
    if dynamic is not None and definition.config_field is not None:
        source = dynamic.source(definition.config_field)
        if source is not None:
            return source
    if _static_changed(config, definition.config_field, dynamic):
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG


def describe(stored: Mapping[str, str], config: Config, dynamic: DynamicLayer | None = None) -> list[ConfigEntry]:
    """Every topic config as DescribeConfigs reports it, sorted by name, with synonyms in
    Kafka's order: the topic's own value, a dynamic broker value, the broker's static setting,
    the broker default."""
    values = effective_configs(stored, config)
    entries: list[ConfigEntry] = []
    for definition in sorted(_DEFS, key=lambda d: d.name):
        value = render(values[definition.name], definition.type)
        synonyms: list[Synonym] = []
        if definition.name in stored:
            synonyms.append(Synonym(definition.name, value, ConfigSource.TOPIC_CONFIG))
        if definition.server_default is not None:
            field_name = definition.config_field
            dynamic_source = dynamic.source(field_name) if dynamic is not None and field_name is not None else None
            if dynamic_source is not None:
                synonyms.append(Synonym(definition.server_default, render(definition.default(config), definition.type), dynamic_source))
            if _static_changed(config, field_name, dynamic):
                static = dynamic.static[field_name] if dynamic is not None and field_name in dynamic.static else definition.default(config)
                broker_value = render(static, definition.type)
                synonyms.append(Synonym(definition.server_default, broker_value, ConfigSource.STATIC_BROKER_CONFIG))
            if definition.default_synonym:
                field_name = definition.config_field
                default = config_default(field_name) if field_name else definition.default(config)
                synonyms.append(Synonym(definition.server_default, render(default, definition.type), ConfigSource.DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name=definition.name,
                value=value,
                source=source_of(definition, stored, config, dynamic),
                type=definition.type,
                doc=definition.doc,
                synonyms=synonyms,
            )
        )
    return entries
