"""Per-group configs (Kafka's GROUP config resource, KIP-848): what IncrementalAlterConfigs sets
on a group and DescribeConfigs shows, persisted in the data dir (`group-configs.json`).

The narrow interface: `GroupConfigs.get(group_id)` -> the group's own settings {name: typed
value} (a group without any has {}), and `get(group_id, name)` -> one of them or None, in which
case the broker's default applies. A config is one entry of `GROUP_CONFIG_DEFS` (name, type,
the broker default it falls back to, and its check against the broker's bounds), so adding one,
such as `lag.aware.uncommitted`, is one more entry.

Validation follows Kafka's GroupConfig: each value parses as its type, then the bounds checks
against the broker's group.consumer.* settings, in Kafka's words:
`consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms`,
and the heartbeat interval must stay below the session timeout. Kafka keeps group configs of
groups that do not exist (a config may be set before the group's first member joins); so
does kaflet, and keeps them when the group is deleted, until a DELETE operation removes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.config.types import ConfigEntry, ConfigError, ConfigSource, ConfigType, Synonym, parse, render
from broker.node.datadir import write_json

if TYPE_CHECKING:
    from broker.config import Config

# DescribeConfigsResponse.ConfigSource GROUP_CONFIG (KIP-848), beyond config_types.ConfigSource.
GROUP_CONFIG_SOURCE = 8
FILE_NAME = "group-configs.json"

# check(name, value, all effective values of the group, broker config) raises ConfigError.
Check = Callable[[str, Any, Mapping[str, Any], "Config"], None]


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    broker_default: str  # the Config field whose value applies when the group has none
    broker_config: str  # Kafka's name of that broker config (the DescribeConfigs synonym)
    doc: str
    check: Check | None = None
    internal: bool = False  # Kafka's defineInternal: DescribeConfigs lists it only where a group sets it


def _between(low_field: str, low_name: str, high_field: str, high_name: str) -> Check:
    def check(name: str, value: Any, _values: Mapping[str, Any], config: Config) -> None:
        if value < getattr(config, low_field):
            raise ConfigError(f"{name} must be greater than or equal to {low_name}")
        if value > getattr(config, high_field):
            raise ConfigError(f"{name} must be less than or equal to {high_name}")

    return check


def _heartbeat(name: str, value: Any, values: Mapping[str, Any], config: Config) -> None:
    _between(
        "group_consumer_min_heartbeat_interval_ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group_consumer_max_heartbeat_interval_ms",
        "group.consumer.max.heartbeat.interval.ms",
    )(name, value, values, config)
    if value >= values["consumer.session.timeout.ms"]:
        raise ConfigError(f"{name} must be less than consumer.session.timeout.ms")


GROUP_CONFIG_DEFS: list[GroupConfigDef] = [
    GroupConfigDef(
        "consumer.session.timeout.ms",
        ConfigType.INT,
        "group_consumer_session_timeout_ms",
        "group.consumer.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol.",
        _between(
            "group_consumer_min_session_timeout_ms",
            "group.consumer.min.session.timeout.ms",
            "group_consumer_max_session_timeout_ms",
            "group.consumer.max.session.timeout.ms",
        ),
    ),
    GroupConfigDef(
        "consumer.heartbeat.interval.ms",
        ConfigType.INT,
        "group_consumer_heartbeat_interval_ms",
        "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a consumer group.",
        _heartbeat,
    ),
    GroupConfigDef(
        "consumer.assignment.interval.ms",
        ConfigType.INT,
        "group_consumer_assignment_interval_ms",
        "group.consumer.assignment.interval.ms",
        "The interval between assignment updates for a consumer group.",
        _between(
            "group_consumer_min_assignment_interval_ms",
            "group.consumer.min.assignment.interval.ms",
            "group_consumer_max_assignment_interval_ms",
            "group.consumer.max.assignment.interval.ms",
        ),
    ),
]


def _one_of(*allowed: str) -> Check:
    """Kafka's ConfigDef.ValidString."""

    def check(name: str, value: Any, _values: Mapping[str, Any], _config: Config) -> None:
        if value not in allowed:
            raise ConfigError(f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(allowed)}")

    return check


# Issue 13 (kaflet only): the lag the lag-aware assignor counts for a partition the group never committed.
GROUP_CONFIG_DEFS.append(
    GroupConfigDef(
        "lag.aware.uncommitted",
        ConfigType.STRING,
        "lag_aware_uncommitted",
        "lag.aware.uncommitted",
        "kaflet only: the lag the lag-aware assignor counts for a partition the group never committed: earliest (log end "
        "minus log start) or latest (0).",
        _one_of("earliest", "latest"),
    )
)

# KIP-1071 streams groups: Kafka 4.4's streams.* group configs, their ConfigDef ranges first, then
# GroupConfig.validateValues' bounds against the broker's group.streams.* settings, in Kafka's words.


def _streams_range(low: int, low_field: str | None = None, high_field: str | None = None) -> Check:
    def check(name: str, value: Any, _values: Mapping[str, Any], config: Config) -> None:
        if value < low:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
        lo = getattr(config, low_field) if low_field else None
        hi = getattr(config, high_field) if high_field else None
        if lo is not None and hi is not None and not lo <= value <= hi:
            raise ConfigError(f"{name} must be in the range {lo} to {hi} inclusive.")
        if lo is not None and hi is None and value < lo:
            raise ConfigError(f"{name} must be greater than or equal to {lo}")
        if hi is not None and lo is None and value > hi:
            raise ConfigError(f"{name} must be less than or equal to {hi}")

    return check


_STREAMS_HEARTBEAT_RANGE = _streams_range(1, "group_streams_min_heartbeat_interval_ms", "group_streams_max_heartbeat_interval_ms")
_STREAMS_SESSION_RANGE = _streams_range(1, "group_streams_min_session_timeout_ms", "group_streams_max_session_timeout_ms")


def _streams_session_and_heartbeat(name: str, value: Any, values: Mapping[str, Any], config: Config) -> None:
    """Kafka's order: the heartbeat interval's range, the session timeout's, then one against the other."""
    session, heartbeat = "streams.session.timeout.ms", "streams.heartbeat.interval.ms"
    _STREAMS_HEARTBEAT_RANGE(heartbeat, values[heartbeat], values, config)
    _STREAMS_SESSION_RANGE(session, values[session], values, config)
    if values[session] <= values[heartbeat]:
        raise ConfigError("streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms")


def _streams_tags(name: str, value: Any, _values: Mapping[str, Any], _config: Config) -> None:
    tags = [t.strip() for t in value] if isinstance(value, list) else []
    if len(set(tags)) != len(tags):
        raise ConfigError("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")


def _streams_assignor(name: str, value: Any, _values: Mapping[str, Any], config: Config) -> None:
    registered = [n.strip() for n in config.group_streams_assignors.split(",")]
    if value not in registered:
        raise ConfigError(
            f"streams.assignor.name '{value}' is not a registered task assignor. Registered assignors are: [{', '.join(registered)}]."
        )


GROUP_CONFIG_DEFS += [
    GroupConfigDef(
        "streams.session.timeout.ms",
        ConfigType.INT,
        "group_streams_session_timeout_ms",
        "group.streams.session.timeout.ms",
        "The timeout to detect client failures when using the streams group protocol.",
        _streams_session_and_heartbeat,
    ),
    GroupConfigDef(
        "streams.heartbeat.interval.ms",
        ConfigType.INT,
        "group_streams_heartbeat_interval_ms",
        "group.streams.heartbeat.interval.ms",
        "The heartbeat interval given to the members.",
        _streams_session_and_heartbeat,
    ),
    GroupConfigDef(
        "streams.num.standby.replicas",
        ConfigType.INT,
        "group_streams_num_standby_replicas",
        "group.streams.num.standby.replicas",
        "The number of standby replicas for each task.",
        _streams_range(0, None, "group_streams_max_standby_replicas"),
    ),
    GroupConfigDef(
        "streams.initial.rebalance.delay.ms",
        ConfigType.INT,
        "group_streams_initial_rebalance_delay_ms",
        "group.streams.initial.rebalance.delay.ms",
        "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the "
        "first rebalance. A longer delay means potentially fewer rebalances.",
        _streams_range(0),
    ),
    GroupConfigDef(
        "streams.assignment.interval.ms",
        ConfigType.INT,
        "group_streams_assignment_interval_ms",
        "group.streams.assignment.interval.ms",
        "The interval between assignment updates for a streams group.",
        _streams_range(0, "group_streams_min_assignment_interval_ms", "group_streams_max_assignment_interval_ms"),
    ),
    GroupConfigDef(
        "streams.task.offset.interval.ms",
        ConfigType.INT,
        "group_streams_task_offset_interval_ms",
        "group.streams.task.offset.interval.ms",
        "The interval in which the warmup task changelog offsets on a client are updated on the broker.",
        _streams_range(1, "group_streams_min_task_offset_interval_ms"),
        internal=True,
    ),
    GroupConfigDef(
        "streams.num.warmup.replicas",
        ConfigType.INT,
        "group_streams_num_warmup_replicas",
        "group.streams.num.warmup.replicas",
        "The maximum number of warmup task replicas.",
        _streams_range(0, None, "group_streams_max_warmup_replicas"),
        internal=True,
    ),
    GroupConfigDef(
        "streams.acceptable.recovery.lag",
        ConfigType.LONG,
        "group_streams_acceptable_recovery_lag",
        "group.streams.acceptable.recovery.lag",
        "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough to receive "
        "an active task assignment.",
        _streams_range(0),
        internal=True,
    ),
    GroupConfigDef(
        "streams.rack.aware.assignment.tags",
        ConfigType.LIST,
        "group_streams_rack_aware_assignment_tags",
        "group.streams.rack.aware.assignment.tags",
        "List of client tag keys used to distribute standby replicas across Kafka Streams instances.",
        _streams_tags,
    ),
    GroupConfigDef(
        "streams.assignor.name",
        ConfigType.STRING,
        "group_streams_assignors",
        "group.streams.assignors",
        "The task assignor to use for this streams group, selected by short name from the assignors registered via the broker "
        "configuration group.streams.assignors.",
        _streams_assignor,
    ),
]

# Group "configs" that are actions, not settings (kaflet only): a SET through IncrementalAlterConfigs runs the
# GroupCoordinator method named here on the group and stores nothing; DescribeConfigs does not list them.
# `kaflet.rebalance` (issue 13): Kafka has no API to rebalance a consumer group on demand; a group config write
# is the one admin request every client library can already send for a group, so SET kaflet.rebalance (any
# value) bumps the group epoch and the assignor runs again at the members' next heartbeats.
GROUP_ACTIONS: dict[str, str] = {"kaflet.rebalance": "request_rebalance"}


# KIP-932 share groups: Kafka 4.4's share.* group configs, their broker defaults and bounds.


def _at_least(low: int) -> Check:
    """ConfigDef's Range.atLeast, checked as the value parses."""

    def check(name: str, value: Any, _values: Mapping[str, Any], _config: Config) -> None:
        if value < low:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")

    return check


# GroupConfig.validateIntRange for the share configs, after every value has parsed, in Kafka's order.
_SHARE_RANGES = (
    ("share.heartbeat.interval.ms", "group_share_min_heartbeat_interval_ms", "group_share_max_heartbeat_interval_ms"),
    ("share.session.timeout.ms", "group_share_min_session_timeout_ms", "group_share_max_session_timeout_ms"),
    ("share.record.lock.duration.ms", "group_share_min_record_lock_duration_ms", "group_share_max_record_lock_duration_ms"),
    ("share.delivery.count.limit", "group_share_min_delivery_count_limit", "group_share_max_delivery_count_limit"),
    ("share.partition.max.record.locks", "group_share_min_partition_max_record_locks", "group_share_max_partition_max_record_locks"),
    ("share.assignment.interval.ms", "group_share_min_assignment_interval_ms", "group_share_max_assignment_interval_ms"),
)


def _share_ranges(configs: Mapping[str, str], values: Mapping[str, Any], config: Config) -> None:
    for name, low_field, high_field in _SHARE_RANGES:
        if name in configs:
            low, high = getattr(config, low_field), getattr(config, high_field)
            if not low <= values[name] <= high:
                raise ConfigError(f"{name} must be in the range {low} to {high} inclusive.")


def _share_auto_offset_reset(name: str, value: Any, _values: Mapping[str, Any], _config: Config) -> None:
    from broker.share.offset_reset import parse_offset_reset

    try:
        parse_offset_reset(value)
    except ValueError:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Invalid value `{value}` for configuration {name}. "
            "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        ) from None


SHARE_GROUP_CONFIG_DEFS = [
    GroupConfigDef(
        "share.session.timeout.ms",
        ConfigType.INT,
        "group_share_session_timeout_ms",
        "group.share.session.timeout.ms",
        "The timeout to detect client failures when using the share group protocol.",
        _at_least(1),
    ),
    GroupConfigDef(
        "share.heartbeat.interval.ms",
        ConfigType.INT,
        "group_share_heartbeat_interval_ms",
        "group.share.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a share group.",
        _at_least(1),
    ),
    GroupConfigDef(
        "share.record.lock.duration.ms",
        ConfigType.INT,
        "group_share_record_lock_duration_ms",
        "group.share.record.lock.duration.ms",
        "The record acquisition lock duration in milliseconds for share groups.",
        _at_least(1000),
    ),
    GroupConfigDef(
        "share.delivery.count.limit",
        ConfigType.INT,
        "group_share_delivery_count_limit",
        "group.share.delivery.count.limit",
        "The maximum number of delivery attempts for a record delivered to a share group.",
        _at_least(2),
    ),
    GroupConfigDef(
        "share.partition.max.record.locks",
        ConfigType.INT,
        "group_share_partition_max_record_locks",
        "group.share.partition.max.record.locks",
        "Share-group record lock limit per share-partition.",
        _at_least(100),
    ),
    GroupConfigDef(
        "share.auto.offset.reset",
        ConfigType.STRING,
        "share_auto_offset_reset",
        "",
        "The strategy to initialize the share-partition start offset: earliest, latest (the default) or by_duration:<PnDTnHnMn.nS>.",
        _share_auto_offset_reset,
    ),
    GroupConfigDef(
        "share.isolation.level",
        ConfigType.STRING,
        "share_isolation_level",
        "",
        "Controls how to read records written transactionally: read_committed or read_uncommitted (the default).",
        _one_of("read_committed", "read_uncommitted"),
    ),
    GroupConfigDef(
        "share.assignment.interval.ms",
        ConfigType.INT,
        "group_share_assignment_interval_ms",
        "group.share.assignment.interval.ms",
        "The interval between assignment updates for a share group.",
        _at_least(0),
    ),
    GroupConfigDef(
        "share.assignor.offload.enable",
        ConfigType.BOOLEAN,
        "share_assignor_offload_enable",
        "group.share.assignor.offload.enable",
        "Whether to offload share group assignment to a group coordinator background thread.",
        internal=True,
    ),
    GroupConfigDef(
        "share.renew.acknowledge.enable",
        ConfigType.BOOLEAN,
        "share_renew_acknowledge_enable",
        "",
        "Whether the renew acknowledge type is enabled for the share group.",
    ),
]
GROUP_CONFIG_DEFS.extend(SHARE_GROUP_CONFIG_DEFS)


def _session_exceeds_heartbeat(configs: Mapping[str, str], values: Mapping[str, Any]) -> None:
    """GroupConfig.validateSessionExceedsHeartbeat, after every range check."""
    session, heartbeat = "share.session.timeout.ms", "share.heartbeat.interval.ms"
    if (session in configs or heartbeat in configs) and values[session] <= values[heartbeat]:
        raise ConfigError(f"{session} must be greater than {heartbeat}")


def definitions() -> dict[str, GroupConfigDef]:
    return {d.name: d for d in GROUP_CONFIG_DEFS}


# Group configs with no broker config behind them (Kafka's synonym list is empty): their defaults.
# share.assignor.offload.enable: kaflet's assignor always runs in the heartbeat (docs/decisions.md).
_FIXED_DEFAULTS = {
    "share_auto_offset_reset": "latest",
    "share_isolation_level": "read_uncommitted",
    "share_renew_acknowledge_enable": True,
    "share_assignor_offload_enable": True,
}


def _broker_value(config: Config, d: GroupConfigDef) -> Any:
    if d.broker_default in _FIXED_DEFAULTS:
        return _FIXED_DEFAULTS[d.broker_default]
    return getattr(config, d.broker_default)


class GroupConfigs:
    """Every group's own configs, kept as Kafka stores them: strings, validated when set."""

    def __init__(self, data_dir: Path, config: Config) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self.config = config
        self._groups: dict[str, dict[str, str]] = {}
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            self._groups = {g: dict(v) for g, v in stored.get("groups", {}).items()}

    def get(self, group_id: str, name: str | None = None) -> Any:
        """The group's own settings, typed ({} if none); with `name`, one of them or None."""
        own = self._groups.get(group_id, {})
        defs = definitions()
        if name is not None:
            raw = own.get(name)
            return None if raw is None or name not in defs else parse(name, raw, defs[name].type)
        return {n: parse(n, v, defs[n].type) for n, v in own.items() if n in defs}

    def stored(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def validate(self, group_id: str, configs: Mapping[str, str]) -> dict[str, str]:
        """Check a group's complete new set of configs; returns it normalized. ConfigError with
        Kafka's message: unknown names, types, then the bounds, in definition order."""
        defs = definitions()
        for name in configs:
            if name not in defs:
                raise ConfigError(f"Unknown group config name: {name}")
        values: dict[str, Any] = {}
        for d in GROUP_CONFIG_DEFS:
            raw = configs.get(d.name)
            values[d.name] = parse(d.name, raw, d.type) if raw is not None else _broker_value(self.config, d)
        for d in GROUP_CONFIG_DEFS:
            if d.name in configs and d.check is not None:
                d.check(d.name, values[d.name], values, self.config)
        _share_ranges(configs, values, self.config)
        _session_exceeds_heartbeat(configs, values)
        return {d.name: render(values[d.name], d.type) or "" for d in GROUP_CONFIG_DEFS if d.name in configs}

    def set(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs (already validated) and persist them."""
        before = self._groups.get(group_id)
        if configs:
            self._groups[group_id] = dict(configs)
        else:
            self._groups.pop(group_id, None)
        try:
            self._save()
        except OSError:
            if before is None:
                self._groups.pop(group_id, None)
            else:
                self._groups[group_id] = before
            raise

    def _save(self) -> None:
        write_json(self.path, {"version": 1, "groups": self._groups})

    def describe(self, group_id: str) -> list[ConfigEntry]:
        own = self._groups.get(group_id, {})
        entries = []
        for d in sorted(GROUP_CONFIG_DEFS, key=lambda d: d.name):
            if d.internal and d.name not in own:
                continue
            default = _broker_value(self.config, d)
            broker_value = default if isinstance(default, str) else render(default, d.type)  # list defaults are kept as text
            synonyms = []
            if d.name in own:
                synonyms.append(Synonym(d.name, own[d.name], GROUP_CONFIG_SOURCE))  # type: ignore[arg-type]
            # share.auto.offset.reset and its kind have no broker config: their own default is the synonym
            synonyms.append(Synonym(d.broker_config or d.name, broker_value, ConfigSource.DEFAULT_CONFIG))
            entries.append(
                ConfigEntry(
                    name=d.name,
                    value=own.get(d.name, broker_value),
                    source=GROUP_CONFIG_SOURCE if d.name in own else ConfigSource.DEFAULT_CONFIG,  # type: ignore[arg-type]
                    type=d.type,
                    doc=d.doc,
                    synonyms=synonyms,
                )
            )
        return entries
